package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// gitExcludes keeps every repository's own data (.git, a directory or a linked work tree's gitlink
// file, at any depth) out of every capture, and out of a restore's leftovers.
var gitExcludes = []string{".git"}

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

// CreateGit checkpoints a git work tree like Create, objects in the store: every file of the work
// tree, tracked or not and in nested repositories too, but no .git at any depth (a repository's own
// data, or a linked work tree's gitlink file), so neither the capture nor any restore of it reads or
// writes a repository, and no object of the checkpoint depends on one (a user's `git gc` prunes
// objects nothing in the repository names). Its Reason is "git". A directory that is not a git work
// tree gets a plain file checkpoint; a bare repository is refused (ErrBareRepository).
//
// Checkpoints an earlier version wrote as commit objects in the repository (Manifest.GitCommit) are
// still previewed, restored and pruned from there.
func (s *Store) CreateGit(ctx context.Context, dir string, opts CaptureOptions) (Created, error) {
	_, err := openGitWorkspace(dir)
	switch {
	case err == nil:
		if opts.Reason == "" {
			opts.Reason = "git"
		}
	case errors.Is(err, git.ErrRepositoryNotExists):
	default:
		return Created{}, fmt.Errorf("opening git workspace %s: %w", dir, err)
	}
	return s.Create(ctx, dir, opts)
}
