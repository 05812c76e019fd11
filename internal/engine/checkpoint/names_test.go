package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

	must(t, os.Symlink("caf\xe9", filepath.Join(ws, "link")))
	must(t, os.Remove(filepath.Join(ws, "l")))
	if _, err := store.Create(ctx, ws, CaptureOptions{Now: clock()}); !errors.As(err, &ne) || ne.Count != 1 || ne.Names[0] != (BadName{Path: "link", Target: "caf\xe9"}) {
		t.Fatalf("capture of a link with a non-UTF-8 target: %v, want a NameError naming link", err)
	}
}

// TestEveryNameAManifestCannotCarryIsReported: a capture names every bad name, not just the first, so
// one run tells the user everything to rename or exclude: up to MaxBadNames of them with the count of
// all; a directory with a bad name stands for its subtree. No checkpoint is stored.
func TestEveryNameAManifestCannotCarryIsReported(t *testing.T) {
	ws, store := t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a.txt": "alpha", "bad\xff/x.txt": "x", "bad\xff/y.txt": "y", "z\xfe.txt": "z"})
	must(t, os.Symlink("t\xfd", filepath.Join(ws, "link")))
	_, err := store.Create(ctx, ws, CaptureOptions{Now: clock()})
	var ne *NameError
	want := &NameError{Count: 3, Names: []BadName{{Path: "bad\xff"}, {Path: "link", Target: "t\xfd"}, {Path: "z\xfe.txt"}}}
	if !errors.As(err, &ne) {
		t.Fatalf("capture: %v, want a NameError", err)
	}
	if d := cmp.Diff(want, ne); d != "" {
		t.Errorf("bad names (-want +got):\n%s", d)
	}
	for _, s := range []string{"3 file names or link targets", `"bad\xff"`, `symbolic link "link" (target "t\xfd")`, `"z\xfe.txt"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the refusal %q does not say %s", err, s)
		}
	}
	if list, err := store.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("a refused capture stored %d checkpoints, %v", len(list), err)
	}

	for i := range MaxBadNames + 5 {
		write(t, ws, map[string]string{fmt.Sprintf("many/%02d-\xff", i): "m"})
	}
	_, err = store.Create(ctx, ws, CaptureOptions{Now: clock()})
	if !errors.As(err, &ne) || ne.Count != 3+MaxBadNames+5 || len(ne.Names) != MaxBadNames || !strings.HasSuffix(err.Error(), fmt.Sprintf(" and %d more", 3+5)) {
		t.Fatalf("capture of %d bad names: %v, want %d listed and the count", 3+MaxBadNames+5, err, MaxBadNames)
	}
}
