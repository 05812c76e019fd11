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
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// GuardMode says what happens when the guard checkpoint before a restore cannot be taken (seed D10).
type GuardMode string

const (
	// GuardWarn restores anyway and reports the failure (the default).
	GuardWarn GuardMode = "warn"
	// GuardRequire refuses to restore without a guard.
	GuardRequire GuardMode = "require"
	// GuardOff takes no guard.
	GuardOff GuardMode = "off"
)

// ParseGuardMode reads a guard mode; "" is GuardWarn.
func ParseGuardMode(s string) (GuardMode, error) {
	switch GuardMode(s) {
	case "", GuardWarn:
		return GuardWarn, nil
	case GuardRequire, GuardOff:
		return GuardMode(s), nil
	}
	return "", fmt.Errorf("guard mode %q: use warn, require or off", s)
}

// Action is what a restore does to one path.
type Action string

const (
	ActionOverwrite Action = "overwrite"
	ActionCreate    Action = "create"
	ActionUnchanged Action = "unchanged"
)

// Change is one path a restore touches or would touch.
type Change struct {
	Path   string    `json:"path"`
	Type   EntryType `json:"type"`
	Action Action    `json:"action"`
	// Size is the checkpoint's size of the file; CurrentSize what the workspace holds now.
	Size        int64 `json:"size"`
	CurrentSize int64 `json:"currentSize,omitempty"`
}

// Preview is what a restore of a checkpoint would do, computed without writing anything.
type Preview struct {
	ID      string   `json:"id"`
	Changes []Change `json:"changes"`
	// Leftovers exist in the workspace but not in the checkpoint: a restore leaves them in place.
	// Only a full restore reports them.
	Leftovers []string `json:"leftovers"`
	// Bytes is what the overwrites and creations write.
	Bytes int64 `json:"bytes"`
}

