//go:build !linux

package checkpoint

import (
	"io/fs"
	"os"
)

// readDir lists the workspace directory rel and, when stat is set, lstats every regular file.
func readDir(root *os.Root, rel string, stat bool) ([]walkChild, error) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	children := make([]walkChild, 0, len(ents))
	for _, d := range ents {
		c := walkChild{name: d.Name(), typ: d.Type() & fs.ModeType}
		switch {
		case c.typ&fs.ModeDir != 0:
			c.typ = fs.ModeDir
		case c.typ&fs.ModeSymlink != 0:
			c.typ = fs.ModeSymlink
		case c.typ != 0:
			c.typ = fs.ModeIrregular
		case stat:
			fi, err := root.Lstat(joinRel(rel, c.name))
			switch {
			case err != nil:
				c.statErr = err
			case fi.Mode().IsRegular():
				c.stat, c.statted = fileStatOf(fi), true
			}
		}
		children = append(children, c)
	}
	sortChildren(children)
	return children, nil
}
