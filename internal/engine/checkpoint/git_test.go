package checkpoint

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/evidence/gittest"
)

// gitState is what a checkpoint must not change in a repository: every ref outside the checkpoints'
// private namespace (HEAD, branches, tags) and the index file.
func gitState(t *testing.T, r *gittest.Repo) map[string]string {
	t.Helper()
	out := map[string]string{}
	refs, err := r.Git.References()
	must(t, err)
	must(t, refs.ForEach(func(ref *plumbing.Reference) error {
		if !strings.HasPrefix(ref.Name().String(), GitRefPrefix) {
			out[ref.Name().String()] = ref.String()
		}
		return nil
	}))
	idx, err := os.ReadFile(filepath.Join(r.Dir, ".git", "index"))
	must(t, err)
	out["index"] = string(idx)
	return out
}

func stage(t *testing.T, r *gittest.Repo, files map[string]string) {
	t.Helper()
	write(t, r.Dir, files)
	wt, err := r.Git.Worktree()
	must(t, err)
	for p := range files {
		_, err := wt.Add(p)
		must(t, err)
	}
}

func TestGitCheckpointIsACommitThatMovesNoRefAndTouchesNoIndex(t *testing.T) {
	r := gittest.New(t)
	head := r.Commit("init", map[string]string{"a.txt": "alpha", "sub/b.txt": "beta", "same.txt": "same"})
	write(t, r.Dir, map[string]string{"a.txt": "alpha at step 12", "untracked.txt": "u"})
	stage(t, r, map[string]string{"staged.txt": "staged"})
	before := gitState(t, r)

	c, err := legacyCaptureGit(ctx, r.Dir, "", CaptureOptions{Anchor: recorderAnchor(12), Now: clock()})
	must(t, err)
	// a.txt changed (16 bytes) and staged.txt is new (6 bytes); same.txt and sub/b.txt cost nothing.
	if !c.New || c.Files != 4 || c.IncrementalBytes != 22 {
		t.Fatalf("capture: %+v, want 4 files and 22 incremental bytes", c)
	}
	if d := cmp.Diff(before, gitState(t, r)); d != "" {
		t.Errorf("a git checkpoint changed refs or the index (-before +after):\n%s", d)
	}
	commit, err := r.Git.CommitObject(plumbing.NewHash(c.Commit))
	must(t, err)
	if len(commit.ParentHashes) != 1 || commit.ParentHashes[0].String() != head {
		t.Errorf("checkpoint parents %v, want HEAD %s", commit.ParentHashes, head)
	}
	files, err := treeFiles(r.Git.Storer, commit)
	must(t, err)
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	if d := cmp.Diff([]string{"a.txt", "same.txt", "staged.txt", "sub/b.txt"}, paths); d != "" {
		t.Errorf("checkpoint tree (-want +got):\n%s", d)
	}

	again, err := legacyCaptureGit(ctx, r.Dir, c.Commit, CaptureOptions{Anchor: recorderAnchor(13), Now: clock()})
	if err != nil || again.New || again.Commit != c.Commit {
		t.Fatalf("identical capture: %+v, %v; want the previous commit reused", again, err)
	}
	if d := cmp.Diff([]string{GitRefPrefix + c.Commit + " " + c.Commit}, privateRefs(t, r.Dir)); d != "" {
		t.Errorf("private checkpoint refs (-want +got):\n%s", d)
	}
}

// privateRefs lists the refs under GitRefPrefix as "name hash", read afresh from the repository.
func privateRefs(t *testing.T, dir string) []string {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	must(t, err)
	refs, err := repo.References()
	must(t, err)
	var out []string
	must(t, refs.ForEach(func(ref *plumbing.Reference) error {
		if strings.HasPrefix(ref.Name().String(), GitRefPrefix) {
			out = append(out, ref.Name().String()+" "+ref.Hash().String())
		}
		return nil
	}))
	sort.Strings(out)
	return out
}

