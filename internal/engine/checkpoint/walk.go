package checkpoint

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
)

// A capture's walk reads every directory of the workspace, several at once, and, when there is a
// baseline to compare with, takes the stat of every file from the directory it was listed in (one
// fstatat each, where a path-based lstat resolves every component again); the entries it returns
// are in path order, so the manifest needs no sort and the baseline is looked up by a cursor. What it reads is only compared (Unchanged): a file's bytes are read
// through openRegular, which checks that it is the file lstat saw.

// walkReaders is how many directories a walk reads at once: the stat calls wait on the file system
// more than they use a CPU, so a few more than the machine's cores keep them busy.
const walkReaders = 4

// walkNode is one directory as the walk read it.
type walkNode struct {
	rel string // "." for the workspace's top
	// children are its entries in path order: a directory's name as if followed by "/".
	children []walkChild
	// err is why the directory could not be read (fs.ErrNotExist: it vanished meanwhile).
	err error
}

// walkChild is one directory entry.
type walkChild struct {
	name string
	// typ is the entry's type: fs.ModeDir, fs.ModeSymlink, 0 for a regular file, or another type.
	typ fs.FileMode
	// stat is a regular file's, taken when statted; statErr says why it could not be
	// (fs.ErrNotExist: the file vanished).
	stat    FileStat
	statted bool
	statErr error
	// dir is a directory's contents, nil when the walk did not descend into it.
	dir *walkNode
}

// walkOptions say where the walk goes and what it stats.
type walkOptions struct {
	// descend reports whether to read the directory rel.
	descend func(rel string) bool
	// stat says whether to take the stat of every regular file (else only of entries whose type the
	// directory listing does not give).
	stat bool
}

// readTree reads the tree of root.
func readTree(ctx context.Context, root *os.Root, opts walkOptions) (*walkNode, error) {
	top := &walkNode{rel: "."}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, walkReaders)
	var wg sync.WaitGroup
	var read func(n *walkNode)
	read = func(n *walkNode) {
		defer wg.Done()
		sem <- struct{}{}
		if ctx.Err() == nil {
			n.children, n.err = readDir(root, n.rel, opts.stat)
		}
		<-sem
		if n.err != nil && (n.rel == "." || !errors.Is(n.err, fs.ErrNotExist)) {
			cancel(n.err)
			return
		}
		for i := range n.children {
			c := &n.children[i]
			if c.typ != fs.ModeDir {
				continue
			}
			rel := joinRel(n.rel, c.name)
			if opts.descend(rel) {
				c.dir = &walkNode{rel: rel}
				wg.Add(1)
				go read(c.dir)
			}
		}
	}
	wg.Add(1)
	read(top)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return top, nil
}

// joinRel is the workspace path of name in the directory rel.
func joinRel(rel, name string) string {
	if rel == "." {
		return name
	}
	return rel + "/" + name
}

// sortChildren puts entries in path order: "a-b" before the directory "a" (whose paths are "a/…").
func sortChildren(children []walkChild) {
	slices.SortFunc(children, func(a, b walkChild) int {
		n := min(len(a.name), len(b.name))
		if c := strings.Compare(a.name[:n], b.name[:n]); c != 0 {
			return c
		}
		return keyByte(a, n) - keyByte(b, n)
	})
}

// keyByte is the byte at i of c's sort key (its name, "/" after a directory's), -1 past its end.
func keyByte(c walkChild, i int) int {
	switch {
	case i < len(c.name):
		return int(c.name[i])
	case i == len(c.name) && c.typ == fs.ModeDir:
		return '/'
	}
	return -1
}

// visitTree calls visit with every entry below n in path order; skipDir after a directory's visit
// means its entries are not visited. An unreadable directory is passed as the error of its visit.
func visitTree(n *walkNode, visit func(rel string, c *walkChild, err error) error) error {
	for i := range n.children {
		c := &n.children[i]
		rel := joinRel(n.rel, c.name)
		var err error
		if c.dir != nil {
			err = c.dir.err
		}
		if verr := visit(rel, c, err); verr != nil {
			if errors.Is(verr, fs.SkipDir) {
				continue
			}
			return verr
		}
		if c.dir != nil && c.dir.err == nil {
			if err := visitTree(c.dir, visit); err != nil {
				return err
			}
		}
	}
	return nil
}
