package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// CaptureOptions say what to capture and how to name it.
type CaptureOptions struct {
	Anchor   Anchor
	Excludes []string
	// Reason is recorded in the manifest ("capture" when empty, ReasonGuard for a guard).
	Reason string
	// Guard marks the checkpoint as the guard a restore takes first.
	Guard bool
	// Now is the clock; the manifest's CreatedAt comes from it.
	Now func() time.Time
	// Progress, when set, is called after each file with running totals.
	Progress func(files int, bytes int64)
	// Baseline is the workspace's previous checkpoint: a file whose stat is as it recorded (Unchanged)
	// is taken from it without being read, and its blob is not looked up again (the baseline's store
	// holds it). Store.Create sets it to the session's latest checkpoint; nil reads every file.
	Baseline *Manifest
	// inRestore marks the guard a restore takes while it holds the workspace's lock itself.
	inRestore bool
	// mayOmit, set for a restore's guard, says which paths need not be in it: every path the restore
	// does not write. A name (or link target) a manifest cannot record is left out
	// (CaptureStats.Unrecordable) only there; one the restore would overwrite fails the guard, which
	// must hold it to undo the restore. Without mayOmit every such path is left out.
	mayOmit func(rel string) bool
}

// CaptureStats are the facts of one capture.
type CaptureStats struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Hashed counts the files whose bytes were read; the others were Unchanged since the Baseline.
	Hashed int `json:"hashed"`
	// UploadedBlobs and IncrementalBytes count only blobs the store did not hold before.
	UploadedBlobs    int   `json:"uploadedBlobs"`
	IncrementalBytes int64 `json:"incrementalBytes"`
	// ManifestBytes is the size of the stored manifest (a schema 3 root and all its chunks), and
	// ManifestUploadedBytes what storing it sent: the root and the chunks the store did not hold.
	// Both are 0 when no manifest was stored (Create found the capture identical to the latest).
	ManifestBytes         int64 `json:"manifestBytes,omitempty"`
	ManifestUploadedBytes int64 `json:"manifestUploadedBytes,omitempty"`
	// ResentBlobs and ResentBytes count blobs (files' and manifest chunks') the store held but could
	// not renew in place, so the capture sent them again; they are not in UploadedBlobs.
	ResentBlobs int   `json:"resentBlobs,omitempty"`
	ResentBytes int64 `json:"resentBytes,omitempty"`
	// StoredAgainBlobs counts blobs (files' and manifest chunks') a blob sweep deleted while the
	// capture ran, which it stored again after the sweep's delete window closed.
	StoredAgainBlobs int `json:"storedAgainBlobs,omitempty"`
	// Skipped are paths that are neither regular files, directories nor symlinks (sockets, devices).
	Skipped []string `json:"skipped,omitempty"`
	// Vanished are paths that disappeared while the capture walked the workspace; they are not in it.
	Vanished []string `json:"vanished,omitempty"`
	// RestoreTemporaries are files a restore killed mid-write left behind (IsRestoreTemporary); they
	// are never captured.
	RestoreTemporaries []string `json:"restoreTemporaries,omitempty"`
	// Unrecordable are paths left out because their name or link target is not valid UTF-8, which a
	// manifest cannot record (a directory stands for everything below it). A restore never deletes
	// a workspace file, so it leaves them as they are.
	Unrecordable []string `json:"unrecordable,omitempty"`
}

