package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/evidence/gittest"
)

// TestConcurrentRestoresIntoOneWorkspaceNeverInterleave: two restores of different checkpoints into
// the same workspace at once used to both succeed and leave a mix of the two (each file atomic, the
// workspace neither checkpoint), the second guard holding the first restore half done. Now the
// workspace ends as exactly the checkpoint of the last restore that succeeded, and one that found
// another running is refused with ErrRestoreInProgress having written nothing and stored no guard.
func TestConcurrentRestoresIntoOneWorkspaceNeverInterleave(t *testing.T) {
	ws, st := t.TempDir(), OpenStore(t.TempDir())
	now := clock()
	const files = 300
	fill := func(tag string) map[string]string {
		m := map[string]string{}
		for i := range files {
			m[fmt.Sprintf("d%d/f%d", i%7, i)] = fmt.Sprintf("%s%d", tag, i)
		}
		return m
	}
	var ids []string
	for i, tag := range []string{"A", "B", "C"} {
		write(t, ws, fill(tag))
		ids = append(ids, create(t, st, ws, now, int64(i+1)).ID)
	}
	write(t, ws, fill("D"))

	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, len(ids))
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = st.Restore(ctx, ws, id, RestoreOptions{Guard: GuardWarn, GuardAnchor: recorderAnchor(9)})
			}()
		}
		wg.Wait()
		got := tree(t, ws)
		matched := false
		for i, tag := range []string{"A", "B", "C"} {
			if errs[i] != nil && !errors.Is(errs[i], ErrRestoreInProgress) {
				t.Fatalf("round %d: restore of %s: %v", round, tag, errs[i])
			}
			want := fill(tag)
			same := errs[i] == nil
			for p, c := range want {
				same = same && got[p] == "644:"+c
			}
			matched = matched || same
		}
		if !matched {
			t.Fatalf("round %d: concurrent restores (errors %v) left the workspace none of the checkpoints restored: %v", round, errs, got)
		}
	}
}

// TestARestoreWhileAnotherHoldsTheWorkspaceWritesNothing: a restore that finds the workspace's restore
// lock held is refused before the guard or any file is written, and the next one succeeds.
func TestARestoreWhileAnotherHoldsTheWorkspaceWritesNothing(t *testing.T) {
	ws, st := t.TempDir(), OpenStore(t.TempDir())
	now := clock()
	write(t, ws, map[string]string{"a.txt": "one"})
	c := create(t, st, ws, now, 1)
	write(t, ws, map[string]string{"a.txt": "two"})
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	held, err := lockWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := st.Manifests.List(ctx)
	_, err = st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: now})
	if !errors.Is(err, ErrRestoreInProgress) {
		t.Fatalf("restore while another holds the workspace: %v, want ErrRestoreInProgress", err)
	}
	if after, _ := st.Manifests.List(ctx); read(t, filepath.Join(ws, "a.txt")) != "two" || len(after) != len(before) {
		t.Fatalf("the refused restore wrote a file or a guard (%d manifests, were %d)", len(after), len(before))
	}
	held.Close()
	if _, err := st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: now}); err != nil || read(t, filepath.Join(ws, "a.txt")) != "one" {
		t.Fatalf("restore once the lock is free: %v", err)
	}
}

// TestACaptureAndARestoreOfOneWorkspaceNeverOverlap: a capture taken while a restore writes used to
// hold half of each state and report success. A capture (file or git) is refused while a restore
// holds the workspace, and a restore while a capture reads it; captures run side by side.
func TestACaptureAndARestoreOfOneWorkspaceNeverOverlap(t *testing.T) {
	r := gittest.New(t)
	r.Commit("init", map[string]string{"a.txt": "one"})
	ws, st := r.Dir, OpenStore(t.TempDir())
	now := clock()
	c := create(t, st, ws, now, 1)
	write(t, ws, map[string]string{"a.txt": "two"})
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	restoring, err := lockWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := st.Manifests.List(ctx)
	if _, err := st.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(2), Now: now}); !errors.Is(err, ErrRestoreInProgress) {
		t.Errorf("capture during a restore: %v, want ErrRestoreInProgress", err)
	}
	if _, err := st.CreateGit(ctx, ws, CaptureOptions{Anchor: recorderAnchor(2), Now: now}); !errors.Is(err, ErrRestoreInProgress) {
		t.Errorf("git capture during a restore: %v, want ErrRestoreInProgress", err)
	}
	if after, _ := st.Manifests.List(ctx); len(after) != len(before) {
		t.Errorf("a refused capture stored a checkpoint")
	}
	restoring.Close()

	capturing, err := shareWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardWarn, Now: now}); !errors.Is(err, ErrRestoreInProgress) || read(t, filepath.Join(ws, "a.txt")) != "two" {
		t.Errorf("restore during a capture: %v, want ErrRestoreInProgress and nothing written", err)
	}
	if _, err := st.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(3), Now: now}); err != nil {
		t.Errorf("a capture beside another capture: %v", err)
	}
	capturing.Close()
	if res, err := st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: now}); err != nil || res.Guard == "" || read(t, filepath.Join(ws, "a.txt")) != "one" {
		t.Errorf("restore behind its own guard once the workspace is free: %+v, %v", res, err)
	}
}
