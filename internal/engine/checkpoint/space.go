package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"unicode/utf8"
)

// FreeSpace is what a file system still holds for an unprivileged writer, as statfs(2) reports it.
type FreeSpace struct {
	// Bytes are the available blocks times the block size (f_bavail × f_bsize).
	Bytes     uint64
	BlockSize int64
	// Inodes are the free inodes; InodesLimited is false on a file system that counts none.
	Inodes        uint64
	InodesLimited bool
}

// StatFS reports the free space of the file system holding a path.
type StatFS func(path string) (FreeSpace, error)

// spaceNeed is what one file system must hold free for a restore.
type spaceNeed struct {
	bytes, guardBytes   uint64
	inodes, guardInodes uint64
}

// manifestEntryBytes bounds the JSON of one manifest entry, for the guard's manifest.
const manifestEntryBytes = 512

// writeNeed is what the writes of changes (none unchanged), and the creation of newDirs
// directories, take on a file system with blocks of bs bytes. Each file is written whole to a
// temporary copy beside its destination before the rename frees the old one, and the old blocks are
// never counted as freed: a hard link, a process holding the file open or a snapshot keeps them. A
// symbolic link or a directory counts one block.
func writeNeed(changes []Change, newDirs int, bs int64) spaceNeed {
	var n spaceNeed
	for _, c := range changes {
		n.inodes++
		if c.Type == TypeSymlink {
			n.bytes += uint64(bs)
			continue
		}
		n.bytes += roundUp(c.Size, bs)
	}
	n.bytes += uint64(newDirs) * uint64(bs)
	n.inodes += uint64(newDirs)
	return n
}

// guardPlan is what a guard checkpoint of the workspace would store: the sizes of the files whose
// blobs the store may not hold yet, and the entries of its manifest.
type guardPlan struct {
	sizes   []int64
	entries int
}

// guardSpace is a guard a restore takes into a local store: the device and directory of its blobs,
// and what it would store there.
type guardSpace struct {
	dev  uint64
	at   string
	plan guardPlan
}

// planGuard walks the workspace as the guard's capture will (the guard's excludes, no restore
// temporaries) and lists what it would upload: every regular file — the files the restore replaces,
// and every other one in the workspace, leftovers included — but those the store is known to hold:
// a file a file checkpoint restores unchanged and, when exact, any file whose blob the store has
// (which takes reading it).
func planGuard(ctx context.Context, root *os.Root, m *Manifest, sel []Entry, p Preview, blobs Blobs, exact bool) (guardPlan, error) {
	stored := map[string]bool{}
	if m.GitCommit == "" { // a git checkpoint's unchanged files are in the repository, not the store
		for _, c := range p.Changes {
			if c.Action == ActionUnchanged && c.Type == TypeFile {
				stored[c.Path] = true
			}
		}
	}
	ex := CompileExcludes(guardExcludes(m.Excludes, sel))
	var g guardPlan
	err := fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil && rel != "." && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || rel == "." {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if ex.Match(rel, d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() && !utf8.ValidString(rel) {
			return fs.SkipDir // the guard leaves it out, and the walk cannot enter it
		}
		if d.IsDir() || IsRestoreTemporary(rel) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			g.entries++
		}
		if !d.Type().IsRegular() {
			return nil
		}
		g.entries++
		if stored[rel] {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if exact && holdsBlob(ctx, root, rel, blobs) {
			return nil
		}
		g.sizes = append(g.sizes, fi.Size())
		return nil
	})
	return g, err
}

