package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// manifestCounter counts the bytes of the manifest roots stored.
type manifestCounter struct {
	Manifests
	mu    sync.Mutex
	bytes int64
}

func (c *manifestCounter) Put(ctx context.Context, id string, data []byte) error {
	c.mu.Lock()
	c.bytes += int64(len(data))
	c.mu.Unlock()
	return c.Manifests.Put(ctx, id, data)
}

// TestACaptureUploadsTheManifestChunksItsChangesTouched is issue 18's bound on the manifest: over a
// 20,000-file workspace, a capture after 10 changed files uploads the root and at most the 10
// chunks holding them, under 15 % of the manifest a whole upload would send (and exactly what its
// stats say); a capture by a new Store (a new process) after one change uploads at most the root
// and one chunk, since the blob space already holds the rest. Every checkpoint still loads whole.
func TestACaptureUploadsTheManifestChunksItsChangesTouched(t *testing.T) {
	const files = 20000
	ws := t.TempDir()
	paths := agedTree(t, ws, files)
	dir := t.TempDir()
	blobs := &putCounter{Blobs: DirBlobs{Dir: dir}}
	roots := &manifestCounter{Manifests: DirManifests{Dir: dir}}
	store := &Store{Manifests: roots, Blobs: blobs}

	first, err := store.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(1)})
	must(t, err)
	whole := blobs.chunkBytes + roots.bytes
	if whole != first.Stats.ManifestBytes || first.Stats.ManifestUploadedBytes != whole || blobs.chunkPuts < files/maxChunkEntries {
		t.Fatalf("first capture: %d manifest bytes in %d chunks and a root, stats %+v", whole, blobs.chunkPuts, first.Stats)
	}

	for i := range 10 {
		must(t, os.WriteFile(filepath.Join(ws, paths[i*1999]), fmt.Appendf(nil, "changed %d, longer than before", i), 0o644))
	}
	chunkPuts, chunkBytes, rootBytes := blobs.chunkPuts, blobs.chunkBytes, roots.bytes
	second, err := store.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(2)})
	must(t, err)
	up := blobs.chunkBytes - chunkBytes + roots.bytes - rootBytes
	if n := blobs.chunkPuts - chunkPuts; n < 1 || n > 10 || up != second.Stats.ManifestUploadedBytes {
		t.Errorf("after 10 changes: %d chunks stored, %d manifest bytes uploaded (stats say %d); want 1 to 10 chunks", n, up, second.Stats.ManifestUploadedBytes)
	}
	share := float64(up) / float64(second.Stats.ManifestBytes)
	t.Logf("after 10 changes: %d of %d manifest bytes uploaded (%.1f %%)", up, second.Stats.ManifestBytes, 100*share)
	if share >= 0.15 {
		t.Errorf("after 10 changes %d of the manifest's %d bytes were uploaded (%.1f %%), want under 15 %%", up, second.Stats.ManifestBytes, 100*share)
	}

	must(t, os.WriteFile(filepath.Join(ws, paths[7]), []byte("one more change"), 0o644))
	fresh := &Store{Manifests: roots, Blobs: blobs}
	chunkPuts, chunkBytes, rootBytes = blobs.chunkPuts, blobs.chunkBytes, roots.bytes
	third, err := fresh.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(3)})
	must(t, err)
	if n := blobs.chunkPuts - chunkPuts; n != 1 || roots.bytes-rootBytes+blobs.chunkBytes-chunkBytes != third.Stats.ManifestUploadedBytes || third.Stats.Hashed > 11 {
		t.Errorf("a new Store after one change stored %d chunks, hashed %d files; want 1 chunk and only the changed (or racy) files", n, third.Stats.Hashed)
	}
	for _, c := range []Created{first, second, third} {
		m, err := (&Store{Manifests: roots, Blobs: blobs}).Load(ctx, c.ID)
		must(t, err)
		if len(m.Files) != files {
			t.Errorf("checkpoint %s loads %d files, want %d", c.ID, len(m.Files), files)
		}
	}
	m, err := store.Load(ctx, third.ID)
	must(t, err)
	mustDescribe(t, m, ws)
}