// gitCLI runs the git binary in dir; the test is skipped when there is none.
func gitCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git binary on PATH: cannot run a real git gc")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestGitCheckpointsSurviveGitGC: a checkpoint commit is reachable only through its private ref; a
// real `git gc --prune=now` keeps it and its blobs, it restores afterwards, and the user's branch and
// HEAD never moved.
func TestGitCheckpointsSurviveGitGC(t *testing.T) {
	r := gittest.New(t)
	r.Commit("init", map[string]string{"a.txt": "alpha", "sub/b.txt": "beta"})
	// Content that exists nowhere but in the checkpoint: without a ref, gc deletes its blob.
	write(t, r.Dir, map[string]string{"a.txt": "alpha at step 12, only in the checkpoint"})
	userRefs := gitCLI(t, r.Dir, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags")
	head := gitCLI(t, r.Dir, "symbolic-ref", "HEAD") + gitCLI(t, r.Dir, "rev-parse", "HEAD")

	store := OpenStore(t.TempDir())
	c, err := legacyCreateGit(ctx, store, r.Dir, CaptureOptions{Anchor: recorderAnchor(12), Now: clock()})
	must(t, err)
	m, err := store.Load(ctx, c.ID)
	must(t, err)

	gitCLI(t, r.Dir, "gc", "--prune=now", "--quiet")
	gitCLI(t, r.Dir, "cat-file", "-e", m.GitCommit+"^{commit}")
	gitCLI(t, r.Dir, "fsck", "--no-dangling", "--strict")

	write(t, r.Dir, map[string]string{"a.txt": "broken at step 40"})
	res, err := store.Restore(ctx, r.Dir, c.ID, RestoreOptions{Guard: GuardOff, Now: clock()})
	must(t, err)
	if got := read(t, filepath.Join(r.Dir, "a.txt")); got != "alpha at step 12, only in the checkpoint" || res.Written != 1 {
		t.Fatalf("restore after gc: a.txt = %q, %d written", got, res.Written)
	}
	if d := cmp.Diff(userRefs, gitCLI(t, r.Dir, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags")); d != "" {
		t.Errorf("a checkpoint moved a branch or tag (-before +after):\n%s", d)
	}
	if d := cmp.Diff(head, gitCLI(t, r.Dir, "symbolic-ref", "HEAD")+gitCLI(t, r.Dir, "rev-parse", "HEAD")); d != "" {
		t.Errorf("a checkpoint moved HEAD (-before +after):\n%s", d)
	}
}

func TestGitRestoreWritesExplicitPathsAndNeverDeletes(t *testing.T) {
	r := gittest.New(t)
	r.Commit("init", map[string]string{"a.txt": "alpha", "sub/b.txt": "beta", "run.sh": "#!/bin/sh"})
	must(t, os.Chmod(filepath.Join(r.Dir, "run.sh"), 0o755))
	c, err := legacyCaptureGit(ctx, r.Dir, "", CaptureOptions{Now: clock()})
	must(t, err)

	// After the checkpoint: a.txt broken, sub/b.txt deleted, a file staged as new, one untracked.
	write(t, r.Dir, map[string]string{"a.txt": "broken", "untracked.txt": "u"})
	must(t, os.Remove(filepath.Join(r.Dir, "sub/b.txt")))
	stage(t, r, map[string]string{"staged-new.txt": "n"})
	before := gitState(t, r)

	store := OpenStore(t.TempDir())
	p, err := PreviewGit(ctx, r.Dir, c.Commit, nil)
	must(t, err)
	res, err := store.RestoreGit(ctx, r.Dir, c.Commit, RestoreOptions{Now: clock()})
	must(t, err)
	if d := cmp.Diff(p, res.Preview); d != "" {
		t.Errorf("restore did not do what preview said (-preview +restore):\n%s", d)
	}
	if read(t, filepath.Join(r.Dir, "a.txt")) != "alpha" || read(t, filepath.Join(r.Dir, "sub/b.txt")) != "beta" {
		t.Error("restore did not bring back a.txt and sub/b.txt")
	}
	if fi, err := os.Stat(filepath.Join(r.Dir, "run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh lost its executable bit: %v", err)
	}
	if d := cmp.Diff([]string{"staged-new.txt", "untracked.txt"}, res.Leftovers); d != "" {
		t.Errorf("leftovers (-want +got):\n%s", d)
	}
	for _, kept := range []string{"staged-new.txt", "untracked.txt"} {
		if _, err := os.Stat(filepath.Join(r.Dir, kept)); err != nil {
			t.Errorf("restore deleted %s: %v", kept, err)
		}
	}
	if res.Written != 2 || res.Count(ActionUnchanged) != 1 {
		t.Errorf("written %d, unchanged %d; want 2 and run.sh unchanged", res.Written, res.Count(ActionUnchanged))
	}
	if d := cmp.Diff(before, gitState(t, r)); d != "" {
		t.Errorf("restore changed refs or the index (-before +after):\n%s", d)
	}
	// The guard is a file checkpoint of the broken work tree, without the repository in it.
	g, err := store.Load(ctx, res.Guard)
	must(t, err)
	for _, e := range g.Files {
		if e.Path == ".git" || filepath.Dir(e.Path) == ".git" || len(e.Path) > 5 && e.Path[:5] == ".git/" {
			t.Fatalf("the guard captured %s", e.Path)
		}
	}
}

func TestGitUnbornHeadFallsBackAndBadCommitIDsAreRefused(t *testing.T) {
	r := gittest.New(t)
	write(t, r.Dir, map[string]string{"a.txt": "a"})
	if _, err := legacyCaptureGit(ctx, r.Dir, "", CaptureOptions{}); !errors.Is(err, errUnbornHead) {
		t.Fatalf("capture on an unborn HEAD: %v, want errUnbornHead", err)
	}
	before := tree(t, r.Dir)
	for _, bad := range []string{"--output=/tmp/x", "HEAD", "abc", "ABCDEF0123456789ABCDEF0123456789ABCDEF01"} {
		var me *ManifestError
		if _, err := OpenStore(t.TempDir()).RestoreGit(ctx, r.Dir, bad, RestoreOptions{}); !errors.As(err, &me) {
			t.Errorf("restore of %q: %v, want a ManifestError", bad, err)
		}
	}
	if d := cmp.Diff(before, tree(t, r.Dir)); d != "" {
		t.Errorf("(-before +after):\n%s", d)
	}
}

func TestAnUnbornHeadOrNoRepositoryIsCheckpointedAsFiles(t *testing.T) {
	unborn := gittest.New(t).Dir
	plain := t.TempDir()
	for name, dir := range map[string]string{"unborn HEAD": unborn, "not a repository": plain} {
		t.Run(name, func(t *testing.T) {
			write(t, dir, map[string]string{"a.txt": "alpha"})
			store := OpenStore(t.TempDir())
			c, err := store.CreateGit(ctx, dir, CaptureOptions{Now: clock()})
			must(t, err)
			m, err := store.Load(ctx, c.ID)
			must(t, err)
			want := map[string]string{"unborn HEAD": "git", "not a repository": "capture"}[name]
			if m.GitCommit != "" || m.Reason != want || c.Stats.IncrementalBytes != 5 || len(m.Files) != 1 {
				t.Fatalf("%s: %+v, commit %q reason %q, %d files", name, c, m.GitCommit, m.Reason, len(m.Files))
			}
		})
	}
}

// TestAGitCheckpointWithADotGitPathIsRefused: a checkpoint commit whose tree holds a ".git" segment
// at any depth and in any case would write into a repository; it is refused before anything is read
// into a manifest.
func TestAGitCheckpointWithADotGitPathIsRefused(t *testing.T) {
	r := gittest.New(t)
	head := r.Commit("init", map[string]string{"a.txt": "alpha"})
	st := r.Git.Storer
	obj := st.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	must(t, err)
	_, err = w.Write([]byte("#!/bin/sh\necho owned\n"))
	must(t, err)
	must(t, w.Close())
	blob, err := st.SetEncodedObject(obj)
	must(t, err)
	top := &gitDir{}
	top.add([]string{"sub", ".GIT", "hooks", "post-checkout"}, object.TreeEntry{Name: "post-checkout", Mode: filemode.Executable, Hash: blob})
	tree, err := top.write(st)
	must(t, err)
	c := &object.Commit{TreeHash: tree, ParentHashes: []plumbing.Hash{plumbing.NewHash(head)}, Message: "evil\n"}
	cobj := st.NewEncodedObject()
	must(t, c.Encode(cobj))
	commit, err := st.SetEncodedObject(cobj)
	must(t, err)
	var me *ManifestError
	if _, _, err := GitManifest(r.Dir, commit.String()); !errors.As(err, &me) || me.Path != "sub/.GIT" {
		t.Fatalf("GitManifest of a tree with sub/.GIT: %v, want a ManifestError naming it", err)
	}
}
