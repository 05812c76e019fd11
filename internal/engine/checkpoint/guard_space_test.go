package checkpoint

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func randomBytes(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAGuardThatCannotFitIsForeseenWithEveryWorkspaceFile: the guard stores every file of the
// workspace whose blob the store lacks, not only the files the restore replaces. A leftover written
// since the checkpoint used to be left out of the space check, so the guard hit ENOSPC halfway and
// --guard warn (the default) restored with no guard: a restore nobody could undo. Now the restore is
// refused up front, writing nothing and storing no guard; leftovers the store already holds (read to
// find out only when the quick count does not fit) take no room, and that restore goes ahead behind
// its guard.
func TestAGuardThatCannotFitIsForeseenWithEveryWorkspaceFile(t *testing.T) {
	t.Run("a new leftover", func(t *testing.T) {
		mnt := mountTmpfs(t, "10m")
		ws, st := filepath.Join(mnt, "ws"), OpenStore(filepath.Join(mnt, "store"))
		write(t, ws, map[string]string{"a.bin": randomBytes(t, 1<<20)})
		c := create(t, st, ws, clock(), 1)
		// 7 MiB used: the restore's 1 MiB copy fits the 3 MiB left, the guard's 6 MiB does not.
		write(t, ws, map[string]string{"a.bin": randomBytes(t, 1<<20), "left.bin": randomBytes(t, 5<<20)})
		before := tree(t, ws)
		res, err := st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardWarn, Now: clock()})
		var ns *NoSpaceError
		if !errors.As(err, &ns) || ns.GuardNeed < 6<<20 {
			t.Fatalf("restore whose guard cannot fit: %+v, %v; want a NoSpaceError counting the leftover in the guard", res, err)
		}
		if d := cmp.Diff(before, tree(t, ws)); d != "" {
			t.Errorf("the refused restore wrote (-before +after):\n%s", d)
		}
		if list, _ := st.List(ctx); len(list) != 1 {
			t.Errorf("the refused restore stored a guard: %d checkpoints", len(list))
		}
	})
	t.Run("a leftover the store holds", func(t *testing.T) {
		mnt := mountTmpfs(t, "10m")
		ws, st := filepath.Join(mnt, "ws"), OpenStore(filepath.Join(mnt, "store"))
		left := randomBytes(t, 2<<20)
		write(t, ws, map[string]string{"a.bin": randomBytes(t, 1<<20), "left.bin": left})
		create(t, st, ws, clock(), 1)
		must(t, os.Remove(filepath.Join(ws, "left.bin")))
		c := create(t, st, ws, clock(), 2)
		write(t, ws, map[string]string{"a.bin": randomBytes(t, 1<<20), "left.bin": left})
		// 6 MiB used, 4 MiB free: the copy (1) and the guard's a.bin (1) fit; left.bin (2) counted
		// too would not, but its blob is stored.
		res, err := st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: clock()})
		if err != nil || res.Guard == "" || res.Written != 1 {
			t.Fatalf("restore whose leftover is already stored: %+v, %v", res, err)
		}
	})
	t.Run("a store on another file system", func(t *testing.T) {
		mnt := mountTmpfs(t, "2m")
		ws, st := t.TempDir(), OpenStore(filepath.Join(mnt, "store"))
		write(t, ws, map[string]string{"a.bin": randomBytes(t, 1<<20)})
		c := create(t, st, ws, clock(), 1)
		write(t, ws, map[string]string{"a.bin": randomBytes(t, 1<<20), "left.bin": randomBytes(t, 1<<20)})
		before := tree(t, ws)
		res, err := st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardWarn, Now: clock()})
		var ns *NoSpaceError
		if !errors.As(err, &ns) || ns.GuardNeed != ns.Need || ns.At != filepath.Join(mnt, "store") {
			t.Fatalf("restore whose guard cannot fit the store's file system: %+v, %v; want a NoSpaceError there", res, err)
		}
		if d := cmp.Diff(before, tree(t, ws)); d != "" {
			t.Errorf("the refused restore wrote (-before +after):\n%s", d)
		}
		// Without a guard the store takes nothing: the restore goes ahead.
		if res, err := st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardOff, Now: clock()}); err != nil || res.Written != 1 {
			t.Fatalf("restore with --guard off: %+v, %v", res, err)
		}
	})
}