// Capture walks the workspace dir and returns its manifest; the bytes of every file the blob space
// does not hold yet are uploaded. Symbolic links are recorded with their target and never followed
// or read through; excluded paths (and whole excluded directories) are skipped, and so is a path
// that disappears during the walk (reported in Vanished). A name or link target that is not valid
// UTF-8 is left out and reported in Unrecordable, and the rest captured: one such name must not cost
// every checkpoint of the workspace. Only a restore's guard fails on one (a *NameError) where the
// restore writes, since it could not undo that write.
func Capture(ctx context.Context, dir string, blobs Blobs, opts CaptureOptions) (*Manifest, CaptureStats, error) {
	var st CaptureStats
	for _, s := range append([]string{opts.Anchor.Session, opts.Anchor.TurnDigest, opts.Reason}, opts.Excludes...) {
		if !utf8.ValidString(s) {
			return nil, st, fmt.Errorf("%q is not valid UTF-8: a checkpoint manifest cannot record it", s)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, st, err
	}
	defer root.Close()
	// A restore running meanwhile would leave half of its writes in the capture.
	if !opts.inRestore {
		lock, err := shareWorkspace(root)
		if err != nil {
			return nil, st, fmt.Errorf("capture %s: %w", dir, err)
		}
		defer lock.Close()
	}
	ex := CompileExcludes(withGitExcludes(opts.Excludes))
	reason := opts.Reason
	switch {
	case reason == "" && opts.Guard:
		reason = ReasonGuard
	case reason == "":
		reason = "capture"
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	m := &Manifest{SchemaVersion: SchemaVersion, CreatedAt: now().UTC(), Anchor: opts.Anchor, Reason: reason, Guard: opts.Guard, Excludes: ex.Patterns(), Files: []Entry{}}
	uploaded := map[string]bool{}
	base := newBaseline(opts.Baseline)
	if opts.Baseline != nil {
		m.Files = make([]Entry, 0, len(opts.Baseline.Files)+len(opts.Baseline.Files)/8)
	}
	omit := opts.mayOmit
	if omit == nil {
		omit = func(string) bool { return true }
	}
	var bad NameError // once a name is bad nothing is stored: the walk only looks for the others
	badName := func(b BadName) {
		if len(bad.Names) < MaxBadNames {
			bad.Names = append(bad.Names, b)
		}
		bad.Count++
	}

	descend := func(rel string) bool { return utf8.ValidString(rel) && !ex.Match(rel, true) }
	// With a baseline every regular file's stat is taken, whether the baseline knows it or not: a
	// new file costs one stat more, and a lookup per file from the readers is spared.
	tree, err := readTree(ctx, root, walkOptions{descend: descend, stat: base != nil})
	if err == nil {
		err = visitTree(tree, func(rel string, d *walkChild, err error) error {
			if err != nil && errors.Is(err, fs.ErrNotExist) {
				st.Vanished = append(st.Vanished, rel)
				return fs.SkipDir
			}
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			isDir := d.typ == fs.ModeDir
			if ex.Match(rel, isDir) {
				return fs.SkipDir
			}
			if !isDir && IsRestoreTemporary(rel) {
				st.RestoreTemporaries = append(st.RestoreTemporaries, rel)
				return nil
			}
			if !utf8.ValidString(rel) {
				if omit(rel) {
					st.Unrecordable = append(st.Unrecordable, rel)
				} else {
					badName(BadName{Path: rel})
				}
				return fs.SkipDir // everything below a directory carries the name
			}
			switch {
			case isDir:
				return nil
			case d.typ == fs.ModeSymlink:
				target, err := root.Readlink(rel)
				if errors.Is(err, fs.ErrNotExist) {
					st.Vanished = append(st.Vanished, rel)
					return nil
				}
				if err != nil {
					return err
				}
				if !utf8.ValidString(target) {
					if omit(rel) {
						st.Unrecordable = append(st.Unrecordable, rel)
					} else {
						badName(BadName{Path: rel, Target: target})
					}
					return nil
				}
				m.Files = append(m.Files, Entry{Path: rel, Type: TypeSymlink, Target: target})
			case d.typ == 0 && bad.Count > 0:
				return nil
			case d.typ == 0:
				e, reused, gone, err := unchangedEntry(d, base.find(rel), base.start())
				if err == nil && !reused && !gone {
					e, gone, err = captureFile(ctx, root, rel, blobs, uploaded, &st)
				}
				if err != nil {
					return err
				}
				if gone {
					st.Vanished = append(st.Vanished, rel)
					return nil
				}
				m.Files = append(m.Files, e)
				st.Bytes += e.Size
			default:
				st.Skipped = append(st.Skipped, rel)
				return nil
			}
			st.Files++
			if opts.Progress != nil {
				opts.Progress(st.Files, st.Bytes)
			}
			return nil
		})
	}
	if err == nil && bad.Count > 0 {
		err = &bad
	}
	if err != nil {
		return nil, st, fmt.Errorf("capture %s: %w", dir, err)
	}
	m.IncrementalBytes = st.IncrementalBytes
	return m, st, nil
}

// withGitExcludes is gitExcludes followed by the patterns of excludes not already among them.
func withGitExcludes(excludes []string) []string {
	out := append([]string(nil), gitExcludes...)
	for _, p := range excludes {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// baseline is the previous manifest's files in path order, looked up by a cursor that only moves
// forward: the walk visits files in path order too, so finding each costs a comparison or two, not
// a map of every path.
type baseline struct {
	files   []Entry
	i       int
	created time.Time
}

// newBaseline is m's files as a baseline (sorted, if a manifest came unsorted, in a copy); nil
// without a manifest.
func newBaseline(m *Manifest) *baseline {
	if m == nil {
		return nil
	}
	files := m.Files
	less := func(a, b Entry) int { return strings.Compare(a.Path, b.Path) }
	if !slices.IsSortedFunc(files, less) {
		files = slices.SortedFunc(slices.Values(files), less)
	}
	return &baseline{files: files, created: m.CreatedAt}
}

// find is the baseline's entry for the regular file rel when it recorded its stat, else nil. Calls
// must come in path order.
func (b *baseline) find(rel string) *Entry {
	if b == nil {
		return nil
	}
	for b.i < len(b.files) && b.files[b.i].Path < rel {
		b.i++
	}
	if b.i < len(b.files) && b.files[b.i].Path == rel {
		if e := &b.files[b.i]; e.Type == TypeFile && e.MTimeNs != 0 {
			return e
		}
	}
	return nil
}

// start is when the baseline's capture started.
func (b *baseline) start() time.Time {
	if b == nil {
		return time.Time{}
	}
	return b.created
}

// unchangedEntry is *prev when the walked file d is Unchanged since the baseline recorded it as prev
// (reused); a nil prev is no baseline entry. Only d's stat, taken by the walk, is looked at, never
// its bytes.
func unchangedEntry(d *walkChild, prev *Entry, baseStart time.Time) (e Entry, reused, gone bool, err error) {
	if prev == nil {
		return Entry{}, false, false, nil
	}
	if errors.Is(d.statErr, fs.ErrNotExist) {
		return Entry{}, false, true, nil
	}
	if d.statErr != nil {
		return Entry{}, false, false, d.statErr
	}
	if !d.statted || !Unchanged(*prev, d.stat, baseStart) {
		return Entry{}, false, false, nil
	}
	return *prev, true, false, nil
}

// captureFile hashes one regular file and uploads it when the blob space lacks it; gone reports a
// file that no longer exists.
func captureFile(ctx context.Context, root *os.Root, rel string, blobs Blobs, uploaded map[string]bool, st *CaptureStats) (e Entry, gone bool, err error) {
	f, fi, err := openRegular(root, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, true, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	f.Close()
	if err != nil {
		return Entry{}, false, err
	}
	st.Hashed++
	// The stat is the one taken before the bytes were read: a write during the read changes it, or
	// falls within RacyWindow of this capture's start, so the next capture reads the file again.
	e = withStat(Entry{Path: rel, Type: TypeFile, Mode: uint32(fi.Mode().Perm()), Size: n, Hash: hex.EncodeToString(h.Sum(nil))}, fileStatOf(fi))
	if uploaded[e.Hash] {
		return e, false, nil
	}
	var again resent
	found, err := hasRenewing(ctx, blobs, e.Hash, e.Size, &again)
	st.ResentBlobs, st.ResentBytes = st.ResentBlobs+again.blobs, st.ResentBytes+again.bytes
	if err != nil {
		return Entry{}, false, err
	}
	if found {
		return e, false, nil
	}
	f, _, err = openRegular(root, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, true, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	defer f.Close()
	if err := blobs.Put(ctx, e.Hash, e.Size, f); err != nil {
		return Entry{}, false, fmt.Errorf("%s changed while it was captured or could not be stored: %w", rel, err)
	}
	uploaded[e.Hash] = true
	st.UploadedBlobs++
	st.IncrementalBytes += e.Size
	return e, false, nil
}

// afterLstat, set only by tests, runs between openRegular's lstat and its open.
var afterLstat func(rel string)

// openRegular opens rel for reading only if it is a regular file, and the very file lstat saw: a path
// swapped for a symbolic link between the two is refused rather than read through.
//
// The open does not wait (O_NONBLOCK, harmless on a regular file): a named pipe swapped in between
// the lstat and the open would otherwise block it until some writer came, hanging the capture or
// restore past its context; it is then refused as not the file lstat saw.
func openRegular(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	li, err := root.Lstat(rel)
	if err != nil {
		return nil, nil, err
	}
	if !li.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is no longer a regular file", rel)
	}
	if afterLstat != nil {
		afterLstat(rel)
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !os.SameFile(li, fi) {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s was replaced while it was captured", rel)
		}
		return nil, nil, err
	}
	return f, fi, nil
}
