//go:build linux

package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// attrTempDir is a fresh directory on a file system that lets root set the chattr attribute letter
// ("a" or "i"): t.TempDir() first, then /dev/shm (tmpfs) and /var/tmp. It skips the test, saying
// why, when none does.
func attrTempDir(t *testing.T, letter string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("setting the append-only or immutable attribute needs root (CAP_LINUX_IMMUTABLE)")
	}
	var tried []string
	for _, parent := range []string{"", "/dev/shm", "/var/tmp"} {
		var d string
		if parent == "" {
			d = t.TempDir()
		} else {
			var err error
			if d, err = os.MkdirTemp(parent, "checkpoint-attr-"); err != nil {
				tried = append(tried, parent+": "+err.Error())
				continue
			}
			t.Cleanup(func() { _ = os.RemoveAll(d) })
		}
		probe := filepath.Join(d, ".probe")
		must(t, os.WriteFile(probe, nil, 0o644))
		err := run(t, "chattr", "+"+letter, probe)
		_ = run(t, "chattr", "-"+letter, probe)
		must(t, os.Remove(probe))
		if err == nil {
			return d
		}
		tried = append(tried, d+": "+err.Error())
	}
	t.Skipf("no file system here accepts chattr +%s: %s", letter, strings.Join(tried, "; "))
	return ""
}

// setAttr sets the chattr attribute letter on p and clears it when the test ends, so the temporary
// directory can be removed.
func setAttr(t *testing.T, p, letter string) {
	t.Helper()
	must(t, run(t, "chattr", "+"+letter, p))
	t.Cleanup(func() { _ = run(t, "chattr", "-"+letter, p) })
}

// stamps is the modification time of every path under dir: with tree, it proves nothing was written.
func stamps(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	must(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = fi.ModTime().UnixNano()
		return nil
	}))
	return out
}

// TestAnAppendOnlyOrImmutablePathIsRefusedBeforeAnythingIsWritten: the kernel refuses, even to root,
// to rename over an append-only or immutable file, or to rename into an immutable or append-only
// directory; access(2) does not tell for append-only. The restore must read the inode flags of every
// file it replaces and directory it writes into and refuse before the guard and before a.txt (first
// in order, changed, so it would be written first), naming the path and the attribute.
func TestAnAppendOnlyOrImmutablePathIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	cases := []struct {
		name   string
		letter string
		lock   string // workspace path the attribute is set on
		path   string // the change refused
		at     string
		attr   Attribute
	}{
		{"an append-only file", "a", "d/b.txt", "d/b.txt", "d/b.txt", AttributeAppendOnly},
		{"an immutable file", "i", "d/b.txt", "d/b.txt", "d/b.txt", AttributeImmutable},
		{"a file in an append-only directory", "a", "d", "d/b.txt", "d", AttributeAppendOnly},
		{"a file in an immutable directory", "i", "d", "d/b.txt", "d", AttributeImmutable},
		{"a file to create in an append-only directory", "a", "d/keep", "d/keep/new.txt", "d/keep", AttributeAppendOnly},
		{"a directory to create in an immutable directory", "i", "d/keep", "d/keep/sub/c.txt", "d/keep", AttributeImmutable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws, store := filepath.Join(attrTempDir(t, tc.letter), "ws"), OpenStore(t.TempDir())
			write(t, ws, map[string]string{"a.txt": "alpha", "d/b.txt": "beta", "d/keep/new.txt": "new", "d/keep/sub/c.txt": "gamma", "z.txt": "zeta"})
			now := clock()
			c := create(t, store, ws, now, 1)
			write(t, ws, map[string]string{"a.txt": "changed", "z.txt": "changed"})
			switch tc.path {
			case "d/b.txt":
				write(t, ws, map[string]string{"d/b.txt": "changed"})
			case "d/keep/sub/c.txt":
				must(t, os.RemoveAll(filepath.Join(ws, "d", "keep", "sub")))
			default:
				must(t, os.Remove(filepath.Join(ws, filepath.FromSlash(tc.path))))
			}
			setAttr(t, filepath.Join(ws, filepath.FromSlash(tc.lock)), tc.letter)
			before, beforeTimes := tree(t, ws), stamps(t, ws)

			_, err := store.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: now})
			var ue *UnwritableError
			var ae *AttributeError
			if !errors.As(err, &ue) || ue.Path != tc.path || ue.At != tc.at || !errors.As(err, &ae) || ae.Attribute != tc.attr {
				t.Fatalf("restore: %v; want an UnwritableError for %s at %s, %s", err, tc.path, tc.at, tc.attr)
			}
			if msg := err.Error(); !strings.Contains(msg, string(tc.attr)) || !strings.Contains(msg, `attribute "`+tc.letter+`"`) || !strings.Contains(msg, tc.at) {
				t.Errorf("the refusal %q does not name the path %s and the attribute %s", msg, tc.at, tc.letter)
			}
			if d := cmp.Diff(before, tree(t, ws)); d != "" {
				t.Errorf("the refused restore wrote (-before +after):\n%s", d)
			}
			if d := cmp.Diff(beforeTimes, stamps(t, ws)); d != "" {
				t.Errorf("the refused restore touched modification times (-before +after):\n%s", d)
			}
			if list, err := store.List(ctx); err != nil || len(list) != 1 {
				t.Errorf("the refused restore stored a guard: %d checkpoints, %v", len(list), err)
			}
			if _, err := store.Preview(ctx, ws, c.ID, nil); !errors.As(err, &ue) || ue.Path != tc.path {
				t.Errorf("preview: %v, want the same UnwritableError", err)
			}
		})
	}
}

// TestAnAppendOnlyDirectoryStillTakesANewSubdirectory: an append-only directory lets entries be
// created, so a restore that only makes a directory in it (and renames inside that new one, which
// does not inherit the attribute) goes through: the check refuses what the kernel refuses, no more.
func TestAnAppendOnlyDirectoryStillTakesANewSubdirectory(t *testing.T) {
	ws, store := filepath.Join(attrTempDir(t, "a"), "ws"), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"d/b.txt": "beta", "d/sub/c.txt": "gamma"})
	now := clock()
	c := create(t, store, ws, now, 1)
	must(t, os.RemoveAll(filepath.Join(ws, "d", "sub")))
	setAttr(t, filepath.Join(ws, "d"), "a")
	res, err := store.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardOff, Now: now})
	must(t, err)
	if res.Written != 1 || read(t, filepath.Join(ws, "d", "sub", "c.txt")) != "gamma" {
		t.Errorf("restore into a new directory of an append-only one: %d written, %+v", res.Written, res.Changes)
	}
}