// Count is the number of changes with action a.
func (p Preview) Count(a Action) int {
	n := 0
	for _, c := range p.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

// RestoreOptions shape a restore.
type RestoreOptions struct {
	// Files restricts the restore to these manifest paths; a path the checkpoint lacks fails closed.
	Files []string
	Guard GuardMode
	// GuardAnchor anchors the guard checkpoint (normally the session's latest turn and step).
	GuardAnchor Anchor
	Now         func() time.Time
	// StatFS reports the free space of a file system the restore writes to; nil is statfs(2).
	StatFS StatFS
}

// RestoreResult is what a restore did.
type RestoreResult struct {
	Preview
	Written int `json:"written"`
	// Guard is the checkpoint holding the workspace as it was before: restoring it undoes this restore.
	Guard        string `json:"guard,omitempty"`
	GuardWarning string `json:"guardWarning,omitempty"`
	// GuardOmitted are workspace paths the guard could not record (names or link targets that are not
	// valid UTF-8) and left out; the restore does not write them, so restoring the guard still undoes it.
	GuardOmitted []string `json:"guardOmitted,omitempty"`
}

// destKind is what a workspace path is.
type destKind int

const (
	kindMissing destKind = iota
	kindFile
	kindSymlink
	kindDir
	kindOther
)

// destFact is what the workspace holds at a manifest path.
type destFact struct {
	kind   destKind
	size   int64
	mode   uint32
	hash   string // for a regular file of the checkpoint's size
	target string // for a symlink
	// unsafeAt and unsafeWhy name an ancestor that is a link or not a directory.
	unsafeAt, unsafeWhy string
}

// workspaceFacts are gathered by gather and judged by plan.
type workspaceFacts struct {
	dest  map[string]destFact
	files []string // every non-directory path in the workspace, excludes applied
}

// selectEntries picks the entries a restore covers; every requested path must be in the manifest.
//
// A path in a .git, which a schema 1 manifest may hold, is never selected: a restore does not write
// into a repository.
func selectEntries(id string, m *Manifest, files []string) ([]Entry, error) {
	all := m.Files
	if slices.ContainsFunc(all, func(e Entry) bool { return inDotGit(e.Path) }) {
		all = slices.DeleteFunc(slices.Clone(all), func(e Entry) bool { return inDotGit(e.Path) })
	}
	if len(files) == 0 {
		return all, nil
	}
	byPath := make(map[string]Entry, len(all))
	for _, e := range all {
		byPath[e.Path] = e
	}
	var sel []Entry
	var unknown []string
	seen := map[string]bool{}
	for _, f := range files {
		e, ok := byPath[f]
		if !ok {
			unknown = append(unknown, f)
			continue
		}
		if !seen[f] {
			seen[f] = true
			sel = append(sel, e)
		}
	}
	if len(unknown) > 0 {
		return nil, &UnknownPathsError{ID: id, Paths: unknown}
	}
	return sel, nil
}

// plan decides, without I/O, what restoring sel onto a workspace with facts f does.
func plan(id string, m *Manifest, sel []Entry, f workspaceFacts, full bool) (Preview, error) {
	p := Preview{ID: id, Changes: []Change{}, Leftovers: []string{}}
	for _, e := range sel {
		d := f.dest[e.Path]
		if d.unsafeAt != "" {
			return Preview{}, &UnsafeDestinationError{Path: e.Path, At: d.unsafeAt, Reason: d.unsafeWhy}
		}
		c := Change{Path: e.Path, Type: e.Type, Size: e.Size, CurrentSize: d.size}
		switch {
		case d.kind == kindDir:
			return Preview{}, &UnsafeDestinationError{Path: e.Path, At: e.Path, Reason: "a directory"}
		case d.kind == kindOther:
			return Preview{}, &UnsafeDestinationError{Path: e.Path, At: e.Path, Reason: "neither a regular file nor a symbolic link"}
		case e.Type == TypeFile && d.kind == kindSymlink:
			return Preview{}, &UnsafeDestinationError{Path: e.Path, At: e.Path, Reason: "a symbolic link"}
		case d.kind == kindMissing:
			c.Action = ActionCreate
		case e.Type == TypeFile && d.hash == e.Hash && sameMode(m, d.mode, e.Mode):
			c.Action = ActionUnchanged
		case e.Type == TypeSymlink && d.kind == kindSymlink && d.target == e.Target:
			c.Action = ActionUnchanged
		default:
			c.Action = ActionOverwrite
		}
		if c.Action != ActionUnchanged {
			p.Bytes += e.Size
		}
		p.Changes = append(p.Changes, c)
	}
	if full {
		held := make(map[string]bool, len(m.Files))
		for _, e := range m.Files {
			held[e.Path] = true
		}
		for _, w := range f.files {
			if !held[w] {
				p.Leftovers = append(p.Leftovers, w)
			}
		}
		sort.Strings(p.Leftovers)
	}
	return p, nil
}

// gather reads what the workspace holds at every selected path (never following a link) and, for a
// full restore, every path it holds outside the excludes.
func gather(root *os.Root, m *Manifest, sel []Entry, full bool) (workspaceFacts, error) {
	f := workspaceFacts{dest: make(map[string]destFact, len(sel))}
	ancestors := map[string][2]string{} // dir -> {unsafeAt, why}, "" when fine
	for _, e := range sel {
		var d destFact
		d.unsafeAt, d.unsafeWhy = checkAncestors(root, e.Path, ancestors)
		if d.unsafeAt == "" {
			if err := statDest(root, e, &d); err != nil {
				return f, err
			}
		}
		f.dest[e.Path] = d
	}
	if !full {
		return f, nil
	}
	ex := CompileExcludes(withGitExcludes(m.Excludes))
	err := fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil || rel == "." {
			return err
		}
		if ex.Match(rel, d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() && !utf8.ValidString(rel) {
			// No checkpoint path lies below a name that is not UTF-8, and the walk cannot enter it
			// (fs.FS paths are UTF-8): the directory itself is the leftover.
			f.files = append(f.files, rel)
			return fs.SkipDir
		}
		if !d.IsDir() && !IsRestoreTemporary(rel) {
			f.files = append(f.files, rel)
		}
		return nil
	})
	return f, err
}

// checkAncestors lstats every directory above p, top down; the first that is a link or not a
// directory is unsafe. A missing one ends the check: restore creates the rest as directories.
func checkAncestors(root *os.Root, p string, cache map[string][2]string) (string, string) {
	var dirs []string
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		dirs = append(dirs, d)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		r, ok := cache[d]
		if !ok {
			fi, err := root.Lstat(d)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				r = [2]string{"", "missing"}
			case err != nil:
				r = [2]string{d, err.Error()}
			case fi.Mode()&fs.ModeSymlink != 0:
				r = [2]string{d, "a symbolic link"}
			case !fi.IsDir():
				r = [2]string{d, "not a directory"}
			}
			cache[d] = r
		}
		if r[0] != "" {
			return r[0], r[1]
		}
		if r[1] == "missing" {
			return "", ""
		}
	}
	return "", ""
}

