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

// landings are where a restore's writes land: for every change written, the deepest directory above
// it that exists (the restore creates the rest), and the directories it creates.
type landings struct {
	deepest map[string]string // change path → deepest existing directory above it ("." at the top)
	newDirs map[string]string // directory the restore creates → the deepest existing one above it
}

// gatherLandings finds, for every change a restore writes, where it lands in the workspace.
func gatherLandings(root *os.Root, changes []Change) (landings, error) {
	l := landings{deepest: map[string]string{}, newDirs: map[string]string{}}
	for _, c := range changes {
		if c.Action == ActionUnchanged {
			continue
		}
		d, err := deepestExisting(root, path.Dir(c.Path))
		if err != nil {
			return landings{}, err
		}
		l.deepest[c.Path] = d
		for nd := path.Dir(c.Path); nd != d; nd = path.Dir(nd) {
			l.newDirs[nd] = d
		}
	}
	return l, nil
}

// gatherWritability asks the kernel, for every change a restore would write, whether the write would
// be refused, without writing. The directory the write lands in (the deepest one that exists; the
// restore creates the rest) must be writable and searchable, not immutable, and not append-only when
// the file's temporary copy is renamed inside it (an append-only directory lets entries be created,
// never renamed or removed). A file or link it replaces must not be immutable or append-only:
// rename(2) refuses to replace one, even for root. access(2) answers for a read-only file system as
// well as for permission bits, so a root caller is checked too; the inode flags are read as they are
// (FS_IOC_GETFLAGS) so the refusal can name them. The permission bits of a replaced file do not
// matter: restore renames over it. Only changes with a problem are in the answer.
func gatherWritability(dir string, root *os.Root, l landings, changes []Change) (map[string]writeProblem, error) {
	out := map[string]writeProblem{}
	type dirFacts struct {
		problem *writeProblem
		flags   uint32
	}
	dirs := map[string]dirFacts{} // workspace directory → what it allows
	for _, c := range changes {
		if c.Action == ActionUnchanged {
			continue
		}
		d := l.deepest[c.Path]
		df, seen := dirs[d]
		if !seen {
			flags, err := inodeFlags(root, d, true)
			if err != nil {
				return nil, err
			}
			df.flags = flags
			switch {
			case flags&flagImmutable != 0:
				df.problem = &writeProblem{At: d, Err: &AttributeError{Attribute: AttributeImmutable}}
			default:
				if err := accessAt(dir, root, d, accessWrite|accessExecute); err != nil {
					df.problem = &writeProblem{At: d, Err: err}
				}
			}
			dirs[d] = df
		}
		if df.problem != nil {
			out[c.Path] = *df.problem
			continue
		}
		if df.flags&flagAppend != 0 && path.Dir(c.Path) == d {
			out[c.Path] = writeProblem{At: d, Err: &AttributeError{Attribute: AttributeAppendOnly}}
			continue
		}
		if c.Action != ActionOverwrite {
			continue
		}
		fi, err := root.Lstat(c.Path)
		if err != nil {
			return nil, err
		}
		if err := replaceable(dir, c.Path, fi, root, d); err != nil {
			out[c.Path] = writeProblem{At: c.Path, Err: err}
		}
	}
	return out, nil
}

// replaceable says whether rename(2) may replace the existing path rel of the workspace dir (fi its
// lstat) in directory d.
func replaceable(dir, rel string, fi fs.FileInfo, root *os.Root, d string) error {
	// A regular file's inode flags: rename(2) refuses to replace an immutable or append-only file.
	// access(2) then: EROFS is a read-only file system; EACCES is only its permission bits, which a
	// rename over it ignores. A link is not followed: its own inode is what rename replaces, and
	// links carry no such flags.
	if fi.Mode().IsRegular() {
		flags, err := inodeFlags(root, rel, false)
		if err != nil {
			return err
		}
		if a := attributeOf(flags); a != "" {
			return &AttributeError{Attribute: a}
		}
		if err := accessAt(dir, root, rel, accessWrite); err != nil && !errors.Is(err, syscall.EACCES) {
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

// attributeOf names the attribute among flags that stops a file from being replaced ("" for none);
// immutable wins, as chattr lists it first.
func attributeOf(flags uint32) Attribute {
	switch {
	case flags&flagImmutable != 0:
		return AttributeImmutable
	case flags&flagAppend != 0:
		return AttributeAppendOnly
	}
	return ""
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