// TestChunksRoundTripEveryEntry: odd names, links, stat fields and sizes come back as written.
func TestChunksRoundTripEveryEntry(t *testing.T) {
	files := []Entry{
		{Path: "-rf", Type: TypeFile, Mode: 0o600, Size: 0, Hash: hashOf(""), MTimeNs: -5, CTimeNs: 1 << 62, Inode: 1<<64 - 1},
		{Path: "a\nb/\tc ✓", Type: TypeFile, Mode: 0o755, Size: 1 << 40, Hash: hashOf("x"), MTimeNs: 1, CTimeNs: 2, Inode: 3},
		{Path: "a\nb/\tc ✓d", Type: TypeSymlink, Target: "../../" + strings.Repeat("t", 4000)},
		{Path: strings.Repeat("n", 255) + "/" + strings.Repeat("m", 255), Type: TypeFile, Hash: hashOf("y")},
	}
	data, err := encodeChunk(files, nil)
	must(t, err)
	got, err := decodeChunk(data, nil)
	must(t, err)
	if d := cmp.Diff(files, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
}

// TestAMalformedChunkIsRefusedNamingTheByte: a chunk whose bytes hash right but do not decode (a
// writer's bug, a newer format) is refused with the offset and field at fault, never half read.
func TestAMalformedChunkIsRefusedNamingTheByte(t *testing.T) {
	good, err := encodeChunk([]Entry{{Path: "a", Type: TypeFile, Hash: hashOf("a")}, {Path: "ab", Type: TypeSymlink, Target: "a"}}, nil)
	must(t, err)
	n := len(chunkMagic)
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"not a chunk":        {[]byte("{\"files\":[]}"), "byte 0: not a version 1"},
		"truncated":          {good[:len(good)-1], "(link target): 1 bytes announced, 0 left"},
		"trailing bytes":     {append(append([]byte(nil), good...), 0), "(end): 1 bytes after the last entry"},
		"a count too large":  {append(append([]byte(nil), chunkMagic...), 0xff, 0xff, 0x03), fmt.Sprintf("byte %d (entry count): 65535 entries cannot fit", n)},
		"a prefix too long":  {append(append([]byte(nil), chunkMagic...), 1, 1, 1, 'a', 'l', 1, 'x'), fmt.Sprintf("byte %d (path prefix length): 1, longer than the previous path (0)", n+1)},
		"an unknown type":    {append(append([]byte(nil), chunkMagic...), 1, 0, 1, 'a', 'x', 0, 0, 0, 0), fmt.Sprintf("byte %d (entry type): unknown type byte 0x78", n+4)},
		"an endless varint":  {append(append([]byte(nil), chunkMagic...), 0x80), fmt.Sprintf("byte %d (entry count): not a varint", n)},
		"a mode past 32 bit": {append(append([]byte(nil), chunkMagic...), 1, 0, 1, 'a', 'f', 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0, 0, 0), fmt.Sprintf("byte %d (mode): 4294967296 does not fit 32 bits", n+5)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeChunk(tc.data, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decode: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestChunkBoundariesDependOnlyOnThePathsAroundAChange: adding or removing a file anywhere in a
// sorted tree changes at most the three chunks around it (its own, split or merged with a
// neighbour), so the other chunks keep their bytes and their names, and a capture re-uploads
// nothing else.
func TestChunkBoundariesDependOnlyOnThePathsAroundAChange(t *testing.T) {
	var files []Entry
	for i := range 20000 {
		files = append(files, Entry{Path: fmt.Sprintf("src/m%03d/f%05d.go", i%300, i), Type: TypeFile, Hash: hashOf(fmt.Sprint(i))})
	}
	files = sortedByPath(files)
	names := func(files []Entry) map[string]bool {
		m := &Manifest{SchemaVersion: SchemaVersion, Files: files}
		_, _, chunks, err := m.encodeChunked()
		must(t, err)
		out := map[string]bool{}
		for _, c := range chunks {
			out[c.ref.Hash] = true
		}
		return out
	}
	before := names(files)
	if len(before) < 20000/maxChunkEntries {
		t.Fatalf("%d chunks", len(before))
	}
	for _, at := range []int{0, 1, 63, 64, 777, 5000, 10000, 15555, 19999} {
		added := append(append(append([]Entry(nil), files[:at]...), Entry{Path: files[at].Path + "x", Type: TypeFile, Hash: hashOf("new")}), files[at:]...)
		removed := append(append([]Entry(nil), files[:at]...), files[at+1:]...)
		for name, changed := range map[string][]Entry{"added": sortedByPath(added), "removed": removed} {
			after := names(changed)
			fresh := 0
			for h := range after {
				if !before[h] {
					fresh++
				}
			}
			if fresh > 3 {
				t.Errorf("a file %s at %d: %d of %d chunks are new, want at most 3", name, at, fresh, len(after))
			}
		}
	}
}

// TestASchema2ManifestStillLoadsAndServesAsABaseline: a checkpoint stored before chunks (its files
// listed in manifest.json) loads, and a capture over it reads only what changed since.
func TestASchema2ManifestStillLoadsAndServesAsABaseline(t *testing.T) {
	ws := t.TempDir()
	paths := agedTree(t, ws, 50)
	store := OpenStore(t.TempDir())
	first, err := store.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(1)})
	must(t, err)
	m, err := store.Load(ctx, first.ID)
	must(t, err)
	m.SchemaVersion = 2
	m.CreatedAt = m.CreatedAt.Add(time.Second) // newer than the first, so it is the baseline
	v2, err := store.Save(ctx, m)
	must(t, err)
	data, err := store.Manifests.Get(ctx, v2)
	must(t, err)
	if !strings.Contains(string(data), `"files":[{"path":"`) {
		t.Fatalf("a schema 2 manifest was not stored with its files listed: %.200s", data)
	}
	loaded, err := OpenStore(storeDir(store)).Load(ctx, v2)
	must(t, err)
	if d := cmp.Diff(m, loaded, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("schema 2 round trip (-saved +loaded):\n%s", d)
	}
	must(t, os.WriteFile(filepath.Join(ws, paths[3]), []byte("changed"), 0o644))
	again, err := OpenStore(storeDir(store)).Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(2)})
	must(t, err)
	if again.Stats.Hashed != 1 || !again.New {
		t.Errorf("capture over a schema 2 baseline: %+v; want only the changed file read", again.Stats)
	}
	got, err := store.Load(ctx, again.ID)
	must(t, err)
	if got.SchemaVersion != SchemaVersion {
		t.Errorf("the new checkpoint is schema %d, want %d", got.SchemaVersion, SchemaVersion)
	}
	mustDescribe(t, got, ws)
}

