package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/evidence/gittest"
)

// dotGitState describes every path below each .git of dir (the repository, a nested one, a linked
// work tree's gitlink file): type, mode, size, mtime in nanoseconds and content, so equality before
// and after proves nothing was written, touched or created there.
func dotGitState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	must(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel != ".git" && !strings.HasPrefix(rel, ".git/") && !strings.Contains(rel, "/.git/") && !strings.HasSuffix(rel, "/.git") {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + hashOf(string(b))
		}
		out[rel] = desc
		return nil
	}))
	return out
}

// TestAGitCheckpointKeepsItsObjectsInTheStoreAndNeverTouchesDotGit: a git workspace's checkpoint
// holds tracked, modified, staged and untracked files, a nested repository's files and a file a
// shell command wrote, all as blobs in the store; no .git is captured, and neither the capture nor a
// restore (with its guard) changes a byte or an mtime below any .git, or adds a ref.
func TestAGitCheckpointKeepsItsObjectsInTheStoreAndNeverTouchesDotGit(t *testing.T) {
	r := gittest.New(t)
	r.Commit("init", map[string]string{"a.txt": "alpha", "sub/b.txt": "beta"})
	write(t, r.Dir, map[string]string{"a.txt": "alpha at step 12", "untracked.txt": "u"})
	stage(t, r, map[string]string{"staged.txt": "staged"})
	nested := filepath.Join(r.Dir, "vendor", "lib")
	must(t, os.MkdirAll(nested, 0o755))
	gitCLI(t, nested, "init", "--quiet")
	write(t, nested, map[string]string{"lib.go": "package lib"})
	gitCLI(t, nested, "add", "lib.go")
	gitCLI(t, nested, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "lib")
	must(t, os.WriteFile(filepath.Join(r.Dir, "build.log"), nil, 0o644))
	sh(t, r.Dir, `echo "made by a shell command" > build.log`)
	before := dotGitState(t, r.Dir)
	refs := gitCLI(t, r.Dir, "for-each-ref")

	store := OpenStore(t.TempDir())
	c, err := store.CreateGit(ctx, r.Dir, CaptureOptions{Anchor: recorderAnchor(12)})
	must(t, err)
	m, err := store.Load(ctx, c.ID)
	must(t, err)
	want := []string{"a.txt", "build.log", "staged.txt", "sub/b.txt", "untracked.txt", "vendor/lib/lib.go"}
	if d := cmp.Diff(want, sortedPaths(m)); d != "" {
		t.Errorf("git checkpoint paths (-want +got):\n%s", d)
	}
	if m.Reason != "git" || m.GitCommit != "" {
		t.Errorf("reason %q, commit %q; want a git checkpoint in the store", m.Reason, m.GitCommit)
	}
	for _, e := range m.Files {
		if ok, err := store.Blobs.Has(ctx, e.Hash); err != nil || !ok {
			t.Errorf("%s: its blob %s is not in the store (%v)", e.Path, e.Hash, err)
		}
	}
	if d := cmp.Diff(before, dotGitState(t, r.Dir)); d != "" {
		t.Fatalf("the capture changed a .git (-before +after):\n%s", d)
	}

	write(t, r.Dir, map[string]string{"a.txt": "broken", "vendor/lib/lib.go": "broken", "build.log": "x"})
	res, err := store.Restore(ctx, r.Dir, c.ID, RestoreOptions{Guard: GuardRequire})
	must(t, err)
	if res.Guard == "" || res.Written != 3 {
		t.Errorf("restore: guard %q, %d written; want a guard and 3 files written", res.Guard, res.Written)
	}
	for rel, body := range map[string]string{"a.txt": "alpha at step 12", "vendor/lib/lib.go": "package lib", "build.log": "made by a shell command\n"} {
		if got := read(t, filepath.Join(r.Dir, rel)); got != body {
			t.Errorf("%s = %q after restore, want %q", rel, got, body)
		}
	}
	if d := cmp.Diff(before, dotGitState(t, r.Dir)); d != "" {
		t.Errorf("the restore changed a .git (-before +after):\n%s", d)
	}
	if d := cmp.Diff(refs, gitCLI(t, r.Dir, "for-each-ref")); d != "" {
		t.Errorf("refs changed (-before +after):\n%s", d)
	}
}

// sh runs a shell command in dir, as an agent's shell tool does.
func sh(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
}

// TestASchema1CheckpointHoldingADotGitIsRestoredAroundIt: a plain capture written before .git was
// left out holds the repository's files; restoring it writes the work tree and nothing below .git.
func TestASchema1CheckpointHoldingADotGitIsRestoredAroundIt(t *testing.T) {
	r := gittest.New(t)
	r.Commit("init", map[string]string{"a.txt": "alpha"})
	store := OpenStore(t.TempDir())
	stale := "[core]\n\tbare = true\n"
	for _, body := range []string{"alpha", stale} {
		must(t, store.Blobs.Put(ctx, hashOf(body), int64(len(body)), strings.NewReader(body)))
	}
	m := &Manifest{SchemaVersion: 1, Reason: "capture", Files: []Entry{
		{Path: ".git/config", Type: TypeFile, Mode: 0o644, Size: int64(len(stale)), Hash: hashOf(stale)},
		{Path: "a.txt", Type: TypeFile, Mode: 0o644, Size: 5, Hash: hashOf("alpha")},
	}}
	id, err := store.Save(ctx, m)
	must(t, err)
	write(t, r.Dir, map[string]string{"a.txt": "broken"})
	before := dotGitState(t, r.Dir)
	res, err := store.Restore(ctx, r.Dir, id, RestoreOptions{Guard: GuardRequire})
	must(t, err)
	if read(t, filepath.Join(r.Dir, "a.txt")) != "alpha" || res.Written != 1 || len(res.Leftovers) != 0 {
		t.Errorf("restore: a.txt %q, %d written, leftovers %v; want a.txt alone written", read(t, filepath.Join(r.Dir, "a.txt")), res.Written, res.Leftovers)
	}
	if d := cmp.Diff(before, dotGitState(t, r.Dir)); d != "" {
		t.Errorf("the restore wrote into .git (-before +after):\n%s", d)
	}
	var unknown *UnknownPathsError
	if _, err := store.Restore(ctx, r.Dir, id, RestoreOptions{Files: []string{".git/config"}, Guard: GuardOff}); !errors.As(err, &unknown) {
		t.Errorf("a restore of .git/config alone: %v, want it refused as a path the checkpoint does not restore", err)
	}
}
