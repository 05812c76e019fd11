package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
)

// Access modes of access(2).
const (
	accessWrite   = 0x2
	accessExecute = 0x1
)

// writeProblem is why the workspace would refuse a write: At is the directory written into or the
// file replaced.
type writeProblem struct {
	At  string
	Err error
}

// gatherWritability asks the kernel, for every change a restore would write, whether the write would
// be refused, without writing: the directory the write lands in (the deepest one that exists; the
// restore creates the rest) must be writable and searchable, and a file or link it replaces must not
// be immutable or append-only (rename(2) refuses to replace one). access(2) answers for a read-only
// file system and immutable inodes as well as permission bits, so a root caller is checked too. The
// permission bits of a replaced file do not matter: restore renames over it. Only changes with a
// problem are in the answer.
func gatherWritability(dir string, root *os.Root, changes []Change) (map[string]writeProblem, error) {
	out := map[string]writeProblem{}
	dirs := map[string]*writeProblem{} // workspace directory → its problem, nil when writable
	for _, c := range changes {
		if c.Action == ActionUnchanged {
			continue
		}
		d, err := deepestExisting(root, path.Dir(c.Path))
		if err != nil {
			return nil, err
		}
		wp, seen := dirs[d]
		if !seen {
			if err := syscall.Access(abs(dir, d), accessWrite|accessExecute); err != nil {
				wp = &writeProblem{At: d, Err: err}
			}
			dirs[d] = wp
		}
		if wp != nil {
			out[c.Path] = *wp
			continue
		}
		if c.Action != ActionOverwrite {
			continue
		}
		fi, err := root.Lstat(c.Path)
		if err != nil {
			return nil, err
		}
		if err := replaceable(abs(dir, c.Path), fi, root, d); err != nil {
			out[c.Path] = writeProblem{At: c.Path, Err: err}
		}
	}
	return out, nil
}

// replaceable says whether rename(2) may replace the existing path p (fi its lstat) in directory d.
func replaceable(p string, fi fs.FileInfo, root *os.Root, d string) error {
	// access(2) on a regular file: EPERM is an immutable or append-only file, EROFS a read-only file
	// system; EACCES is only its permission bits, which a rename over it ignores. A link is not
	// followed: its own inode is what rename replaces, and links carry no such flags.
	if fi.Mode().IsRegular() {
		if err := syscall.Access(p, accessWrite); err != nil && !errors.Is(err, syscall.EACCES) {
			return err
		}
	}
	// In a sticky directory only the owner of the file or of the directory (or root) may replace it.
	di, err := root.Lstat(d)
	if err != nil {
		return err
	}
	if di.Mode()&fs.ModeSticky == 0 {
		return nil
	}
	fst, ok1 := fi.Sys().(*syscall.Stat_t)
	dst, ok2 := di.Sys().(*syscall.Stat_t)
	uid := uint32(os.Geteuid())
	if ok1 && ok2 && uid != 0 && uid != fst.Uid && uid != dst.Uid {
		return syscall.EPERM
	}
	return nil
}

// deepestExisting is d or its nearest ancestor that exists in the workspace ("." at the top).
func deepestExisting(root *os.Root, d string) (string, error) {
	for ; d != "."; d = path.Dir(d) {
		_, err := root.Lstat(d)
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return ".", nil
}

func abs(dir, rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }

// refuseUnwritable is the refusal of the first change, in the plan's order, that the workspace would
// not let a restore write; nil when every write would be let through.
func refuseUnwritable(p Preview, problems map[string]writeProblem) error {
	for _, c := range p.Changes {
		if w, ok := problems[c.Path]; ok && c.Action != ActionUnchanged {
			return &UnwritableError{Path: c.Path, At: w.At, Err: w.Err}
		}
	}
	return nil
}
