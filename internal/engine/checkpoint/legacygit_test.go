package checkpoint

// Checkpoints of git workspaces were once commit objects written into the workspace's repository,
// kept from git gc by a ref under GitRefPrefix. Nothing writes them any more, but stored ones are
// still previewed, restored and pruned: these are the writers of that time, kept as test fixtures.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// errUnbornHead says a git workspace has no commit yet; its checkpoints fell back to the file
// manifest (seed D13a).
var errUnbornHead = errors.New("git workspace has no commit yet (unborn HEAD)")

// keepGitCheckpoint names commit under GitRefPrefix. Writing the ref again is harmless: its name is
// its value. A ref git itself could not create beside the existing ones is refused first.
func keepGitCheckpoint(repo *git.Repository, commit plumbing.Hash) error {
	ref := plumbing.NewHashReference(plumbing.ReferenceName(GitRefPrefix+commit.String()), commit)
	if err := refNameFree(repo.Storer, ref.Name()); err != nil {
		return fmt.Errorf("keeping git checkpoint %s reachable: %w", commit, err)
	}
	if err := repo.Storer.SetReference(ref); err != nil {
		return fmt.Errorf("keeping git checkpoint %s reachable: %w", commit, err)
	}
	return nil
}

// refNameFree refuses a ref name that git refuses: one below an existing ref (with a ref
// refs/agentrewind, nothing can live under refs/agentrewind/) or above one. The storer answers for
// loose and packed refs alike; a loose-ref write alone would slip past a packed one.
func refNameFree(st storer.ReferenceStorer, name plumbing.ReferenceName) error {
	n := name.String()
	for i := strings.Index(n, "/") + 1; i > 0 && i < len(n); {
		j := strings.Index(n[i:], "/")
		if j < 0 {
			break
		}
		above := plumbing.ReferenceName(n[:i+j])
		_, err := st.Reference(above)
		if err == nil {
			return fmt.Errorf("the ref %s exists, so git cannot hold %s below it: rename or delete %s", above, name, above)
		}
		if !errors.Is(err, plumbing.ErrReferenceNotFound) {
			return err
		}
		i += j + 1
	}
	refs, err := st.IterReferences()
	if err != nil {
		return err
	}
	defer refs.Close()
	return refs.ForEach(func(r *plumbing.Reference) error {
		if strings.HasPrefix(r.Name().String(), n+"/") {
			return fmt.Errorf("the ref %s exists, so git cannot hold %s above it: rename or delete %s", r.Name(), name, r.Name())
		}
		return nil
	})
}

// legacyGitCaptured is the outcome of legacyCaptureGit.
type legacyGitCaptured struct {
	// Commit is the checkpoint: a commit object whose parent is HEAD, named only by the private ref
	// GitRefPrefix+Commit.
	Commit string `json:"commit"`
	// New is false when the tree equals the previous checkpoint's, which Commit then names.
	New   bool `json:"new"`
	Files int  `json:"files"`
	// IncrementalBytes are the bytes of the files that differ from HEAD (seed D9).
	IncrementalBytes int64 `json:"incrementalBytes"`
}

