package checkpoint

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// base is a workspace with one checkpoint of {a.txt, sub/b.txt, run.sh (0755), link -> a.txt}.
func base(t *testing.T) (ws string, store *Store, id string) {
	t.Helper()
	ws, store = t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a.txt": "alpha", "sub/b.txt": "beta", "run.sh": "#!/bin/sh"})
	if err := os.Chmod(filepath.Join(ws, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	return ws, store, create(t, store, ws, clock(), 4).ID
}

func TestRestoreOverwritesCreatesAndLeavesLeftoversInPlace(t *testing.T) {
	ws, store, id := base(t)
	want := tree(t, ws)
	write(t, ws, map[string]string{"a.txt": "broken by step 40", "new.txt": "made after", "sub/extra/x": "x"})
	must(t, os.Remove(filepath.Join(ws, "sub/b.txt")))
	must(t, os.Chmod(filepath.Join(ws, "run.sh"), 0o600))
	must(t, os.Remove(filepath.Join(ws, "link")))

	res, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardOff})
	if err != nil {
		t.Fatal(err)
	}
	got := tree(t, ws)
	for _, left := range []string{"new.txt", "sub/extra/x"} {
		if _, ok := got[left]; !ok {
			t.Errorf("leftover %s was deleted", left)
		}
	}
	delete(got, "new.txt")
	delete(got, "sub/extra")
	delete(got, "sub/extra/x")
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("workspace after restore (-checkpoint +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"new.txt", "sub/extra/x"}, res.Leftovers); d != "" {
		t.Errorf("leftovers (-want +got):\n%s", d)
	}
	actions := map[string]Action{}
	for _, c := range res.Changes {
		actions[c.Path] = c.Action
	}
	wantActions := map[string]Action{"a.txt": ActionOverwrite, "link": ActionCreate, "run.sh": ActionOverwrite, "sub/b.txt": ActionCreate}
	if d := cmp.Diff(wantActions, actions); d != "" || res.Written != 4 {
		t.Errorf("written %d; actions (-want +got):\n%s", res.Written, d)
	}
	if res.Guard != "" {
		t.Errorf("guard %q taken with the guard off", res.Guard)
	}
}

func TestSelectiveRestoreWritesOnlyTheNamedFilesAndFailsClosedOnUnknownPaths(t *testing.T) {
	ws, store, id := base(t)
	write(t, ws, map[string]string{"a.txt": "changed a", "sub/b.txt": "changed b"})
	before := tree(t, ws)

	_, err := store.Restore(ctx, ws, id, RestoreOptions{Files: []string{"a.txt", "nope.txt"}, Guard: GuardOff})
	var unknown *UnknownPathsError
	if !errors.As(err, &unknown) || !cmp.Equal(unknown.Paths, []string{"nope.txt"}) {
		t.Fatalf("restore naming an unknown path: %v, want an UnknownPathsError naming nope.txt", err)
	}
	if d := cmp.Diff(before, tree(t, ws)); d != "" {
		t.Fatalf("a refused selective restore wrote (-before +after):\n%s", d)
	}

	res, err := store.Restore(ctx, ws, id, RestoreOptions{Files: []string{"a.txt"}, Guard: GuardOff})
	if err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(ws, "a.txt")) != "alpha" || read(t, filepath.Join(ws, "sub/b.txt")) != "changed b" {
		t.Errorf("selective restore of a.txt: a=%q b=%q", read(t, filepath.Join(ws, "a.txt")), read(t, filepath.Join(ws, "sub/b.txt")))
	}
	if res.Written != 1 || len(res.Leftovers) != 0 {
		t.Errorf("selective restore: written %d, leftovers %v", res.Written, res.Leftovers)
	}
}