// TestValidateFindsNestingAndDuplicatesInAnyOrder: the one-pass check over a manifest in path order
// finds what the set of paths finds in any other order, with the same reasons.
func TestValidateFindsNestingAndDuplicatesInAnyOrder(t *testing.T) {
	for _, tc := range []struct {
		paths []string
		want  string // "" when valid
	}{
		{[]string{"a", "a/b"}, `"a/b": nested under the entry "a"`},
		{[]string{"a", "a b", "a-c", "a/c"}, `"a/c": nested under the entry "a"`},
		{[]string{"a", "a b", "a b/c"}, `"a b/c": nested under the entry "a b"`},
		{[]string{"x/a", "x/a b", "x/a/deep/er"}, `"x/a/deep/er": nested under the entry "x/a"`},
		{[]string{"a b", "a-c", "ab/d", "abc", "b/a", "b/ab"}, ""},
		{[]string{"a", "a"}, `"a": listed twice`},
		{[]string{"b", "a", "b"}, `"b": listed twice`},
		{[]string{"a/c", "a"}, `"a/c": nested under the entry "a"`},
	} {
		m := &Manifest{SchemaVersion: SchemaVersion, Files: []Entry{}}
		for _, p := range tc.paths {
			m.Files = append(m.Files, Entry{Path: p, Type: TypeFile, Hash: hashOf(p)})
		}
		err := m.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: %v, want %q", tc.paths, err, tc.want)
		}
	}
}

// TestARootOfANewerSchemaIsRefusedForItsVersion: a manifest a newer build wrote is refused naming its
// schema version, not for the fields this build does not know.
func TestARootOfANewerSchemaIsRefusedForItsVersion(t *testing.T) {
	st := OpenStore(t.TempDir())
	data := []byte(`{"schemaVersion":4,"fileCount":0,"bytes":0,"chunks":[],"somethingNew":true}`)
	id := hashOf(string(data))
	must(t, st.Manifests.Put(ctx, id, data))
	if _, err := st.Load(ctx, id); err == nil || !strings.Contains(err.Error(), "schema version 4 is not one of 1 to 3") {
		t.Errorf("Load: %v, want the schema version refused", err)
	}
}
