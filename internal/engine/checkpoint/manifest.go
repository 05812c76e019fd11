package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// SchemaVersion is the version of the manifest format this package writes. Version 2 adds each
// file's stat (Entry.MTimeNs, CTimeNs, Inode) for the next capture's quick-check; version 3 stores
// the entries in content-addressed chunks named by a small root (chunk.go), so a capture uploads
// only the chunks its changes touched. Versions 1 and 2 are still read (and written, for a manifest
// that says so); a version 1 manifest's files are simply read again by the next capture.
const SchemaVersion = 3

// minSchemaVersion is the oldest manifest format this package reads.
const minSchemaVersion = 1

// ReasonGuard is the Reason of a guard checkpoint.
const ReasonGuard = "guard"

// EntryType is what a manifest entry records.
type EntryType string

const (
	// TypeFile is a regular file whose bytes are the blob Hash.
	TypeFile EntryType = "file"
	// TypeSymlink is a symbolic link recorded with its target; its target is never read.
	TypeSymlink EntryType = "symlink"
)

// Entry is one file of a checkpoint.
type Entry struct {
	// Path is slash-separated and relative to the workspace root.
	Path string    `json:"path"`
	Type EntryType `json:"type"`
	// Mode holds the permission bits (0o644); symlinks carry none.
	Mode uint32 `json:"mode,omitempty"`
	// Size is the file's length in bytes (0 for a symlink).
	Size int64 `json:"size"`
	// Hash is the SHA-256 hex digest of the file's bytes, the key of its blob.
	Hash string `json:"sha256,omitempty"`
	// Target is a symlink's target, as read with readlink.
	Target string `json:"target,omitempty"`
	// MTimeNs, CTimeNs and Inode are a file's stat as the capture that read it saw it (schema 2):
	// the next capture reads the file again only when they or its size or mode differ (Unchanged).
	// They say nothing about the content and are not part of ContentDigest.
	MTimeNs int64  `json:"mtimeNs,omitempty"`
	CTimeNs int64  `json:"ctimeNs,omitempty"`
	Inode   uint64 `json:"inode,omitempty"`
}

// Anchor says where in a recorded session a checkpoint was minted and by whom.
type Anchor struct {
	Session string `json:"session,omitempty"`
	Turn    int64  `json:"turn"`
	Step    int64  `json:"step"`
	// TurnDigest is the transcript digest of the turn the checkpoint was taken at.
	TurnDigest string `json:"turnDigest,omitempty"`
	// Author minted the checkpoint; only session.AuthorRecorder may anchor a rewind.
	Author session.Author `json:"author"`
}

// AnchorsRewind reports whether a rewind may start from this checkpoint: only checkpoints the
// recorder minted are trusted as anchors; one an agent wrote is evidence of nothing.
func (a Anchor) AnchorsRewind() bool { return a.Author == session.AuthorRecorder && a.Session != "" }

// Manifest is one checkpoint: the files of a workspace at a moment. Its ID is the SHA-256 of its
// JSON encoding, so a manifest cannot be altered without changing its name.
type Manifest struct {
	SchemaVersion int `json:"schemaVersion"`
	// CreatedAt is when the capture started: the files' stat is judged racy against it (RacyWindow).
	CreatedAt time.Time `json:"createdAt"`
	Anchor    Anchor    `json:"anchor"`
	// Reason is why the checkpoint was taken: "capture", "git" or "guard" (before a restore).
	Reason string `json:"reason,omitempty"`
	// Guard marks the checkpoint a restore took of the workspace before writing. A guard is named
	// only by its id: "step N" and "latest" never resolve to one, and prune keeps guards apart.
	Guard bool `json:"guard,omitempty"`
	// Excludes are the glob patterns the capture skipped; restore reports leftovers through them.
	Excludes []string `json:"excludes,omitempty"`
	// IncrementalBytes is what this capture uploaded: bytes of blobs the store did not hold yet.
	IncrementalBytes int64   `json:"incrementalBytes"`
	Files            []Entry `json:"files"`
	// GitCommit, on a git workspace's checkpoint, is the commit object holding the files; their
	// bytes are read from the repository, not the blob space.
	GitCommit string `json:"gitCommit,omitempty"`
}

// Encode is the manifest's canonical JSON with its files listed inline (sorted by path), as a schema
// 1 or 2 manifest is stored, and the ID it names. Save stores a schema 3 manifest as chunks instead.
func (m *Manifest) Encode() (id string, data []byte, err error) {
	m.Files = sortedByPath(m.Files)
	data, err = json.Marshal(m)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), data, nil
}