func TestRestoreRefusesToWriteThroughSymlinks(t *testing.T) {
	cases := []struct {
		name    string
		break_  func(t *testing.T, ws, outside string)
		at, why string
	}{
		{"an ancestor directory became a link out of the workspace", func(t *testing.T, ws, outside string) {
			must(t, os.RemoveAll(filepath.Join(ws, "sub")))
			must(t, os.Symlink(outside, filepath.Join(ws, "sub")))
		}, "sub", "a symbolic link"},
		{"an ancestor directory became a link inside the workspace", func(t *testing.T, ws, _ string) {
			must(t, os.RemoveAll(filepath.Join(ws, "sub")))
			must(t, os.Mkdir(filepath.Join(ws, "other"), 0o755))
			must(t, os.Symlink("other", filepath.Join(ws, "sub")))
		}, "sub", "a symbolic link"},
		{"the file itself became a link out of the workspace", func(t *testing.T, ws, outside string) {
			must(t, os.Remove(filepath.Join(ws, "sub/b.txt")))
			must(t, os.Symlink(filepath.Join(outside, "target"), filepath.Join(ws, "sub/b.txt")))
		}, "sub/b.txt", "a symbolic link"},
		{"an ancestor became a regular file", func(t *testing.T, ws, _ string) {
			must(t, os.RemoveAll(filepath.Join(ws, "sub")))
			write(t, ws, map[string]string{"sub": "not a dir"})
		}, "sub", "not a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws, store, id := base(t)
			outside := t.TempDir()
			write(t, outside, map[string]string{"target": "outside", "b.txt": "outside b"})
			write(t, ws, map[string]string{"a.txt": "changed"}) // a.txt sorts first: it must not be written either
			tc.break_(t, ws, outside)
			beforeWS, beforeOut := tree(t, ws), tree(t, outside)

			_, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardOff})
			var unsafe *UnsafeDestinationError
			if !errors.As(err, &unsafe) || unsafe.At != tc.at || unsafe.Reason != tc.why {
				t.Fatalf("restore: %v, want an UnsafeDestinationError at %q: %s", err, tc.at, tc.why)
			}
			if d := cmp.Diff(beforeOut, tree(t, outside)); d != "" {
				t.Errorf("restore wrote outside the workspace (-before +after):\n%s", d)
			}
			if d := cmp.Diff(beforeWS, tree(t, ws)); d != "" {
				t.Errorf("a refused restore wrote into the workspace (-before +after):\n%s", d)
			}
		})
	}
}

func TestRestoreRefusesABlobThatDoesNotMatchItsHashBeforeWriting(t *testing.T) {
	ws, store, id := base(t)
	write(t, ws, map[string]string{"a.txt": "changed"})
	before := tree(t, ws)
	blob := filepath.Join(storeDir(store), "blobs", "sha256", hashOf("beta")[:2], hashOf("beta"))
	must(t, os.WriteFile(blob, []byte("BETA"), 0o644))

	_, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardOff})
	var bad *BlobHashError
	if !errors.As(err, &bad) || bad.Path != "sub/b.txt" || bad.Actual == "" {
		t.Fatalf("restore over a corrupt blob: %v, want a BlobHashError for sub/b.txt", err)
	}
	if d := cmp.Diff(before, tree(t, ws)); d != "" {
		t.Errorf("a refused restore wrote (-before +after):\n%s", d)
	}
	must(t, os.Remove(blob))
	if _, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardOff}); !errors.As(err, &bad) || bad.Actual != "" {
		t.Fatalf("restore with a missing blob: %v, want a BlobHashError saying it is missing", err)
	}
}

