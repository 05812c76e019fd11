package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestCaptureUploadsOnlyNewBytesAndSkipsIdenticalCheckpoints(t *testing.T) {
	ws, store := t.TempDir(), OpenStore(t.TempDir())
	now := clock()
	write(t, ws, map[string]string{
		"a.txt":     strings.Repeat("a", 100),
		"copy.txt":  strings.Repeat("a", 100), // same bytes as a.txt: one blob
		"src/d.bin": strings.Repeat("d", 1000),
	})
	first := create(t, store, ws, now, 1)
	manifestSizes := cmpopts.IgnoreFields(CaptureStats{}, "ManifestBytes", "ManifestUploadedBytes")
	if want := (CaptureStats{Files: 3, Bytes: 1200, Hashed: 3, UploadedBlobs: 2, IncrementalBytes: 1100}); !cmp.Equal(first.Stats, want, manifestSizes) || !first.New {
		t.Fatalf("first capture: new=%v %s", first.New, cmp.Diff(want, first.Stats, manifestSizes))
	}
	// A first capture stores its whole manifest: nothing of it was stored before.
	if st := first.Stats; st.ManifestBytes == 0 || st.ManifestUploadedBytes != st.ManifestBytes {
		t.Fatalf("first capture: a manifest of %d bytes, %d uploaded; want all of it", st.ManifestBytes, st.ManifestUploadedBytes)
	}

	// D2: nothing changed, so no new checkpoint and nothing uploaded.
	again := create(t, store, ws, now, 2)
	if again.New || again.ID != first.ID || again.Stats.IncrementalBytes != 0 {
		t.Fatalf("identical capture: %+v, want the first checkpoint %s reused", again, first.ID)
	}

	write(t, ws, map[string]string{"src/d.bin": strings.Repeat("e", 1000), "b.txt": strings.Repeat("a", 100)})
	third := create(t, store, ws, now, 3)
	if !third.New || third.Stats.IncrementalBytes != 1000 || third.Stats.UploadedBlobs != 1 {
		t.Fatalf("after changing one file and adding a duplicate: %+v, want 1000 incremental bytes in 1 blob", third)
	}
	m, err := store.Load(ctx, third.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.IncrementalBytes != 1000 {
		t.Errorf("manifest records %d incremental bytes, want 1000", m.IncrementalBytes)
	}
	list, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != third.ID || list[1].ID != first.ID {
		t.Errorf("list = %+v, want [third, first]", list)
	}
	// Three file blobs (a, d, e) and the two checkpoints' manifest chunks (one each: they differ).
	blobs, _ := filepath.Glob(filepath.Join(storeDir(store), "blobs", "sha256", "*", "*"))
	if len(blobs) != 5 {
		t.Errorf("%d blobs stored, want 5 (a, d, e and two chunks)", len(blobs))
	}
}

func TestCaptureRecordsSymlinksAndNeverReadsThroughThem(t *testing.T) {
	ws, outside, store := t.TempDir(), t.TempDir(), OpenStore(t.TempDir())
	write(t, outside, map[string]string{"secret": "outside secret", "dir/inner": "outside inner"})
	write(t, ws, map[string]string{"real/f": "in", "a.txt": "a"})
	for target, link := range map[string]string{
		filepath.Join(outside, "secret"): "leak",
		filepath.Join(outside, "dir"):    "leakdir",
		"real":                           "inside",
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	c := create(t, store, ws, clock(), 1)
	m, err := store.Load(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Path: "a.txt", Type: TypeFile, Mode: 0o644, Size: 1, Hash: hashOf("a")},
		{Path: "inside", Type: TypeSymlink, Target: "real"},
		{Path: "leak", Type: TypeSymlink, Target: filepath.Join(outside, "secret")},
		{Path: "leakdir", Type: TypeSymlink, Target: filepath.Join(outside, "dir")},
		{Path: "real/f", Type: TypeFile, Mode: 0o644, Size: 2, Hash: hashOf("in")},
	}
	if d := cmp.Diff(want, m.Files, cmpopts.IgnoreFields(Entry{}, "MTimeNs", "CTimeNs", "Inode")); d != "" {
		t.Fatalf("manifest files (-want +got):\n%s", d)
	}
	for _, s := range []string{"outside secret", "outside inner"} {
		if ok, _ := store.Blobs.Has(ctx, hashOf(s)); ok {
			t.Errorf("the bytes %q behind a link were stored", s)
		}
	}
}

func TestCaptureSkipsExcludedPathsAndSubtrees(t *testing.T) {
	ws, store := t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{
		"main.go": "package main", "debug.log": "x", "web/node_modules/r/index.js": "r",
		"build/out.o": "o", "src/build/keep.go": "k",
	})
	c := create(t, store, ws, clock(), 1, "node_modules", "*.log", "/build")
	m, err := store.Load(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range m.Files {
		got = append(got, e.Path)
	}
	if d := cmp.Diff([]string{"main.go", "src/build/keep.go"}, got); d != "" {
		t.Errorf("captured paths (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{".git", "node_modules", "*.log", "/build"}, m.Excludes); d != "" {
		t.Errorf("recorded excludes (-want +got):\n%s", d)
	}
}

func TestScanSkipsAManifestThatDoesNotLoad(t *testing.T) {
	ws, store := t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a.txt": "alpha"})
	good := create(t, store, ws, clock(), 1)
	// What the capture wrote before it refused such names: two paths JSON turned into U+FFFD.
	data := []byte(`{"schemaVersion":1,"createdAt":"2026-01-01T00:00:00Z","anchor":{"turn":0,"step":9,"author":""},"incrementalBytes":0,"files":[` +
		`{"path":"n\ufffd","type":"file","size":0,"sha256":"` + hashOf("") + `"},{"path":"n\ufffd","type":"file","size":0,"sha256":"` + hashOf("") + `"}]}`)
	badID := hashOf(string(data))
	if err := store.Manifests.Put(ctx, badID, data); err != nil {
		t.Fatal(err)
	}
	list, bad, err := store.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != good.ID {
		t.Errorf("loaded %+v, want only %s", list, good.ID)
	}
	var me *ManifestError
	if len(bad) != 1 || bad[0].ID != badID || !errors.As(bad[0].Err, &me) || me.Reason != "listed twice" {
		t.Errorf("unreadable %+v, want %s listed twice", bad, badID)
	}
}

func TestCaptureSkipsAndReportsPathsThatVanishDuringTheWalk(t *testing.T) {
	ws, store := t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a.txt": "a", "b.txt": "b", "d/x.txt": "x", "e.txt": "e"})
	// The walk reads the tree's names before it reads a file: removing b.txt and d after the first
	// file is what a process deleting files during the capture does, and d/x.txt is then found gone.
	progress := func(files int, _ int64) {
		if files == 1 {
			must(t, os.Remove(filepath.Join(ws, "b.txt")))
			must(t, os.RemoveAll(filepath.Join(ws, "d")))
		}
	}
	c, err := store.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(1), Now: clock(), Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"b.txt", "d/x.txt"}, c.Stats.Vanished); d != "" {
		t.Errorf("vanished (-want +got):\n%s", d)
	}
	m, err := store.Load(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range m.Files {
		paths = append(paths, e.Path)
	}
	if d := cmp.Diff([]string{"a.txt", "e.txt"}, paths); d != "" {
		t.Errorf("captured (-want +got):\n%s", d)
	}
}

func TestCaptureRefusesASessionOrExcludeThatIsNotUTF8(t *testing.T) {
	ws, store := t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a.txt": "alpha"})
	for _, opts := range []CaptureOptions{
		{Anchor: Anchor{Session: "s\xff"}},
		{Excludes: []string{"*.\xfe"}},
	} {
		if _, err := store.Create(ctx, ws, opts); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("%+v: %v; want a UTF-8 refusal", opts, err)
		}
	}
	m := &Manifest{SchemaVersion: SchemaVersion, Anchor: Anchor{Session: "s\xff"}, Files: []Entry{}}
	var me *ManifestError
	if err := m.Validate(); !errors.As(err, &me) {
		t.Errorf("Validate of a non-UTF-8 session: %v", err)
	}
}
