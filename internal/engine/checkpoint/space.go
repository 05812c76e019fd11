package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
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

// guardNeed is what a guard checkpoint stored on the same file system takes at most for the files a
// restore replaces: a blob each (in a directory of its own) and the manifest listing them with the
// rest of the workspace (files entries). Blobs the store already holds make it less; a guard that
// takes more (new files elsewhere in the workspace) is caught by the check after it.
func guardNeed(changes []Change, files int, bs int64) spaceNeed {
	var n spaceNeed
	for _, c := range changes {
		if c.Action == ActionOverwrite && c.Type == TypeFile {
			n.guardBytes += roundUp(c.CurrentSize, bs) + uint64(bs)
			n.guardInodes += 2
		}
	}
	n.guardBytes += roundUp(int64(files+len(changes))*manifestEntryBytes, bs) + uint64(bs)
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
func checkSpace(dir string, root *os.Root, l landings, p Preview, files int, guardDev *uint64, statfs StatFS) error {
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
	for _, dev := range order {
		g := groups[dev]
		free, err := statfs(abs(dir, g.at))
		if err != nil {
			return err
		}
		n := writeNeed(g.changes, g.newDirs, free.BlockSize)
		if guardDev != nil && *guardDev == dev {
			gn := guardNeed(g.changes, files, free.BlockSize)
			n.guardBytes, n.guardInodes = gn.guardBytes, gn.guardInodes
		}
		if need := n.bytes + n.guardBytes; need > free.Bytes {
			return &NoSpaceError{At: g.at, Need: need, GuardNeed: n.guardBytes, Available: free.Bytes}
		}
		if need := n.inodes + n.guardInodes; free.InodesLimited && need > free.Inodes {
			return &NoSpaceError{At: g.at, Need: need, GuardNeed: n.guardInodes, Available: free.Inodes, Inodes: true}
		}
	}
	return nil
}

// localStoreDevice is the device a local store keeps its blobs on; ok is false for a remote store.
func localStoreDevice(s *Store) (dev uint64, ok bool) {
	b, isDir := s.Blobs.(DirBlobs)
	if !isDir {
		return 0, false
	}
	for p := filepath.Clean(b.Dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			return deviceOf(fi), true
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(p) == p {
			return 0, false
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