func TestTamperedManifestsAreRefusedBeforeAnythingIsWritten(t *testing.T) {
	good := Entry{Path: "a.txt", Type: TypeFile, Mode: 0o644, Size: 5, Hash: hashOf("alpha")}
	cases := map[string]Entry{
		"parent traversal":      {Path: "../escape", Type: TypeFile, Size: 5, Hash: hashOf("alpha")},
		"traversal inside":      {Path: "sub/../../escape", Type: TypeFile, Size: 5, Hash: hashOf("alpha")},
		"absolute path":         {Path: "/tmp/escape", Type: TypeFile, Size: 5, Hash: hashOf("alpha")},
		"dot segment":           {Path: "./a", Type: TypeFile, Size: 5, Hash: hashOf("alpha")},
		"NUL in a name":         {Path: "a\x00b", Type: TypeFile, Size: 5, Hash: hashOf("alpha")},
		"not UTF-8":             {Path: "caf\xe9", Type: TypeFile, Size: 5, Hash: hashOf("alpha")},
		"empty segment":         {Path: "sub//b", Type: TypeFile, Size: 5, Hash: hashOf("alpha")},
		"empty path":            {Path: "", Type: TypeFile, Size: 5, Hash: hashOf("alpha")},
		"hash that is a path":   {Path: "b", Type: TypeFile, Size: 5, Hash: "../../etc/passwd"},
		"listed twice":          good,
		"nested under a file":   {Path: "a.txt/inner", Type: TypeFile, Size: 5, Hash: hashOf("alpha")},
		"unknown type":          {Path: "dev", Type: "device"},
		"mode beyond perm bits": {Path: "b", Type: TypeFile, Mode: 0o4755, Size: 5, Hash: hashOf("alpha")},
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			ws, store, _ := base(t)
			write(t, ws, map[string]string{"a.txt": "changed"})
			before := tree(t, ws)
			m := &Manifest{SchemaVersion: SchemaVersion, Files: []Entry{good, bad}}
			_, err := store.RestoreManifest(ctx, ws, "x", m, RestoreOptions{})
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("restore: %v, want a ManifestError", err)
			}
			if _, err := PreviewManifest(ctx, ws, "x", m, store.Blobs, nil); !errors.As(err, &me) {
				t.Fatalf("preview: %v, want a ManifestError", err)
			}
			if d := cmp.Diff(before, tree(t, ws)); d != "" {
				t.Errorf("a refused manifest wrote (-before +after):\n%s", d)
			}
		})
	}
}

// TestAStoredManifestWhoseBytesChangedIsRefused: an edited root, or an edited chunk (a path in it
// renamed: the root still verifies), is refused as tampered with before anything is written.
func TestAStoredManifestWhoseBytesChangedIsRefused(t *testing.T) {
	for _, part := range []string{"root", "chunk"} {
		t.Run(part, func(t *testing.T) {
			ws, store, id := base(t)
			p := filepath.Join(storeDir(store), "checkpoints", id, "manifest.json")
			from, to := `"schemaVersion":3`, `"schemaVersion":2`
			if part == "chunk" {
				data, err := os.ReadFile(p)
				must(t, err)
				chunks, err := ManifestChunks(data)
				must(t, err)
				if len(chunks) != 1 {
					t.Fatalf("%d chunks, want 1", len(chunks))
				}
				p = filepath.Join(storeDir(store), "blobs", "sha256", chunks[0][:2], chunks[0])
				from, to = "a.txt", "x.txt"
			}
			data, err := os.ReadFile(p)
			must(t, err)
			edited := strings.Replace(string(data), from, to, 1)
			if edited == string(data) {
				t.Fatalf("%s holds no %q to edit", p, from)
			}
			must(t, os.WriteFile(p, []byte(edited), 0o644))
			before := tree(t, ws)
			_, err = store.Restore(ctx, ws, id, RestoreOptions{})
			var tampered *TamperedError
			if !errors.As(err, &tampered) || tampered.ID != id || (part == "chunk") != (tampered.Chunk != "") {
				t.Fatalf("restore of an edited %s: %v, want a TamperedError naming it", part, err)
			}
			if d := cmp.Diff(before, tree(t, ws)); d != "" {
				t.Errorf("(-before +after):\n%s", d)
			}
		})
	}
}

