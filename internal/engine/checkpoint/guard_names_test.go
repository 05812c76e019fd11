package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAGuardLeavesOutNamesItCannotRecordThatTheRestoreDoesNotTouch: a leftover whose name (or link
// target) is not valid UTF-8 cannot be in a manifest. It made every guard fail, so --guard warn (the
// default) restored with no guard, a restore nobody could undo, and --guard require refused every
// restore of that workspace (and a directory so named failed every preview and restore, guard or
// not). The restore never writes such a path, so its guard leaves it out, says so,
// and still undoes the restore; a link the restore replaces whose target cannot be recorded still
// fails the guard, which must hold it.
func TestAGuardLeavesOutNamesItCannotRecordThatTheRestoreDoesNotTouch(t *testing.T) {
	ws, st := t.TempDir(), OpenStore(t.TempDir())
	now := clock()
	write(t, ws, map[string]string{"a.txt": "one"})
	must(t, os.Symlink("a.txt", filepath.Join(ws, "link")))
	c := create(t, st, ws, now, 1)
	write(t, ws, map[string]string{"a.txt": "two", "bad\xff/inside.txt": "x", "caf\xe9.txt": "y"})
	must(t, os.Symlink("caf\xe9", filepath.Join(ws, "oddlink")))

	// A directory whose name is not UTF-8 used to fail every preview and restore ("readdir: invalid
	// argument" from the leftovers walk); it is a leftover.
	p, err := st.Preview(ctx, ws, c.ID, nil)
	if err != nil || !slices.Contains(p.Leftovers, "bad\xff") || !slices.Contains(p.Leftovers, "caf\xe9.txt") {
		t.Fatalf("preview beside unrecordable leftovers: %+v, %v", p, err)
	}
	res, err := st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: now})
	if err != nil || res.Guard == "" {
		t.Fatalf("restore behind a guard beside unrecordable leftovers: %+v, %v", res, err)
	}
	want := []string{"bad\xff", "caf\xe9.txt", "oddlink"}
	if got := slices.Sorted(slices.Values(res.GuardOmitted)); !slices.Equal(got, want) {
		t.Errorf("the guard says it left out %q, want %q", got, want)
	}
	if read(t, filepath.Join(ws, "a.txt")) != "one" {
		t.Fatal("a.txt not restored")
	}
	if _, err := st.Restore(ctx, ws, res.Guard, RestoreOptions{Guard: GuardOff, Now: now}); err != nil || read(t, filepath.Join(ws, "a.txt")) != "two" {
		t.Fatalf("restoring the guard did not undo the restore: %v", err)
	}

	// A link the restore replaces must be in the guard: an unrecordable target there still fails it.
	must(t, os.Remove(filepath.Join(ws, "link")))
	must(t, os.Symlink("x\xff", filepath.Join(ws, "link")))
	_, err = st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: now})
	var ge *GuardError
	var ne *NameError
	if !errors.As(err, &ge) || !errors.As(err, &ne) {
		t.Fatalf("restore replacing a link the guard cannot record: %v, want a GuardError naming it", err)
	}
	if target, _ := os.Readlink(filepath.Join(ws, "link")); target != "x\xff" {
		t.Errorf("the refused restore replaced the link (now -> %q)", target)
	}
}
