package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/evidence/gittest"
)

// TestAPackedRefAboveTheCheckpointRefIsRespected: git refuses a ref below an existing one
// (refs/agentrewind, packed by `git pack-refs`, leaves no room for refs/agentrewind/…); the
// checkpoint must see the packed ref through the storer and refuse too, instead of writing a loose
// ref beside it that git then cannot handle. Nothing is stored, no loose ref is written.
func TestAPackedRefAboveTheCheckpointRefIsRespected(t *testing.T) {
	for _, above := range []string{"refs/agentrewind", "refs/agentrewind/checkpoints"} {
		t.Run(above, func(t *testing.T) {
			r := gittest.New(t)
			r.Commit("init", map[string]string{"a.txt": "alpha"})
			write(t, r.Dir, map[string]string{"a.txt": "changed"})
			gitCLI(t, r.Dir, "update-ref", above, "HEAD")
			gitCLI(t, r.Dir, "pack-refs", "--all")
			before := gitCLI(t, r.Dir, "for-each-ref", "--format=%(refname) %(objectname)")

			store := OpenStore(t.TempDir())
			_, err := legacyCreateGit(ctx, store, r.Dir, CaptureOptions{Anchor: recorderAnchor(1), Now: clock()})
			if err == nil || !strings.Contains(err.Error(), "the ref "+above+" exists, so git cannot hold "+GitRefPrefix) {
				t.Fatalf("capture under a packed %s: %v, want a refusal naming it", above, err)
			}
			if d := cmp.Diff(before, gitCLI(t, r.Dir, "for-each-ref", "--format=%(refname) %(objectname)")); d != "" {
				t.Errorf("the refused capture changed the refs (-before +after):\n%s", d)
			}
			var loose []string
			_ = filepath.WalkDir(filepath.Join(r.Dir, ".git", "refs", "agentrewind"), func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					loose = append(loose, p)
				}
				return nil
			})
			if len(loose) != 0 {
				t.Errorf("the refused capture wrote loose refs: %v", loose)
			}
			if list, _ := store.List(ctx); len(list) != 0 {
				t.Errorf("the refused capture stored %d checkpoints", len(list))
			}
		})
	}
}

// TestPackedCheckpointRefsAreReusedAndDropped: once `git pack-refs` moved a checkpoint's ref into
// packed-refs, an identical capture still finds the checkpoint, and DropGitRef deletes the packed ref
// (git sees it gone); deleting it again is not an error.
func TestPackedCheckpointRefsAreReusedAndDropped(t *testing.T) {
	r := gittest.New(t)
	r.Commit("init", map[string]string{"a.txt": "alpha"})
	write(t, r.Dir, map[string]string{"a.txt": "changed"})
	store := OpenStore(t.TempDir())
	c, err := legacyCreateGit(ctx, store, r.Dir, CaptureOptions{Anchor: recorderAnchor(1), Now: clock()})
	must(t, err)
	m, err := store.Load(ctx, c.ID)
	must(t, err)
	gitCLI(t, r.Dir, "pack-refs", "--all")
	if _, err := os.Stat(filepath.Join(r.Dir, ".git", GitRefPrefix+m.GitCommit)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("git pack-refs left the loose ref: %v", err)
	}
	again, err := legacyCreateGit(ctx, store, r.Dir, CaptureOptions{Anchor: recorderAnchor(2), Now: clock()})
	if err != nil || again.New || again.ID != c.ID {
		t.Fatalf("identical capture over a packed ref: %+v, %v", again, err)
	}

	must(t, DropGitRef(r.Dir, m.GitCommit))
	if got := gitCLI(t, r.Dir, "for-each-ref", GitRefPrefix); got != "" {
		t.Errorf("refs left after DropGitRef: %q", got)
	}
	must(t, DropGitRef(r.Dir, m.GitCommit))
}