// holdsBlob reports whether the store holds the bytes of the workspace file rel now; a file that
// cannot be read is counted as not held.
func holdsBlob(ctx context.Context, root *os.Root, rel string, blobs Blobs) bool {
	f, _, err := openRegular(root, rel)
	if err != nil {
		return false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	has, err := blobs.Has(ctx, hex.EncodeToString(h.Sum(nil)))
	return err == nil && has
}

// guardNeed is what a guard checkpoint takes at most in a store on a file system with blocks of bs
// bytes: a blob (in a directory of its own) for every file it uploads, and its manifest, counted
// with room for an entry per change besides the workspace's. A guard that takes more (files written
// meanwhile) is caught by the check after it.
func guardNeed(g guardPlan, changes int, bs int64) spaceNeed {
	var n spaceNeed
	for _, size := range g.sizes {
		n.guardBytes += roundUp(size, bs) + uint64(bs)
		n.guardInodes += 2
	}
	n.guardBytes += roundUp(int64(g.entries+changes)*manifestEntryBytes, bs) + uint64(bs)
	n.guardInodes += 2
	return n
}

func roundUp(n, bs int64) uint64 {
	if bs <= 0 {
		return uint64(n)
	}
	return uint64((n + bs - 1) / bs * bs)
}

// checkSpace refuses a restore that some file system under the workspace has no room for: the
// changes are grouped by the device of the directory they land in, and each group's writes (plus,
// on the file system of a local store, the guard's) must fit the space statfs reports.
// guardDev is that store's device when a guard will be written there.
func checkSpace(dir string, root *os.Root, l landings, p Preview, guard *guardSpace, statfs StatFS) error {
	type group struct {
		at      string
		changes []Change
		newDirs int
	}
	groups := map[uint64]*group{}
	var order []uint64
	groupOf := func(d string) (*group, error) {
		fi, err := root.Lstat(d)
		if err != nil {
			return nil, err
		}
		dev := deviceOf(fi)
		g, ok := groups[dev]
		if !ok {
			g = &group{at: d}
			groups[dev] = g
			order = append(order, dev)
		}
		return g, nil
	}
	for _, c := range p.Changes {
		if c.Action == ActionUnchanged {
			continue
		}
		g, err := groupOf(l.deepest[c.Path])
		if err != nil {
			return err
		}
		g.changes = append(g.changes, c)
	}
	for _, d := range l.newDirs {
		g, err := groupOf(d)
		if err != nil {
			return err
		}
		g.newDirs++
	}
	storeAt := ""
	if guard != nil {
		if _, ok := groups[guard.dev]; !ok {
			// The store is on a file system the restore does not write to: the guard alone must fit.
			groups[guard.dev] = &group{}
			order = append(order, guard.dev)
			storeAt = guard.at
		}
	}
	for _, dev := range order {
		g := groups[dev]
		at := g.at
		var free FreeSpace
		var err error
		switch {
		case g.at == "" && statfs == nil:
			at = storeAt
			free, err = statFS(storeAt)
		case g.at == "":
			at = storeAt
			free, err = statfs(storeAt)
		case statfs == nil:
			// Through the directory's descriptor: its absolute path may be longer than PATH_MAX.
			free, err = statFSAt(dir, root, g.at)
		default:
			free, err = statfs(abs(dir, g.at))
		}
		if err != nil {
			return err
		}
		n := writeNeed(g.changes, g.newDirs, free.BlockSize)
		if guard != nil && guard.dev == dev {
			gn := guardNeed(guard.plan, len(p.Changes), free.BlockSize)
			n.guardBytes, n.guardInodes = gn.guardBytes, gn.guardInodes
		}
		if need := n.bytes + n.guardBytes; need > free.Bytes {
			return &NoSpaceError{At: at, Need: need, GuardNeed: n.guardBytes, Available: free.Bytes}
		}
		if need := n.inodes + n.guardInodes; free.InodesLimited && need > free.Inodes {
			return &NoSpaceError{At: at, Need: need, GuardNeed: n.guardInodes, Available: free.Inodes, Inodes: true}
		}
	}
	return nil
}

// localStoreDevice is the device a local store keeps its blobs on, and the deepest existing directory
// of it there; ok is false for a remote store.
func localStoreDevice(s *Store) (dev uint64, at string, ok bool) {
	b, isDir := s.Blobs.(DirBlobs)
	if !isDir {
		return 0, "", false
	}
	for p := filepath.Clean(b.Dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			return deviceOf(fi), p, true
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(p) == p {
			return 0, "", false
		}
	}
}

// deviceOf is the device a file lives on, from its stat.
func deviceOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev) //nolint:unconvert // int32 off Linux
	}
	return 0
}