func TestPreviewResolvesLikeRestoreAndWritesNothing(t *testing.T) {
	ws, store, id := base(t)
	write(t, ws, map[string]string{"a.txt": "a much longer alpha", "new.txt": "n"})
	must(t, os.Remove(filepath.Join(ws, "sub/b.txt")))
	beforeWS, beforeStore := tree(t, ws), tree(t, storeDir(store))

	p, err := store.Preview(ctx, ws, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Preview{ID: id, Changes: []Change{
		{Path: "a.txt", Type: TypeFile, Action: ActionOverwrite, Size: 5, CurrentSize: 19},
		{Path: "link", Type: TypeSymlink, Action: ActionUnchanged},
		{Path: "run.sh", Type: TypeFile, Action: ActionUnchanged, Size: 9, CurrentSize: 9},
		{Path: "sub/b.txt", Type: TypeFile, Action: ActionCreate, Size: 4},
	}, Leftovers: []string{"new.txt"}, Bytes: 9}
	if d := cmp.Diff(want, p); d != "" {
		t.Errorf("preview (-want +got):\n%s", d)
	}
	if d := cmp.Diff(beforeWS, tree(t, ws)); d != "" {
		t.Errorf("preview wrote into the workspace (-before +after):\n%s", d)
	}
	if d := cmp.Diff(beforeStore, tree(t, storeDir(store))); d != "" {
		t.Errorf("preview wrote into the store (-before +after):\n%s", d)
	}
	res, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardOff})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(p, res.Preview); d != "" {
		t.Errorf("restore did not do what preview said (-preview +restore):\n%s", d)
	}
}

// failingPuts is a blob space that can read but not store: a guard capture of changed files fails.
type failingPuts struct{ Blobs }

func (failingPuts) Put(context.Context, string, int64, io.Reader) error {
	return errors.New("store unavailable")
}