func statDest(root *os.Root, e Entry, d *destFact) error {
	fi, err := root.Lstat(e.Path)
	if errors.Is(err, fs.ErrNotExist) {
		d.kind = kindMissing
		return nil
	}
	if err != nil {
		return err
	}
	switch mode := fi.Mode(); {
	case mode&fs.ModeSymlink != 0:
		d.kind = kindSymlink
		d.target, err = root.Readlink(e.Path)
		return err
	case mode.IsDir():
		d.kind = kindDir
	case mode.IsRegular():
		d.kind, d.size, d.mode = kindFile, fi.Size(), uint32(mode.Perm())
		if e.Type == TypeFile && fi.Size() == e.Size {
			f, _, err := openRegular(root, e.Path)
			if err != nil {
				return err
			}
			defer f.Close()
			h := sha256.New()
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
			d.hash = hex.EncodeToString(h.Sum(nil))
		}
	default:
		d.kind = kindOther
	}
	return nil
}

// Preview resolves a restore of checkpoint id onto the workspace dir exactly as Restore does, and
// writes nothing (seed D15).
func (s *Store) Preview(ctx context.Context, dir, id string, files []string) (Preview, error) {
	m, err := s.Load(ctx, id)
	if err != nil {
		return Preview{}, err
	}
	src, err := s.source(dir, m)
	if err != nil {
		return Preview{}, err
	}
	return PreviewManifest(ctx, dir, id, m, src, files)
}

// source is where a manifest's file bytes are: the blob space, or the git repository of the
// workspace for a git checkpoint (each blob still checked against the manifest's SHA-256).
func (s *Store) source(dir string, m *Manifest) (Blobs, error) {
	if m.GitCommit == "" {
		return s.Blobs, nil
	}
	_, src, err := GitManifest(dir, m.GitCommit)
	return src, err
}

// PreviewManifest is Preview over a manifest already in hand: it validates the manifest, checks that
// every blob it needs is stored, plans the restore, and refuses as the restore would a write the
// workspace would not accept or the file systems have no room for (NoSpaceError, counting the
// writes; a guard in a local store needs room too, which only the restore checks).
func PreviewManifest(ctx context.Context, dir, id string, m *Manifest, blobs Blobs, files []string) (Preview, error) {
	if err := m.Validate(); err != nil {
		return Preview{}, err
	}
	sel, err := selectEntries(id, m, files)
	if err != nil {
		return Preview{}, err
	}
	for _, e := range sel {
		if e.Type != TypeFile {
			continue
		}
		ok, err := blobs.Has(ctx, e.Hash)
		if err != nil {
			return Preview{}, err
		}
		if !ok {
			return Preview{}, &BlobHashError{Path: e.Path, Hash: e.Hash}
		}
	}
	root, err := openWorkspace(dir)
	if err != nil {
		return Preview{}, err
	}
	defer root.Close()
	facts, err := gather(root, m, sel, len(files) == 0)
	if err != nil {
		return Preview{}, err
	}
	p, err := plan(id, m, sel, facts, len(files) == 0)
	if err != nil {
		return Preview{}, err
	}
	l, err := gatherLandings(root, p.Changes)
	if err != nil {
		return Preview{}, err
	}
	problems, err := gatherWritability(dir, root, l, p.Changes)
	if err != nil {
		return Preview{}, err
	}
	if err := refuseUnwritable(p, problems); err != nil {
		return Preview{}, err
	}
	// As restore refuses a restore the file systems have no room for, so does the preview (the
	// writes alone: whether and where a guard is taken is the restore's to say).
	if err := checkSpace(dir, root, l, p, nil, nil); err != nil {
		return Preview{}, err
	}
	return p, nil
}

// Restore writes checkpoint id back into the workspace dir (seed D5): files of the checkpoint are
// overwritten or created, nothing is deleted, and files the checkpoint does not hold are reported as
// leftovers. Before anything is written every path and blob is checked, and so is every directory
// written into and file replaced, that the workspace will accept the write (UnwritableError, an
// AttributeError for an immutable or append-only one), and that each file system written to has the
// space and inodes the writes (and a guard stored on it) need (NoSpaceError); then a guard checkpoint
// of the current workspace is taken as opts.Guard says.
func (s *Store) Restore(ctx context.Context, dir, id string, opts RestoreOptions) (RestoreResult, error) {
	m, err := s.Load(ctx, id)
	if err != nil {
		return RestoreResult{}, err
	}
	src, err := s.source(dir, m)
	if err != nil {
		return RestoreResult{}, err
	}
	return s.restore(ctx, dir, id, m, src, opts)
}

