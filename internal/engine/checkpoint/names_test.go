package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// nastyNames are legal Linux file names that are easy to mishandle: a backslash is an ordinary byte
// (never a separator, so `..\escape` is one name in the root), as are newlines, control characters,
// leading dashes, glob and quote characters, and a name of the maximum length.
var nastyNames = []string{
	`back\slash.txt`,
	`\`,
	`\\`,
	`..\escape`,
	`C:\windows\system32`,
	`dir\with\backslashes/inner\file`,
	"new\nline",
	"carriage\rreturn",
	"tab\there",
	"\x01control\x7f",
	"-rf",
	"--files",
	"-",
	" leading and trailing space ",
	"...",
	".hidden",
	"~",
	"*?[glob]{a,b}",
	`quote"and'apostrophe`,
	"comma,separated",
	"percent%s%d%%",
	"$HOME#hash",
	"a:b",
	"unicode-ñ-日本-🙂",
	"\u200bzero-width\u202eright-to-left",
	"dir with space/-dash/\\",
	"dir\nnew\x01line/C:/file\n",
	strings.Repeat("x", 255),
}

// nastyTree writes every nasty name as a file (modes varied) plus a link whose name and target are
// nasty too, and returns the paths it wrote.
func nastyTree(t *testing.T, ws string) []string {
	t.Helper()
	modes := []os.FileMode{0o644, 0o600, 0o755}
	for i, name := range nastyNames {
		full := filepath.Join(ws, filepath.FromSlash(name))
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.WriteFile(full, []byte("content of "+name), 0o644))
		must(t, os.Chmod(full, modes[i%len(modes)]))
	}
	must(t, os.Symlink("..\\x\ny", filepath.Join(ws, "link\\to\nnowhere")))
	return append(append([]string(nil), nastyNames...), "link\\to\nnowhere")
}

// TestEveryLegalLinuxNameRoundTrips: capture, preview and restore carry every legal UTF-8 Linux file
// name, so restoring into an empty directory, and over a workspace where every file changed, gives a
// byte-identical tree (content, mode, link target) with a guard required.
func TestEveryLegalLinuxNameRoundTrips(t *testing.T) {
	ws, store := t.TempDir(), OpenStore(t.TempDir())
	names := nastyTree(t, ws)
	want := tree(t, ws)
	now := clock()
	c := create(t, store, ws, now, 1)
	m, err := store.Load(ctx, c.ID)
	must(t, err)
	var recorded []string
	for _, e := range m.Files {
		recorded = append(recorded, e.Path)
	}
	sort.Strings(names)
	if d := cmp.Diff(names, recorded); d != "" {
		t.Fatalf("recorded paths (-want +got):\n%s", d)
	}

	t.Run("into an empty directory", func(t *testing.T) {
		fresh := t.TempDir()
		p, err := store.Preview(ctx, fresh, c.ID, nil)
		must(t, err)
		if p.Count(ActionCreate) != len(names) {
			t.Fatalf("preview creates %d of %d paths", p.Count(ActionCreate), len(names))
		}
		res, err := store.Restore(ctx, fresh, c.ID, RestoreOptions{Guard: GuardRequire, Now: now})
		must(t, err)
		if d := cmp.Diff(want, tree(t, fresh)); d != "" || res.Written != len(names) {
			t.Fatalf("restored tree, %d written (-captured +restored):\n%s", res.Written, d)
		}
	})

	t.Run("over the changed workspace", func(t *testing.T) {
		for _, name := range nastyNames {
			full := filepath.Join(ws, filepath.FromSlash(name))
			must(t, os.WriteFile(full, []byte("broken"), 0o644))
			must(t, os.Chmod(full, 0o640))
		}
		must(t, os.Remove(filepath.Join(ws, "link\\to\nnowhere")))
		res, err := store.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: now})
		must(t, err)
		if d := cmp.Diff(want, tree(t, ws)); d != "" {
			t.Fatalf("restored tree (-captured +restored):\n%s", d)
		}
		if res.Guard == "" || res.Count(ActionOverwrite) != len(nastyNames) || len(res.Leftovers) != 0 {
			t.Fatalf("restore: guard %q, %d overwritten, leftovers %q", res.Guard, res.Count(ActionOverwrite), res.Leftovers)
		}
		// The guard holds the broken files under the same names: restoring it undoes the restore.
		_, err = store.Restore(ctx, ws, res.Guard, RestoreOptions{Files: []string{`..\escape`, "new\nline"}, Guard: GuardOff, Now: now})
		must(t, err)
		if read(t, filepath.Join(ws, `..\escape`)) != "broken" || read(t, filepath.Join(ws, "new\nline")) != "broken" {
			t.Fatal("the guard did not bring back the broken files")
		}
	})
}

