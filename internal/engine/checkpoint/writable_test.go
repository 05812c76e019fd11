package checkpoint

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// lockDir makes the existing directory d refuse writes by a means its caller cannot bypass: the
// permission bits for an ordinary user, and for root (whom they do not stop) a read-only bind mount
// of d onto itself, or else the immutable attribute. It skips the test when none is available.
func lockDir(t *testing.T, d string) {
	t.Helper()
	if os.Geteuid() != 0 {
		must(t, os.Chmod(d, 0o555))
		t.Cleanup(func() { _ = os.Chmod(d, 0o755) })
		return
	}
	if run(t, "mount", "--bind", d, d) == nil {
		t.Cleanup(func() { _ = run(t, "umount", d) })
		if err := run(t, "mount", "-o", "remount,bind,ro", d); err == nil {
			return
		}
		_ = run(t, "umount", d)
	}
	lockFile(t, d)
}

// lockFile sets the immutable attribute on p, which stops root from replacing or writing it; it
// skips the test when the file system or the caller cannot set it.
func lockFile(t *testing.T, p string) {
	t.Helper()
	if err := run(t, "chattr", "+i", p); err != nil {
		t.Skipf("no way to make %s refuse writes here (no read-only bind mount, no chattr +i): %v", p, err)
	}
	t.Cleanup(func() { _ = run(t, "chattr", "-i", p) })
}

func run(t *testing.T, name string, args ...string) error {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		return err
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		return errors.New(err.Error() + ": " + string(out))
	}
	return nil
}

// TestARestoreIntoAnUnwritableWorkspaceWritesNothing: a restore whose writes the workspace would
// refuse partway (a read-only or immutable directory, an immutable file) is refused before the first
// write and before the guard, naming the first path it could not write; preview refuses the same way.
// a.txt sorts first, so without the check it would be written before the refusal.
func TestARestoreIntoAnUnwritableWorkspaceWritesNothing(t *testing.T) {
	cases := []struct {
		name   string
		lock   func(t *testing.T, ws string)
		path   string
		at     string
		others []string // paths a selective restore may still write
	}{
		{
			name: "a read-only directory",
			lock: func(t *testing.T, ws string) { lockDir(t, filepath.Join(ws, "ro")) },
			path: "ro/b.txt", at: "ro", others: []string{"a.txt", "z.txt"},
		},
		{
			name: "a directory to create inside a read-only one",
			lock: func(t *testing.T, ws string) {
				write(t, ws, map[string]string{"ro/b.txt": "beta"}) // unchanged: ro/new/c.txt is the first write into ro
				lockDir(t, filepath.Join(ws, "ro"))
			},
			path: "ro/new/c.txt", at: "ro", others: []string{"a.txt", "z.txt"},
		},
		{
			name: "an immutable file",
			lock: func(t *testing.T, ws string) { lockFile(t, filepath.Join(ws, "ro", "b.txt")) },
			path: "ro/b.txt", at: "ro/b.txt", others: []string{"a.txt", "z.txt"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws, store := t.TempDir(), OpenStore(t.TempDir())
			write(t, ws, map[string]string{"a.txt": "alpha", "ro/b.txt": "beta", "ro/new/c.txt": "gamma", "z.txt": "zeta"})
			now := clock()
			c := create(t, store, ws, now, 1)
			must(t, os.RemoveAll(filepath.Join(ws, "ro", "new")))
			write(t, ws, map[string]string{"a.txt": "changed", "ro/b.txt": "changed", "z.txt": "changed"})
			tc.lock(t, ws)
			before := tree(t, ws)

			_, err := store.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: now})
			var ue *UnwritableError
			if !errors.As(err, &ue) || ue.Path != tc.path || ue.At != tc.at {
				t.Fatalf("restore: %v, want an UnwritableError for %s at %s", err, tc.path, tc.at)
			}
			if d := cmp.Diff(before, tree(t, ws)); d != "" {
				t.Errorf("the refused restore wrote (-before +after):\n%s", d)
			}
			if list, err := store.List(ctx); err != nil || len(list) != 1 {
				t.Errorf("the refused restore stored a guard: %d checkpoints, %v", len(list), err)
			}
			if _, err := store.Preview(ctx, ws, c.ID, nil); !errors.As(err, &ue) || ue.Path != tc.path {
				t.Errorf("preview: %v, want the same UnwritableError", err)
			}

			// The check is per path: a selective restore of writable paths goes through.
			res, err := store.Restore(ctx, ws, c.ID, RestoreOptions{Files: tc.others, Guard: GuardOff, Now: now})
			must(t, err)
			if res.Written != len(tc.others) || read(t, filepath.Join(ws, "a.txt")) != "alpha" {
				t.Errorf("selective restore of %v: %d written, a.txt %q", tc.others, res.Written, read(t, filepath.Join(ws, "a.txt")))
			}
		})
	}
}