// RestoreManifest is Restore over a manifest already in hand, which it trusts no more than one
// read from the store.
func (s *Store) RestoreManifest(ctx context.Context, dir, id string, m *Manifest, opts RestoreOptions) (RestoreResult, error) {
	return s.restore(ctx, dir, id, m, s.Blobs, opts)
}

// restore writes m, reading file contents from src; the guard checkpoint goes to the store.
func (s *Store) restore(ctx context.Context, dir, id string, m *Manifest, src Blobs, opts RestoreOptions) (RestoreResult, error) {
	mode, err := ParseGuardMode(string(opts.Guard))
	if err != nil {
		return RestoreResult{}, err
	}
	if err := m.Validate(); err != nil {
		return RestoreResult{}, err
	}
	sel, err := selectEntries(id, m, opts.Files)
	if err != nil {
		return RestoreResult{}, err
	}
	for _, e := range sel {
		if e.Type == TypeFile {
			if err := verifyBlob(ctx, src, e); err != nil {
				return RestoreResult{}, err
			}
		}
	}
	root, err := openWorkspace(dir)
	if err != nil {
		return RestoreResult{}, err
	}
	defer root.Close()
	// One restore at a time: the plan, the guard and the writes must all see the workspace this
	// restore alone changes.
	lock, err := lockWorkspace(root)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restore into %s: %w", dir, err)
	}
	defer lock.Close()
	full := len(opts.Files) == 0
	facts, err := gather(root, m, sel, full)
	if err != nil {
		return RestoreResult{}, err
	}
	p, err := plan(id, m, sel, facts, full)
	if err != nil {
		return RestoreResult{}, err
	}
	// Every write must be one the workspace accepts, and fit the free space of the file system it
	// lands on, before the guard is taken or a file written: a read-only mount, an immutable or
	// append-only file or a full disk found halfway would leave a partial restore.
	l, err := gatherLandings(root, p.Changes)
	if err != nil {
		return RestoreResult{}, err
	}
	problems, err := gatherWritability(dir, root, l, p.Changes)
	if err != nil {
		return RestoreResult{}, err
	}
	if err := refuseUnwritable(p, problems); err != nil {
		return RestoreResult{}, err
	}
	statfs := opts.StatFS // nil: statfs(2) of each directory, through its descriptor
	// A guard stored in a local store needs room there too: for every file of the workspace whose
	// blob the store lacks, leftovers included, or it fails halfway and --guard warn restores with
	// no guard. Counting every file not known stored is cheap; only when that does not fit are the
	// files read to leave out those the store already holds.
	var guard *guardSpace
	if dev, at, ok := localStoreDevice(s); ok && mode != GuardOff {
		gp, err := planGuard(ctx, root, m, sel, p, s.Blobs, false)
		if err != nil {
			return RestoreResult{}, err
		}
		guard = &guardSpace{dev: dev, at: at, plan: gp}
	}
	err = checkSpace(dir, root, l, p, guard, statfs)
	if ns := (*NoSpaceError)(nil); errors.As(err, &ns) && ns.GuardNeed > 0 {
		if guard.plan, err = planGuard(ctx, root, m, sel, p, s.Blobs, true); err != nil {
			return RestoreResult{}, err
		}
		err = checkSpace(dir, root, l, p, guard, statfs)
	}
	if err != nil {
		return RestoreResult{}, err
	}
	res := RestoreResult{Preview: p}

	if mode != GuardOff {
		// The guard must hold what the restore overwrites; a name it cannot record anywhere else
		// (an unrelated leftover) is left out rather than failing it, which with --guard warn would
		// restore with no guard at all.
		writes := map[string]bool{}
		for _, c := range p.Changes {
			if c.Action != ActionUnchanged {
				writes[c.Path] = true
			}
		}
		g, err := s.Create(ctx, dir, CaptureOptions{Anchor: opts.GuardAnchor, Excludes: guardExcludes(m.Excludes, sel), Guard: true, Now: opts.Now,
			inRestore: true, mayOmit: func(rel string) bool { return !writes[rel] }})
		switch {
		case err == nil:
			res.Guard, res.GuardOmitted = g.ID, g.Stats.Unrecordable
		case mode == GuardRequire:
			return RestoreResult{}, &GuardError{Err: err}
		default:
			res.GuardWarning = err.Error()
		}
		// The guard took space of its own, maybe more than foreseen (new files elsewhere in the
		// workspace): the writes must still fit now, before the first one.
		if guard != nil {
			if err := checkSpace(dir, root, l, p, nil, statfs); err != nil {
				return res, err
			}
		}
	}

	byPath := make(map[string]Entry, len(sel))
	for _, e := range sel {
		byPath[e.Path] = e
	}
	for _, c := range p.Changes {
		if c.Action == ActionUnchanged {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := writeEntry(ctx, root, src, byPath[c.Path]); err != nil {
			return res, fmt.Errorf("restore %q (%d of %d written): %w", c.Path, res.Written, len(p.Changes), err)
		}
		res.Written++
	}
	return res, nil
}

