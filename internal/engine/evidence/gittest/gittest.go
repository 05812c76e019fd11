package gittest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo is a work tree in a temporary directory. Commits get increasing, fixed timestamps so that
// hashes are reproducible within a test.
type Repo struct {
	tb   testing.TB
	Dir  string
	Git  *git.Repository
	tree *git.Worktree
	tick int64
}

// New initialises an empty repository in a fresh temporary directory.
func New(tb testing.TB) *Repo {
	tb.Helper()
	dir := tb.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		tb.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		tb.Fatal(err)
	}
	return &Repo{tb: tb, Dir: dir, Git: repo, tree: wt}
}

func (r *Repo) signature() *object.Signature {
	r.tick++
	return &object.Signature{Name: "fixture", Email: "fixture@example.com", When: time.Unix(1_700_000_000+r.tick, 0)}
}

// Commit writes the files (path → content), commits them and returns the commit's full SHA.
func (r *Repo) Commit(msg string, files map[string]string) string {
	r.tb.Helper()
	for p, content := range files {
		full := filepath.Join(r.Dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			r.tb.Fatal(err)
		}
		if _, err := r.tree.Add(p); err != nil {
			r.tb.Fatal(err)
		}
	}
	h, err := r.tree.Commit(msg, &git.CommitOptions{Author: r.signature()})
	if err != nil {
		r.tb.Fatal(err)
	}
	return h.String()
}

// Empty makes an --allow-empty commit: a message that claims work while no file moved.
func (r *Repo) Empty(msg string) string {
	r.tb.Helper()
	h, err := r.tree.Commit(msg, &git.CommitOptions{Author: r.signature(), AllowEmptyCommits: true})
	if err != nil {
		r.tb.Fatal(err)
	}
	return h.String()
}

// Checkout switches to branch, creating it at the current HEAD when create is set.
func (r *Repo) Checkout(branch string, create bool) {
	r.tb.Helper()
	if err := r.tree.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(branch), Create: create}); err != nil {
		r.tb.Fatal(err)
	}
}