// legacyCaptureGit checkpoints a git workspace as a commit object holding its tracked files as they are in
// the work tree (seed D5/D13): objects are added to the repository and the commit is kept reachable by
// its own ref under GitRefPrefix, but no branch, tag or HEAD moves and the index is not touched. prev is the previous git checkpoint ("" for none): a capture with the same tree
// returns it. Excluded and deleted tracked files are left out; symlinks are stored as links.
func legacyCaptureGit(ctx context.Context, dir, prev string, opts CaptureOptions) (legacyGitCaptured, error) {
	repo, err := openGitWorkspace(dir)
	if err != nil {
		return legacyGitCaptured{}, fmt.Errorf("opening git workspace %s: %w", dir, err)
	}
	head, err := repo.Head()
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return legacyGitCaptured{}, errUnbornHead
	}
	if err != nil {
		return legacyGitCaptured{}, err
	}
	headCommit, err := repo.CommitObject(head.Hash())
	if err != nil {
		return legacyGitCaptured{}, err
	}
	headFiles, err := treeFiles(repo.Storer, headCommit)
	if err != nil {
		return legacyGitCaptured{}, err
	}
	idx, err := repo.Storer.Index()
	if err != nil {
		return legacyGitCaptured{}, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return legacyGitCaptured{}, err
	}
	defer root.Close()
	if !opts.inRestore { // a restore running meanwhile would leave half of its writes in the commit
		lock, err := shareWorkspace(root)
		if err != nil {
			return legacyGitCaptured{}, fmt.Errorf("capture %s: %w", dir, err)
		}
		defer lock.Close()
	}
	ex := CompileExcludes(opts.Excludes)
	st := repo.Storer
	top := &gitDir{}
	var out legacyGitCaptured
	seen := map[string]bool{}
	for _, e := range idx.Entries {
		if err := ctx.Err(); err != nil {
			return legacyGitCaptured{}, err
		}
		if seen[e.Name] || e.Mode == filemode.Submodule || ex.Excluded(e.Name, false) {
			continue
		}
		seen[e.Name] = true
		if ValidPath(e.Name) != nil {
			return legacyGitCaptured{}, fmt.Errorf("index entry %q is not a clean relative path", e.Name)
		}
		te, size, err := gitBlob(root, st, e.Name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			return legacyGitCaptured{}, err
		}
		if h, ok := headFiles[e.Name]; !ok || h != te.Hash {
			out.IncrementalBytes += size
		}
		top.add(strings.Split(e.Name, "/"), te)
		out.Files++
	}
	treeHash, err := top.write(st)
	if err != nil {
		return legacyGitCaptured{}, err
	}
	if prev != "" && commitIDRE.MatchString(prev) {
		if pc, err := repo.CommitObject(plumbing.NewHash(prev)); err == nil && pc.TreeHash == treeHash {
			if err := keepGitCheckpoint(repo, pc.Hash); err != nil {
				return legacyGitCaptured{}, err
			}
			return legacyGitCaptured{Commit: prev, Files: out.Files}, nil
		}
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	sig := object.Signature{Name: "agentrewind", Email: "checkpoint@agentrewind.io", When: now().UTC()}
	c := &object.Commit{
		Author: sig, Committer: sig, TreeHash: treeHash, ParentHashes: []plumbing.Hash{head.Hash()},
		Message: fmt.Sprintf("agentrewind checkpoint: session %s turn %d step %d\n", opts.Anchor.Session, opts.Anchor.Turn, opts.Anchor.Step),
	}
	obj := st.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return legacyGitCaptured{}, err
	}
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		return legacyGitCaptured{}, err
	}
	if err := keepGitCheckpoint(repo, h); err != nil {
		return legacyGitCaptured{}, err
	}
	out.Commit, out.New = h.String(), true
	return out, nil
}

// gitBlob stores one work-tree path as a blob, never reading through a symbolic link.
func gitBlob(root *os.Root, st storer.EncodedObjectStorer, rel string) (object.TreeEntry, int64, error) {
	name := rel[strings.LastIndex(rel, "/")+1:]
	fi, err := root.Lstat(rel)
	if err != nil {
		return object.TreeEntry{}, 0, err
	}
	obj := st.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err != nil {
		return object.TreeEntry{}, 0, err
	}
	te := object.TreeEntry{Name: name, Mode: filemode.Regular}
	var size int64
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := root.Readlink(rel)
		if err != nil {
			return object.TreeEntry{}, 0, err
		}
		te.Mode = filemode.Symlink
		n, _ := io.WriteString(w, target)
		size = int64(n)
	case fi.Mode().IsRegular():
		f, _, err := openRegular(root, rel)
		if err != nil {
			return object.TreeEntry{}, 0, err
		}
		size, err = io.Copy(w, f)
		f.Close()
		if err != nil {
			return object.TreeEntry{}, 0, err
		}
		if fi.Mode().Perm()&0o100 != 0 {
			te.Mode = filemode.Executable
		}
	default:
		return object.TreeEntry{}, 0, fs.ErrNotExist // a directory or device where a file was tracked
	}
	if err := w.Close(); err != nil {
		return object.TreeEntry{}, 0, err
	}
	te.Hash, err = st.SetEncodedObject(obj)
	return te, size, err
}