// ContentDigest identifies the files alone (paths, types, modes, hashes, targets), so two captures of
// the same tree compare equal whatever their time or anchor.
func (m *Manifest) ContentDigest() string {
	h := sha256.New()
	files := append([]Entry(nil), m.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, e := range files {
		fmt.Fprintf(h, "%q %s %o %d %s %q\n", e.Path, e.Type, e.Mode, e.Size, e.Hash, e.Target)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SameFiles reports whether m and other hold the same files (paths, types, modes, sizes, hashes and
// link targets, whatever their stat, time or anchor): what ContentDigest compares, without hashing.
func (m *Manifest) SameFiles(other *Manifest) bool {
	if len(m.Files) != len(other.Files) {
		return false
	}
	a, b := sortedByPath(m.Files), sortedByPath(other.Files)
	for i := range a {
		x, y := a[i], b[i]
		if x.Path != y.Path || x.Type != y.Type || x.Mode != y.Mode || x.Size != y.Size || x.Hash != y.Hash || x.Target != y.Target {
			return false
		}
	}
	return true
}

// sortedByPath is files in path order, sorted in place when they are not already (a capture's are
// nearly so: its walk visits a directory's entries in name order).
func sortedByPath(files []Entry) []Entry {
	less := func(a, b Entry) int { return strings.Compare(a.Path, b.Path) }
	if !slices.IsSortedFunc(files, less) {
		slices.SortFunc(files, less)
	}
	return files
}

// inDotGit reports whether the manifest path p is a .git or lies below one.
func inDotGit(p string) bool {
	return p == ".git" || strings.HasPrefix(p, ".git/") || strings.Contains(p, "/.git/") || strings.HasSuffix(p, "/.git")
}

// isSHA256Hex is session.ValidBlobHash without a regular expression, which costs a second over the
// files of a 250,000-file manifest.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Validate checks everything a restore trusts: the schema version, every path (relative, clean, no
// "..", no duplicates, no file nested under another entry) and every blob hash. A manifest that fails
// is refused before anything is written (seed D16).
func (m *Manifest) Validate() error {
	if m.SchemaVersion < minSchemaVersion || m.SchemaVersion > SchemaVersion {
		return &ManifestError{Reason: fmt.Sprintf("schema version %d is not one of %d to %d", m.SchemaVersion, minSchemaVersion, SchemaVersion)}
	}
	if m.GitCommit != "" && !commitIDRE.MatchString(m.GitCommit) {
		return &ManifestError{Reason: fmt.Sprintf("git commit %q is not 40 lowercase hex characters", m.GitCommit)}
	}
	for _, s := range append([]string{m.Anchor.Session, m.Anchor.TurnDigest, string(m.Anchor.Author), m.Reason}, m.Excludes...) {
		if !utf8.ValidString(s) {
			return &ManifestError{Reason: fmt.Sprintf("%q is not valid UTF-8", s)}
		}
	}
	// A manifest in path order (as Save stores it) is checked for duplicates and nesting in one pass
	// over its neighbours; only one out of order needs a set of its paths.
	sorted := slices.IsSortedFunc(m.Files, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	var seen map[string]bool
	if !sorted {
		seen = make(map[string]bool, len(m.Files))
	}
	// total is the bytes of all files and link targets, which a capture's incremental bytes never
	// exceed.
	var total int64
	for i, e := range m.Files {
		if err := ValidPath(e.Path); err != nil {
			return err
		}
		if m.SchemaVersion >= 2 && inDotGit(e.Path) {
			// A capture never records one (gitExcludes), so a restore never writes into a repository.
			return &ManifestError{Path: e.Path, Reason: "a .git path segment: a repository's own data is never part of a checkpoint"}
		}
		if (sorted && i > 0 && m.Files[i-1].Path == e.Path) || seen[e.Path] {
			return &ManifestError{Path: e.Path, Reason: "listed twice"}
		}
		if !sorted {
			seen[e.Path] = true
		}
		if (e.MTimeNs != 0 || e.CTimeNs != 0 || e.Inode != 0) && (e.Type != TypeFile || m.SchemaVersion < 2) {
			return &ManifestError{Path: e.Path, Reason: fmt.Sprintf("stat fields on a %s entry of a schema %d manifest", e.Type, m.SchemaVersion)}
		}
		switch e.Type {
		case TypeFile:
			if !isSHA256Hex(e.Hash) {
				return &ManifestError{Path: e.Path, Reason: fmt.Sprintf("blob hash %q is not 64 lowercase hex characters", e.Hash)}
			}
			if e.Size < 0 || e.Mode&^uint32(fs.ModePerm) != 0 {
				return &ManifestError{Path: e.Path, Reason: "negative size or mode bits beyond permissions"}
			}
			if total > math.MaxInt64-e.Size {
				return &ManifestError{Path: e.Path, Reason: "the sizes of the files add up past 2^63-1 bytes"}
			}
			total += e.Size
		case TypeSymlink:
			if e.Target == "" || strings.ContainsRune(e.Target, 0) || !utf8.ValidString(e.Target) {
				return &ManifestError{Path: e.Path, Reason: "symlink without a usable target"}
			}
			if len(e.Target) > MaxLinkTargetBytes {
				return &ManifestError{Path: e.Path, Reason: fmt.Sprintf("a symlink target of %d bytes, longer than one may be (%d)", len(e.Target), MaxLinkTargetBytes)}
			}
			// A git checkpoint counts a changed link's target as new bytes.
			total = min(total, math.MaxInt64-int64(len(e.Target))) + int64(len(e.Target))
		default:
			return &ManifestError{Path: e.Path, Reason: fmt.Sprintf("unknown entry type %q", e.Type)}
		}
	}
	// Listing and pruning add these numbers up: one no capture can have uploaded would skew them.
	if m.IncrementalBytes < 0 || m.IncrementalBytes > total {
		return &ManifestError{Reason: fmt.Sprintf("%d incremental bytes, outside 0 to the %d bytes its files hold", m.IncrementalBytes, total)}
	}
	// No entry may sit below a file or a link: restoring it would need to write through one. Every
	// path is clean, so its directories are its prefixes up to a slash.
	if !sorted {
		for p := range seen {
			for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p[:i], '/') {
				if seen[p[:i]] {
					return &ManifestError{Path: p, Reason: fmt.Sprintf("nested under the entry %q", p[:i])}
				}
			}
		}
		return nil
	}
	// In path order every path beginning with an entry's path follows it without a gap, so the
	// entries that prefix the current path form a stack: those that stop prefixing it never will again.
	var prefixes []string
	for _, e := range m.Files {
		p := e.Path
		for len(prefixes) > 0 && !strings.HasPrefix(p, prefixes[len(prefixes)-1]) {
			prefixes = prefixes[:len(prefixes)-1]
		}
		for _, q := range prefixes {
			if p[len(q)] == '/' {
				return &ManifestError{Path: p, Reason: fmt.Sprintf("nested under the entry %q", q)}
			}
		}
		prefixes = append(prefixes, p)
	}
	return nil
}

// ValidPath checks a manifest path: slash-separated, relative, clean, without "." or ".." segments,
// segments longer than MaxNameBytes or NUL bytes, and valid UTF-8 (JSON cannot carry other bytes). Every other byte is part of a name,
// as on Linux: a backslash, a newline or a leading dash is an ordinary character, never a separator or
// an option; only where the OS reads a backslash as a separator is one refused.
func ValidPath(p string) error {
	switch {
	case p == "":
		return &ManifestError{Path: p, Reason: "empty path"}
	case strings.HasPrefix(p, "/"):
		return &ManifestError{Path: p, Reason: "absolute path"}
	case strings.ContainsRune(p, 0):
		return &ManifestError{Path: p, Reason: "NUL in path"}
	case filepath.Separator == '\\' && strings.ContainsRune(p, '\\'):
		return &ManifestError{Path: p, Reason: "backslash in path, a separator on this system"}
	case !utf8.ValidString(p):
		return &ManifestError{Path: p, Reason: "not valid UTF-8"}
	}
	for rest, more := p, true; more; {
		var seg string
		seg, rest, more = strings.Cut(rest, "/")
		if seg == "" || seg == "." || seg == ".." {
			return &ManifestError{Path: p, Reason: "empty, \".\" or \"..\" path segment"}
		}
		if len(seg) > MaxNameBytes {
			return &ManifestError{Path: p, Reason: fmt.Sprintf("a path segment of %d bytes, longer than a file name may be (%d)", len(seg), MaxNameBytes)}
		}
	}
	return nil
}

// MaxNameBytes (NAME_MAX) and MaxLinkTargetBytes (PATH_MAX less its NUL) bound what the kernel
// writes: a longer name or link target fails with ENAMETOOLONG, so a manifest holding one is refused
// before a restore writes anything, not halfway through it.
const (
	MaxNameBytes       = 255
	MaxLinkTargetBytes = 4095
)

// Summary is what listing, addressing and pruning need of a checkpoint.
type Summary struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
	Anchor    Anchor    `json:"anchor"`
	Reason    string    `json:"reason,omitempty"`
	// Guard is true for a guard checkpoint (also one recorded before the Guard field, by its Reason).
	Guard            bool  `json:"guard,omitempty"`
	Files            int   `json:"files"`
	Bytes            int64 `json:"bytes"`
	IncrementalBytes int64 `json:"incrementalBytes"`
	// GitCommit is a git checkpoint's commit, kept from git gc by the ref GitRefPrefix+GitCommit.
	GitCommit string `json:"gitCommit,omitempty"`
}

// Summarize describes a manifest whose ID is id.
func Summarize(id string, m *Manifest) Summary {
	s := Summary{ID: id, CreatedAt: m.CreatedAt, Anchor: m.Anchor, Reason: m.Reason, Guard: m.Guard || m.Reason == ReasonGuard, Files: len(m.Files), IncrementalBytes: m.IncrementalBytes, GitCommit: m.GitCommit}
	for _, e := range m.Files {
		s.Bytes += e.Size
	}
	return s
}

// newer orders checkpoints: by step, then creation time, then id, so the order is total.
func newer(a, b Summary) bool {
	if a.Anchor.Step != b.Anchor.Step {
		return a.Anchor.Step > b.Anchor.Step
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.ID > b.ID
}

// SortNewestFirst orders summaries newest first.
func SortNewestFirst(list []Summary) {
	sort.SliceStable(list, func(i, j int) bool { return newer(list[i], list[j]) })
}