// TestGitCheckpointsCarryNastyNames: a git workspace's checkpoint records the same names and restores
// them byte-identical, modes included.
func TestGitCheckpointsCarryNastyNames(t *testing.T) {
	dir := t.TempDir()
	gitCLI(t, dir, "init", "--quiet")
	names := nastyTree(t, dir)
	gitCLI(t, dir, "add", "--all")
	gitCLI(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "init")
	want := tree(t, dir)
	store := OpenStore(t.TempDir())
	c, err := store.CreateGit(ctx, dir, CaptureOptions{Anchor: recorderAnchor(1), Now: clock()})
	must(t, err)
	if c.Stats.Files != len(names) {
		t.Fatalf("git checkpoint holds %d files, want %d", c.Stats.Files, len(names))
	}
	for _, name := range nastyNames {
		must(t, os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), []byte("broken"), 0o644))
	}
	_, err = store.Restore(ctx, dir, c.ID, RestoreOptions{Guard: GuardRequire, Now: clock()})
	must(t, err)
	got := tree(t, dir)
	for p := range got {
		if p == ".git" || strings.HasPrefix(p, ".git/") {
			delete(got, p)
		}
	}
	for p := range want {
		if p == ".git" || strings.HasPrefix(p, ".git/") {
			delete(want, p)
		}
	}
	// The store keeps each file's mode as it was, not git's executable bit alone.
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("restored tree (-committed +restored):\n%s", d)
	}
}

// TestANameAManifestCannotCarryIsRefusedByName: a name that is not UTF-8 cannot be put in a manifest;
// capture refuses it naming the path, and a restore that requires a guard writes nothing when the
// guard must hold such a thing: a link the restore replaces whose target is not UTF-8. (An
// unrecordable leftover the restore does not touch is left out of the guard instead; see
// TestAGuardLeavesOutNamesItCannotRecordThatTheRestoreDoesNotTouch.)
func TestANameAManifestCannotCarryIsRefusedByName(t *testing.T) {
	ws, store := t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a.txt": "alpha"})
	must(t, os.Symlink("a.txt", filepath.Join(ws, "l")))
	c := create(t, store, ws, clock(), 1)
	write(t, ws, map[string]string{"a.txt": "changed"})
	must(t, os.Remove(filepath.Join(ws, "l")))
	must(t, os.Symlink("latin1-caf\xe9", filepath.Join(ws, "l")))
	before := tree(t, ws)
	_, err := store.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: clock()})
	var ne *NameError
	var ge *GuardError
	if !errors.As(err, &ge) || !errors.As(err, &ne) || ne.Count != 1 || ne.Names[0] != (BadName{Path: "l", Target: "latin1-caf\xe9"}) || !strings.Contains(err.Error(), `"latin1-caf\xe9"`) {
		t.Fatalf("restore with a required guard: %v, want a GuardError over a NameError naming the link", err)
	}
	if d := cmp.Diff(before, tree(t, ws)); d != "" {
		t.Errorf("the refused restore wrote (-before +after):\n%s", d)
	}

	// An ordinary capture leaves the link out instead, and captures the rest.
	must(t, os.Symlink("caf\xe9", filepath.Join(ws, "link")))
	must(t, os.Remove(filepath.Join(ws, "l")))
	created, err := store.Create(ctx, ws, CaptureOptions{Now: clock()})
	if err != nil || !slices.Equal(created.Stats.Unrecordable, []string{"link"}) {
		t.Fatalf("capture of a link with a non-UTF-8 target: %+v, %v, want it left out", created.Stats, err)
	}
}

// TestACaptureLeavesOutNamesAManifestCannotCarry: a name or link target that is not UTF-8 used to
// fail the capture, so one such file made every checkpoint of its workspace fail. Each is now left
// out and reported (a directory standing for its subtree), however many there are, and everything
// else is captured; a restore of the checkpoint leaves the names it left out as they are.
func TestACaptureLeavesOutNamesAManifestCannotCarry(t *testing.T) {
	ws, store := t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a.txt": "alpha", "bad\xff/x.txt": "x", "bad\xff/y.txt": "y", "z\xfe.txt": "z", "sub/b.txt": "beta"})
	must(t, os.Symlink("t\xfd", filepath.Join(ws, "link")))
	for i := range MaxBadNames + 5 {
		write(t, ws, map[string]string{fmt.Sprintf("many/%02d-\xff", i): "m"})
	}
	c, err := store.Create(ctx, ws, CaptureOptions{Now: clock()})
	if err != nil {
		t.Fatalf("capture beside names a manifest cannot carry: %v", err)
	}
	want := []string{"bad\xff", "link", "z\xfe.txt"}
	for i := range MaxBadNames + 5 {
		want = append(want, fmt.Sprintf("many/%02d-\xff", i))
	}
	if d := cmp.Diff(slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(c.Stats.Unrecordable))); d != "" {
		t.Errorf("left out (-want +got):\n%s", d)
	}
	m, err := store.Load(ctx, c.ID)
	must(t, err)
	var paths []string
	for _, e := range m.Files {
		paths = append(paths, e.Path)
	}
	if d := cmp.Diff([]string{"a.txt", "sub/b.txt"}, paths); d != "" {
		t.Errorf("captured (-want +got):\n%s", d)
	}

	write(t, ws, map[string]string{"a.txt": "changed", "z\xfe.txt": "changed too"})
	if _, err := store.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: clock()}); err != nil {
		t.Fatalf("restore beside the names left out: %v", err)
	}
	if read(t, filepath.Join(ws, "a.txt")) != "alpha" || read(t, filepath.Join(ws, "z\xfe.txt")) != "changed too" ||
		read(t, filepath.Join(ws, "bad\xff", "x.txt")) != "x" {
		t.Fatal("the restore did not restore a.txt, or touched a name the checkpoint left out")
	}
}
