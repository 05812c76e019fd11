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
	"regexp"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// ErrUnbornHead says a git workspace has no commit yet; its checkpoints fall back to the file
// manifest (seed D13a).
var ErrUnbornHead = errors.New("git workspace has no commit yet (unborn HEAD)")

// gitExcludes keeps the repository itself out of leftovers.
var gitExcludes = []string{"/.git"}

var commitIDRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// GitRefPrefix is the private ref namespace that keeps git checkpoints reachable, so `git gc` never
// collects one: each checkpoint commit C is named by GitRefPrefix + C. No branch, tag or HEAD moves.
const GitRefPrefix = "refs/agentrewind/checkpoints/"

// ErrBareRepository says a git checkpoint was asked of a bare repository: a workspace is a work
// tree, and a bare repository has no files to checkpoint or restore.
var ErrBareRepository = errors.New("is a bare git repository, not a work tree: a workspace is the directory an agent's files are in")

// openGitWorkspace opens the repository of the work tree dir: a main work tree, or a linked one
// (`git worktree add`), whose HEAD and index are its own and whose objects and refs are the main
// repository's. A bare repository is refused.
func openGitWorkspace(dir string) (*git.Repository, error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		return nil, err
	}
	if _, err := repo.Worktree(); errors.Is(err, git.ErrIsBareRepository) {
		return nil, fmt.Errorf("%s %w", dir, ErrBareRepository)
	}
	return repo, nil
}

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

// DropGitRef deletes the ref that keeps git checkpoint commit from git gc in the repository of the
// work tree dir, loose or packed; a ref already gone is not an error. The commit is left for git gc.
func DropGitRef(dir, commit string) error {
	if !commitIDRE.MatchString(commit) {
		return &ManifestError{Reason: fmt.Sprintf("git checkpoint %q is not a 40-hex commit id", commit)}
	}
	repo, err := openGitWorkspace(dir)
	if err != nil {
		return fmt.Errorf("opening git workspace %s: %w", dir, err)
	}
	if err := repo.Storer.RemoveReference(plumbing.ReferenceName(GitRefPrefix + commit)); err != nil {
		return fmt.Errorf("deleting the ref of git checkpoint %s: %w", commit, err)
	}
	return nil
}

// HasGitRef reports whether the repository of the work tree dir holds the ref that keeps git
// checkpoint commit from git gc; an error when dir is not a git work tree. Prune asks it of every ref
// before deleting anything: a --workspace that is not the checkpoints' repository must neither fail
// halfway, after the checkpoints are gone, nor "delete" refs it does not hold.
func HasGitRef(dir, commit string) (bool, error) {
	if !commitIDRE.MatchString(commit) {
		return false, &ManifestError{Reason: fmt.Sprintf("git checkpoint %q is not a 40-hex commit id", commit)}
	}
	repo, err := openGitWorkspace(dir)
	if err != nil {
		return false, fmt.Errorf("opening git workspace %s: %w", dir, err)
	}
	_, err = repo.Storer.Reference(plumbing.ReferenceName(GitRefPrefix + commit))
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return false, nil
	}
	return err == nil, err
}

// GitCaptured is the outcome of CaptureGit.
type GitCaptured struct {
	// Commit is the checkpoint: a commit object whose parent is HEAD, named only by the private ref
	// GitRefPrefix+Commit.
	Commit string `json:"commit"`
	// New is false when the tree equals the previous checkpoint's, which Commit then names.
	New   bool `json:"new"`
	Files int  `json:"files"`
	// IncrementalBytes are the bytes of the files that differ from HEAD (seed D9).
	IncrementalBytes int64 `json:"incrementalBytes"`
}