// gitDir builds nested tree objects.
type gitDir struct {
	files map[string]object.TreeEntry
	dirs  map[string]*gitDir
}

func (d *gitDir) add(segs []string, te object.TreeEntry) {
	if len(segs) == 1 {
		if d.files == nil {
			d.files = map[string]object.TreeEntry{}
		}
		d.files[segs[0]] = te
		return
	}
	if d.dirs == nil {
		d.dirs = map[string]*gitDir{}
	}
	sub := d.dirs[segs[0]]
	if sub == nil {
		sub = &gitDir{}
		d.dirs[segs[0]] = sub
	}
	sub.add(segs[1:], te)
}

func (d *gitDir) write(st storer.EncodedObjectStorer) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	for name, sub := range d.dirs {
		h, err := sub.write(st)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	for _, te := range d.files {
		entries = append(entries, te)
	}
	// git orders a tree's entries by name, a directory's name compared as if it ended in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	obj := st.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return st.SetEncodedObject(obj)
}

func treeFiles(st storer.EncodedObjectStorer, c *object.Commit) (map[string]plumbing.Hash, error) {
	t, err := c.Tree()
	if err != nil {
		return nil, err
	}
	out := map[string]plumbing.Hash{}
	err = walkTree(st, t, "", func(p string, e object.TreeEntry) error {
		out[p] = e.Hash
		return nil
	})
	return out, err
}

// legacyCreateGit is CreateGit as it was: it checkpoints a git workspace as a commit object and records it in the store, so it is
// listed, addressed, previewed, restored and pruned like any checkpoint. A capture identical to the
// session's latest git checkpoint writes nothing (seed D2). A linked work tree (`git worktree add`) is
// checkpointed in the repository it shares. A directory that is not a git work tree, or whose HEAD is
// unborn, gets a file checkpoint instead (seed D13a); Created.Stats says which. A bare repository is
// refused (ErrBareRepository).
func legacyCreateGit(ctx context.Context, s *Store, dir string, opts CaptureOptions) (Created, error) {
	list, err := s.list(ctx, true)
	if err != nil {
		return Created{}, err
	}
	var prev Summary
	var prevCommit string
	for _, c := range list {
		if c.Anchor.Session != opts.Anchor.Session || c.Reason != "git" {
			continue
		}
		if m, err := s.Load(ctx, c.ID); err == nil {
			prev, prevCommit = c, m.GitCommit
		}
		break
	}
	g, err := legacyCaptureGit(ctx, dir, prevCommit, opts)
	switch {
	case errors.Is(err, errUnbornHead):
		opts.Excludes = append(append([]string(nil), gitExcludes...), opts.Excludes...)
		return s.Create(ctx, dir, opts)
	case errors.Is(err, git.ErrRepositoryNotExists):
		return s.Create(ctx, dir, opts)
	}
	if err != nil {
		return Created{}, err
	}
	st := CaptureStats{Files: g.Files, IncrementalBytes: g.IncrementalBytes}
	if !g.New {
		return Created{ID: prev.ID, Stats: st}, nil
	}
	m, _, err := GitManifest(dir, g.Commit)
	if err != nil {
		return Created{}, err
	}
	m.Anchor, m.IncrementalBytes = opts.Anchor, g.IncrementalBytes
	m.Excludes = append(append([]string(nil), gitExcludes...), opts.Excludes...)
	for _, e := range m.Files {
		st.Bytes += e.Size
	}
	id, err := s.Save(ctx, m)
	if err != nil {
		return Created{}, err
	}
	return Created{ID: id, New: true, Stats: st}, nil
}