func TestGuardCheckpointModes(t *testing.T) {
	t.Run("warn takes a guard whose restore undoes the restore", func(t *testing.T) {
		ws, store, id := base(t)
		write(t, ws, map[string]string{"a.txt": "work at step 40", "late.txt": "late"})
		at40 := tree(t, ws)
		res, err := store.Restore(ctx, ws, id, RestoreOptions{GuardAnchor: recorderAnchor(40), Now: clock()})
		if err != nil || res.Guard == "" || res.Guard == id || res.GuardWarning != "" {
			t.Fatalf("restore with the default guard: %+v, %v", res, err)
		}
		if read(t, filepath.Join(ws, "a.txt")) != "alpha" {
			t.Fatal("restore did not write a.txt")
		}
		g, err := store.Load(ctx, res.Guard)
		if err != nil || g.Reason != "guard" || g.Anchor.Step != 40 {
			t.Fatalf("guard checkpoint: %+v, %v", g, err)
		}
		if _, err := store.Restore(ctx, ws, res.Guard, RestoreOptions{Guard: GuardOff}); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(at40, tree(t, ws)); d != "" {
			t.Errorf("restoring the guard did not undo the restore (-step 40 +after):\n%s", d)
		}
	})
	t.Run("warn restores anyway when the guard fails and says so", func(t *testing.T) {
		ws, store, id := base(t)
		store.Blobs = failingPuts{store.Blobs}
		write(t, ws, map[string]string{"a.txt": "changed"})
		res, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardWarn})
		if err != nil || res.Guard != "" || !strings.Contains(res.GuardWarning, "store unavailable") {
			t.Fatalf("restore: %+v, %v; want a warning naming the failure", res, err)
		}
		if read(t, filepath.Join(ws, "a.txt")) != "alpha" {
			t.Error("warn mode did not restore")
		}
	})
	t.Run("require refuses to restore without a guard", func(t *testing.T) {
		ws, store, id := base(t)
		store.Blobs = failingPuts{store.Blobs}
		write(t, ws, map[string]string{"a.txt": "changed"})
		before := tree(t, ws)
		_, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardRequire})
		var ge *GuardError
		if !errors.As(err, &ge) {
			t.Fatalf("restore: %v, want a GuardError", err)
		}
		if d := cmp.Diff(before, tree(t, ws)); d != "" {
			t.Errorf("require mode wrote without a guard (-before +after):\n%s", d)
		}
	})
	t.Run("a damaged checkpoint in the store does not stop the guard", func(t *testing.T) {
		ws, store, id := base(t)
		write(t, ws, map[string]string{"a.txt": "changed"})
		other := create(t, store, ws, clock(), 9)
		must(t, os.WriteFile(filepath.Join(storeDir(store), "checkpoints", other.ID, "manifest.json"), []byte("{}"), 0o644))
		res, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardRequire, GuardAnchor: recorderAnchor(9), Now: clock()})
		if err != nil || res.Guard == "" {
			t.Fatalf("restore with a damaged latest checkpoint: %+v, %v", res, err)
		}
		if _, err := store.List(ctx); err == nil {
			t.Error("List hid a damaged checkpoint")
		}
	})
	t.Run("off takes no guard", func(t *testing.T) {
		ws, store, id := base(t)
		write(t, ws, map[string]string{"a.txt": "changed"})
		res, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardOff})
		list, lerr := store.List(ctx)
		if err != nil || lerr != nil || res.Guard != "" || len(list) != 1 {
			t.Fatalf("restore with the guard off: %+v, %v; %d checkpoints", res, err, len(list))
		}
	})
	t.Run("an unknown mode is refused", func(t *testing.T) {
		ws, store, id := base(t)
		if _, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: "maybe"}); err == nil {
			t.Fatal("restore accepted guard mode maybe")
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestABlobThatBecameASymlinkIsNotFollowed(t *testing.T) {
	ws, store, id := base(t)
	write(t, ws, map[string]string{"a.txt": "changed"})
	before := tree(t, ws)
	// The link points at a file holding exactly the right bytes: only refusing to follow it stops it.
	decoy := filepath.Join(t.TempDir(), "decoy")
	must(t, os.WriteFile(decoy, []byte("alpha"), 0o644))
	blob := filepath.Join(storeDir(store), "blobs", "sha256", hashOf("alpha")[:2], hashOf("alpha"))
	must(t, os.Remove(blob))
	must(t, os.Symlink(decoy, blob))
	if _, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardOff}); err == nil {
		t.Fatal("restore read a blob through a symbolic link")
	}
	if d := cmp.Diff(before, tree(t, ws)); d != "" {
		t.Errorf("(-before +after):\n%s", d)
	}
}

func TestTemporariesOfAnInterruptedRestoreAreNeitherCapturedNorLeftovers(t *testing.T) {
	ws, store, id := base(t)
	// What a restore killed between creating its temporary file and renaming it leaves behind; the
	// name must stay what writeEntry writes.
	stale := []string{"sub/" + restoreTempPrefix + "0123456789ab", restoreTempPrefix + randSuffix()}
	write(t, ws, map[string]string{stale[0]: "half", stale[1]: "written", "sub/.arw-restore-notours": "user file"})
	if !IsRestoreTemporary(stale[1]) {
		t.Fatalf("%s, named like writeEntry's temporaries, is not recognised", stale[1])
	}
	c, err := store.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(50), Now: clock()})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(stale)
	if d := cmp.Diff(stale, c.Stats.RestoreTemporaries); d != "" {
		t.Errorf("restore temporaries (-want +got):\n%s", d)
	}
	m, err := store.Load(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range m.Files {
		if IsRestoreTemporary(e.Path) {
			t.Errorf("captured %s", e.Path)
		}
	}
	p, err := store.Preview(ctx, ws, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"sub/.arw-restore-notours"}, p.Leftovers); d != "" {
		t.Errorf("leftovers (-want +got):\n%s", d)
	}
}