// TestABareRepositoryIsRefusedAsAWorkspace: a bare repository has no work tree; a git checkpoint of it
// would hold no file, and a restore would write the checkpoint's files among its objects.
func TestABareRepositoryIsRefusedAsAWorkspace(t *testing.T) {
	r := gittest.New(t)
	head := r.Commit("init", map[string]string{"a.txt": "alpha"})
	bare := filepath.Join(t.TempDir(), "bare.git")
	gitCLI(t, r.Dir, "clone", "--quiet", "--bare", r.Dir, bare)
	before := tree(t, bare)
	store := OpenStore(t.TempDir())

	_, err := store.CreateGit(ctx, bare, CaptureOptions{Anchor: recorderAnchor(1), Now: clock()})
	if !errors.Is(err, ErrBareRepository) || !strings.Contains(err.Error(), bare+" is a bare git repository") {
		t.Fatalf("capture of a bare repository: %v, want ErrBareRepository naming it", err)
	}
	if list, _ := store.List(ctx); len(list) != 0 {
		t.Errorf("the refused capture stored %d checkpoints", len(list))
	}
	if _, err := store.RestoreGit(ctx, bare, head, RestoreOptions{Guard: GuardOff, Now: clock()}); !errors.Is(err, ErrBareRepository) {
		t.Errorf("restore into a bare repository: %v, want ErrBareRepository", err)
	}
	if d := cmp.Diff(before, tree(t, bare)); d != "" {
		t.Errorf("the bare repository changed (-before +after):\n%s", d)
	}
}

// TestALinkedWorktreeIsCheckpointedInTheRepositoryItShares: a work tree made by `git worktree add`
// has a .git file, its own HEAD and index, and the main repository's objects and refs. Its
// checkpoint is a git checkpoint (not a silent file fallback) kept by a ref of the shared repository;
// neither HEAD nor index of either work tree changes, and it restores.
func TestALinkedWorktreeIsCheckpointedWithoutItsGitlinkOrTheSharedRepository(t *testing.T) {
	r := gittest.New(t)
	r.Commit("init", map[string]string{"a.txt": "alpha", "sub/b.txt": "beta"})
	wt := filepath.Join(t.TempDir(), "linked")
	gitCLI(t, r.Dir, "worktree", "add", "--quiet", "-b", "agent", wt)
	admin := filepath.Join(r.Dir, ".git", "worktrees", "linked")
	state := func() map[string]string {
		out := gitState(t, r)
		for _, f := range []string{"HEAD", "index"} {
			out["linked "+f] = read(t, filepath.Join(admin, f))
		}
		out["main tree"] = gitCLI(t, r.Dir, "status", "--porcelain")
		return out
	}
	write(t, wt, map[string]string{"a.txt": "alpha at step 7"})
	before := state()

	store := OpenStore(t.TempDir())
	c, err := store.CreateGit(ctx, wt, CaptureOptions{Anchor: recorderAnchor(7), Now: clock()})
	must(t, err)
	m, err := store.Load(ctx, c.ID)
	must(t, err)
	if m.GitCommit != "" || m.Reason != "git" || len(m.Files) != 2 {
		t.Fatalf("linked work tree checkpoint: reason %q, commit %q, %d files; want a git checkpoint of 2 files in the store", m.Reason, m.GitCommit, len(m.Files))
	}
	if refs := privateRefs(t, r.Dir); len(refs) != 0 {
		t.Errorf("the checkpoint wrote refs into the shared repository: %v", refs)
	}
	if d := cmp.Diff(before, state()); d != "" {
		t.Errorf("the checkpoint changed a HEAD, an index or the main work tree (-before +after):\n%s", d)
	}

	write(t, wt, map[string]string{"a.txt": "broken"})
	res, err := store.Restore(ctx, wt, c.ID, RestoreOptions{Guard: GuardOff, Now: clock()})
	must(t, err)
	if got := read(t, filepath.Join(wt, "a.txt")); got != "alpha at step 7" || res.Written != 1 {
		t.Errorf("restore into the linked work tree: a.txt = %q, %d written", got, res.Written)
	}
	if got := read(t, filepath.Join(r.Dir, "a.txt")); got != "alpha" {
		t.Errorf("restore into the linked work tree wrote the main one: a.txt = %q", got)
	}
}

// TestOnlyRefsNoKeptCheckpointNamesAreDropped: a pruned git checkpoint's ref goes only when no kept
// checkpoint, of any session, names the same commit; file checkpoints have none.
func TestOnlyRefsNoKeptCheckpointNamesAreDropped(t *testing.T) {
	c1, c2, c3 := strings.Repeat("1", 40), strings.Repeat("2", 40), strings.Repeat("3", 40)
	deleted := []Deletion{{ID: "a", GitCommit: c2}, {ID: "b", GitCommit: c1}, {ID: "c"}, {ID: "d", GitCommit: c3}, {ID: "e", GitCommit: c1}}
	kept := []Summary{{ID: "f", GitCommit: c3}, {ID: "g"}}
	if d := cmp.Diff([]string{c1, c2}, GitRefsToDrop(deleted, kept)); d != "" {
		t.Errorf("refs to drop (-want +got):\n%s", d)
	}
}