// CaptureGit checkpoints a git workspace as a commit object holding its tracked files as they are in
// the work tree (seed D5/D13): objects are added to the repository and the commit is kept reachable by
// its own ref under GitRefPrefix, but no branch, tag or HEAD moves and the index is not touched. prev is the previous git checkpoint ("" for none): a capture with the same tree
// returns it. Excluded and deleted tracked files are left out; symlinks are stored as links.
func CaptureGit(ctx context.Context, dir, prev string, opts CaptureOptions) (GitCaptured, error) {
	repo, err := openGitWorkspace(dir)
	if err != nil {
		return GitCaptured{}, fmt.Errorf("opening git workspace %s: %w", dir, err)
	}
	head, err := repo.Head()
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return GitCaptured{}, ErrUnbornHead
	}
	if err != nil {
		return GitCaptured{}, err
	}
	headCommit, err := repo.CommitObject(head.Hash())
	if err != nil {
		return GitCaptured{}, err
	}
	headFiles, err := treeFiles(repo.Storer, headCommit)
	if err != nil {
		return GitCaptured{}, err
	}
	idx, err := repo.Storer.Index()
	if err != nil {
		return GitCaptured{}, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return GitCaptured{}, err
	}
	defer root.Close()
	if !opts.inRestore { // a restore running meanwhile would leave half of its writes in the commit
		lock, err := shareWorkspace(root)
		if err != nil {
			return GitCaptured{}, fmt.Errorf("capture %s: %w", dir, err)
		}
		defer lock.Close()
	}
	ex := CompileExcludes(opts.Excludes)
	st := repo.Storer
	top := &gitDir{}
	var out GitCaptured
	seen := map[string]bool{}
	for _, e := range idx.Entries {
		if err := ctx.Err(); err != nil {
			return GitCaptured{}, err
		}
		if seen[e.Name] || e.Mode == filemode.Submodule || ex.Excluded(e.Name, false) {
			continue
		}
		seen[e.Name] = true
		if ValidPath(e.Name) != nil {
			return GitCaptured{}, fmt.Errorf("index entry %q is not a clean relative path", e.Name)
		}
		te, size, err := gitBlob(root, st, e.Name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			return GitCaptured{}, err
		}
		if h, ok := headFiles[e.Name]; !ok || h != te.Hash {
			out.IncrementalBytes += size
		}
		top.add(strings.Split(e.Name, "/"), te)
		out.Files++
	}
	treeHash, err := top.write(st)
	if err != nil {
		return GitCaptured{}, err
	}
	if prev != "" && commitIDRE.MatchString(prev) {
		if pc, err := repo.CommitObject(plumbing.NewHash(prev)); err == nil && pc.TreeHash == treeHash {
			if err := keepGitCheckpoint(repo, pc.Hash); err != nil {
				return GitCaptured{}, err
			}
			return GitCaptured{Commit: prev, Files: out.Files}, nil
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
		return GitCaptured{}, err
	}
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		return GitCaptured{}, err
	}
	if err := keepGitCheckpoint(repo, h); err != nil {
		return GitCaptured{}, err
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

// walkTree calls fn with the slash-separated path of every entry below t that is not a directory
// (submodules included; fn picks). go-git's Tree.Files refuses names with a newline or another
// control character, which git itself stores and Linux allows, so the walk is done here: the
// manifest check judges the paths, and a ".git" segment, which would write into the repository, is
// refused here as git refuses it.
func walkTree(st storer.EncodedObjectStorer, t *object.Tree, prefix string, fn func(p string, e object.TreeEntry) error) error {
	for _, e := range t.Entries {
		p := e.Name
		if prefix != "" {
			p = prefix + "/" + e.Name
		}
		if strings.EqualFold(e.Name, ".git") {
			return &ManifestError{Path: p, Reason: "a .git path segment"}
		}
		if e.Mode != filemode.Dir {
			if err := fn(p, e); err != nil {
				return err
			}
			continue
		}
		sub, err := object.GetTree(st, e.Hash)
		if err != nil {
			return fmt.Errorf("git tree %s at %q: %w", e.Hash, p, err)
		}
		if err := walkTree(st, sub, p, fn); err != nil {
			return err
		}
	}
	return nil
}

// GitManifest reads a git checkpoint commit as a manifest, and a read-only blob space serving its
// files by SHA-256, so it is previewed and restored exactly as a file checkpoint is: explicit paths
// only, nothing deleted, leftovers reported. The commit id is checked to be 40 hex characters before
// git sees it (seed D16c).
func GitManifest(dir, commit string) (*Manifest, Blobs, error) {
	if !commitIDRE.MatchString(commit) {
		return nil, nil, &ManifestError{Reason: fmt.Sprintf("git checkpoint %q is not a 40-hex commit id", commit)}
	}
	repo, err := openGitWorkspace(dir)
	if err != nil {
		return nil, nil, err
	}
	c, err := repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return nil, nil, fmt.Errorf("git checkpoint %s: %w", commit, err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, nil, err
	}
	m := &Manifest{SchemaVersion: SchemaVersion, CreatedAt: c.Committer.When.UTC(), Reason: "git", Excludes: gitExcludes, Files: []Entry{}, GitCommit: commit}
	src := gitBlobs{repo: repo, bySHA256: map[string]plumbing.Hash{}}
	err = walkTree(repo.Storer, t, "", func(p string, f object.TreeEntry) error {
		if f.Mode != filemode.Symlink && f.Mode != filemode.Regular && f.Mode != filemode.Deprecated && f.Mode != filemode.Executable {
			return nil // a submodule: not a file of this work tree
		}
		b, err := repo.BlobObject(f.Hash)
		if err != nil {
			return fmt.Errorf("git blob %s of %q: %w", f.Hash, p, err)
		}
		r, err := b.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		h := sha256.New()
		var target strings.Builder
		var w io.Writer = h
		if f.Mode == filemode.Symlink {
			w = &target
		}
		n, err := io.Copy(w, r)
		if err != nil {
			return err
		}
		if f.Mode == filemode.Symlink {
			m.Files = append(m.Files, Entry{Path: p, Type: TypeSymlink, Target: target.String()})
			return nil
		}
		e := Entry{Path: p, Type: TypeFile, Mode: 0o644, Size: n, Hash: hex.EncodeToString(h.Sum(nil))}
		if f.Mode == filemode.Executable {
			e.Mode = 0o755
		}
		src.bySHA256[e.Hash] = f.Hash
		m.Files = append(m.Files, e)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return m, src, nil
}

// gitBlobs serves a git checkpoint's blobs by their SHA-256; it stores nothing.
type gitBlobs struct {
	repo     *git.Repository
	bySHA256 map[string]plumbing.Hash
}

func (g gitBlobs) Has(_ context.Context, hash string) (bool, error) {
	_, ok := g.bySHA256[hash]
	return ok, nil
}

func (g gitBlobs) Put(context.Context, string, int64, io.Reader) error {
	return errors.New("a git checkpoint is read-only")
}

func (g gitBlobs) Get(_ context.Context, hash string) (io.ReadCloser, error) {
	h, ok := g.bySHA256[hash]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", hash, fs.ErrNotExist)
	}
	b, err := g.repo.BlobObject(h)
	if err != nil {
		return nil, err
	}
	return b.Reader()
}

// PreviewGit previews a restore of git checkpoint commit onto dir; it writes nothing.
func PreviewGit(ctx context.Context, dir, commit string, files []string) (Preview, error) {
	m, src, err := GitManifest(dir, commit)
	if err != nil {
		return Preview{}, err
	}
	return PreviewManifest(ctx, dir, commit, m, src, files)
}

// RestoreGit restores git checkpoint commit onto its work tree like Restore: explicit paths only,
// nothing deleted, no ref or index touched; the guard is a file checkpoint in the store.
func (s *Store) RestoreGit(ctx context.Context, dir, commit string, opts RestoreOptions) (RestoreResult, error) {
	m, src, err := GitManifest(dir, commit)
	if err != nil {
		return RestoreResult{}, err
	}
	return s.restore(ctx, dir, commit, m, src, opts)
}

// CreateGit checkpoints a git workspace as a commit object and records it in the store, so it is
// listed, addressed, previewed, restored and pruned like any checkpoint. A capture identical to the
// session's latest git checkpoint writes nothing (seed D2). A linked work tree (`git worktree add`) is
// checkpointed in the repository it shares. A directory that is not a git work tree, or whose HEAD is
// unborn, gets a file checkpoint instead (seed D13a); Created.Stats says which. A bare repository is
// refused (ErrBareRepository).
func (s *Store) CreateGit(ctx context.Context, dir string, opts CaptureOptions) (Created, error) {
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
	g, err := CaptureGit(ctx, dir, prevCommit, opts)
	switch {
	case errors.Is(err, ErrUnbornHead):
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