// restoreTempPrefix starts the name of the temporary file a restore writes before renaming it into
// place; randSuffix completes it with 12 lowercase hex digits.
const restoreTempPrefix = ".arw-restore-"

var restoreTempRE = regexp.MustCompile(`^` + regexp.QuoteMeta(restoreTempPrefix) + `[0-9a-f]{12}$`)

// IsRestoreTemporary reports whether the last segment of a workspace path is named like a restore's
// temporary file: one that is still there was left by a restore that was killed. Captures skip them
// and restores do not report them as leftovers.
func IsRestoreTemporary(rel string) bool { return restoreTempRE.MatchString(path.Base(rel)) }

// writeEntry writes one entry atomically: a temporary file (or link) beside the destination,
// renamed over it. The ancestor chain is checked again just before, and every write goes through the
// os.Root, so nothing lands outside the workspace even if a directory is swapped meanwhile.
func writeEntry(ctx context.Context, root *os.Root, blobs Blobs, e Entry) error {
	if at, why := checkAncestors(root, e.Path, map[string][2]string{}); at != "" {
		return &UnsafeDestinationError{Path: e.Path, At: at, Reason: why}
	}
	dir := path.Dir(e.Path)
	if dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp := path.Join(dir, restoreTempPrefix+randSuffix())
	if e.Type == TypeSymlink {
		if err := root.Symlink(e.Target, tmp); err != nil {
			return err
		}
		if err := root.Rename(tmp, e.Path); err != nil {
			_ = root.Remove(tmp)
			return err
		}
		return nil
	}
	if fi, err := root.Lstat(e.Path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return &UnsafeDestinationError{Path: e.Path, At: e.Path, Reason: "a symbolic link"}
	}
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = root.Remove(tmp)
		}
	}()
	rc, err := blobs.Get(ctx, e.Hash)
	if err != nil {
		f.Close()
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), rc)
	rc.Close()
	if err == nil {
		if got := hex.EncodeToString(h.Sum(nil)); got != e.Hash || n != e.Size {
			err = &BlobHashError{Path: e.Path, Hash: e.Hash, Actual: got}
		}
	}
	if err == nil {
		err = f.Chmod(fs.FileMode(e.Mode))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := root.Rename(tmp, e.Path); err != nil {
		return err
	}
	ok = true
	return nil
}

func sameMode(m *Manifest, have, want uint32) bool {
	if m.GitCommit != "" { // git keeps only the executable bit
		return have&0o100 == want&0o100
	}
	return have == want
}

// openWorkspace opens the workspace a restore writes into. A workspace that is itself a symbolic link
// is refused like any link on the destination's ancestor chain: following it would write wherever
// the link points.
func openWorkspace(dir string) (*os.Root, error) {
	info, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("workspace %s is a symbolic link: restore into the directory it points to by its own path", dir)
	}
	return os.OpenRoot(dir)
}

// guardExcludes are the restored manifest's excludes less every one that would leave out a path this
// restore writes: the guard must hold each file the restore is about to overwrite, whatever the
// manifest — which a tampered store could have edited — says to skip.
func guardExcludes(excludes []string, sel []Entry) []string {
	var keep []string
	for _, p := range excludes {
		if !excludesAny(CompileExcludes([]string{p}), sel) {
			keep = append(keep, p)
		}
	}
	return keep
}

// excludesAny reports whether ex leaves out any of the entries (files and links), or a directory above
// one.
func excludesAny(ex Excludes, sel []Entry) bool {
	for _, e := range sel {
		segs := strings.Split(e.Path, "/")
		for i := 1; i <= len(segs); i++ {
			if ex.Match(strings.Join(segs[:i], "/"), i < len(segs)) {
				return true
			}
		}
	}
	return false
}
