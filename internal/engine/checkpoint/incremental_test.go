package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// putCounter wraps a Blobs and counts what Put stores.
type putCounter struct {
	Blobs
	mu    sync.Mutex
	puts  int
	bytes int64
	// chunkPuts and chunkBytes count the manifest chunks stored, apart from the files' blobs.
	chunkPuts  int
	chunkBytes int64
}

func (c *putCounter) Put(ctx context.Context, hash string, size int64, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := c.Blobs.Put(ctx, hash, size, bytes.NewReader(data)); err != nil {
		return err
	}
	c.mu.Lock()
	if bytes.HasPrefix(data, chunkMagic) {
		c.chunkPuts++
		c.chunkBytes += size
	} else {
		c.puts++
		c.bytes += size
	}
	c.mu.Unlock()
	return nil
}

// agedTree writes files small distinct files under ws and sets every mtime an hour back, as a
// workspace nobody touched since the last capture is.
func agedTree(tb testing.TB, ws string, files int) []string {
	tb.Helper()
	old := time.Now().Add(-time.Hour)
	paths := make([]string, files)
	for i := range files {
		rel := fmt.Sprintf("d%02d/s%03d/f%06d.txt", i%50, (i/50)%100, i)
		p := filepath.Join(ws, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "file %d\n", i), 0o644); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			tb.Fatal(err)
		}
		paths[i] = rel
	}
	return paths
}

// TestAnIncrementalCaptureReadsOnlyWhatChanged: after a first capture reads every file, the next one
// reads exactly the files changed since (by Go, by a shell command, a new untracked one, one whose
// mtime a tool set back, which only its ctime betrays) and uploads exactly their bytes; a capture
// after that reads only the file still inside the racy window.
func TestAnIncrementalCaptureReadsOnlyWhatChanged(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	const files = 1000
	ws := t.TempDir()
	paths := agedTree(t, ws, files)
	counter := &putCounter{Blobs: DirBlobs{Dir: t.TempDir()}}
	store := &Store{Manifests: DirManifests{Dir: t.TempDir()}, Blobs: counter}
	opts := CaptureOptions{Anchor: recorderAnchor(1)}

	first, err := store.Create(ctx, ws, opts)
	must(t, err)
	if first.Stats.Hashed != files || counter.puts != files {
		t.Fatalf("first capture hashed %d and stored %d blobs, want all %d", first.Stats.Hashed, counter.puts, files)
	}

	// Ten changes. Each new content is distinct, so each is one new blob.
	var changed int64
	old := time.Now().Add(-30 * time.Minute)
	for i, rel := range paths[:7] {
		body := fmt.Sprintf("changed by the agent's editor %d", i)
		must(t, os.WriteFile(filepath.Join(ws, rel), []byte(body), 0o644))
		must(t, os.Chtimes(filepath.Join(ws, rel), old, old.Add(time.Duration(i)*time.Second)))
		changed += int64(len(body))
	}
	shellBody := "written by a shell command\n"
	cmd := exec.Command("sh", "-c", `printf 'written by a shell command\n' > "$1"`, "sh", filepath.Join(ws, paths[100]))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sh: %v: %s", err, out)
	}
	must(t, os.Chtimes(filepath.Join(ws, paths[100]), old, old))
	changed += int64(len(shellBody))
	// Same size, mtime set back to what the first capture recorded: only the ctime moved.
	sneaky := filepath.Join(ws, paths[200])
	fi, err := os.Stat(sneaky)
	must(t, err)
	sneakyBody := fmt.Sprintf("%-*s", int(fi.Size()), "sneaky")
	must(t, os.WriteFile(sneaky, []byte(sneakyBody), 0o644))
	must(t, os.Chtimes(sneaky, fi.ModTime(), fi.ModTime()))
	changed += int64(len(sneakyBody))
	// A new untracked file whose mtime is later than the next capture's start (as a file written
	// during it would be, however slow the machine): the capture after that finds it racy.
	must(t, os.WriteFile(filepath.Join(ws, "new.txt"), []byte("brand new"), 0o644))
	must(t, os.Chtimes(filepath.Join(ws, "new.txt"), time.Now().Add(time.Hour), time.Now().Add(time.Hour)))
	changed += int64(len("brand new"))

	puts, putBytes := counter.puts, counter.bytes
	second, err := store.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(2)})
	must(t, err)
	if second.Stats.Hashed != 10 {
		t.Errorf("second capture hashed %d files, want the 10 changed ones", second.Stats.Hashed)
	}
	if got := counter.bytes - putBytes; counter.puts-puts != 10 || got != changed || second.Stats.IncrementalBytes != changed {
		t.Errorf("second capture stored %d blobs, %d bytes (stats: %d); want 10 blobs, the %d changed bytes", counter.puts-puts, got, second.Stats.IncrementalBytes, changed)
	}
	m, err := store.Load(ctx, second.ID)
	must(t, err)
	if m.SchemaVersion != SchemaVersion || len(m.Files) != files+1 {
		t.Fatalf("manifest schema %d with %d files, want %d and %d", m.SchemaVersion, len(m.Files), SchemaVersion, files+1)
	}
	got := map[string]string{}
	for _, e := range m.Files {
		got[e.Path] = e.Hash
	}
	for rel, body := range map[string]string{paths[100]: shellBody, paths[200]: sneakyBody, "new.txt": "brand new"} {
		if got[rel] != hashOf(body) {
			t.Errorf("%s recorded as %s, want the hash of %q", rel, got[rel], body)
		}
	}
	mustDescribe(t, m, ws)

	third, err := store.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(3)})
	must(t, err)
	if third.New || third.ID != second.ID || third.Stats.Hashed != 1 || third.Stats.UploadedBlobs != 0 {
		t.Errorf("unchanged capture: %+v; want the second checkpoint named again, only the racy new.txt read", third)
	}
}

// mustDescribe checks that the manifest m names every file of ws with the hash of its bytes now.
func mustDescribe(t *testing.T, m *Manifest, ws string) {
	t.Helper()
	want := map[string]string{}
	for p, v := range tree(t, ws) {
		if mode, body, ok := strings.Cut(v, ":"); ok && mode != "dir" {
			want[p] = hashOf(body)
		}
	}
	got := map[string]string{}
	for _, e := range m.Files {
		got[e.Path] = e.Hash
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("the manifest does not describe the workspace (-workspace +manifest):\n%s", d)
	}
}

// TestASchema1ManifestIsReadAndItsFilesReadAgain: a manifest written before stat fields loads, and a
// capture over it reads every file, since nothing says they are unchanged.
func TestASchema1ManifestIsReadAndItsFilesReadAgain(t *testing.T) {
	ws := t.TempDir()
	agedTree(t, ws, 20)
	store := OpenStore(t.TempDir())
	first, err := store.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(1)})
	must(t, err)
	m, err := store.Load(ctx, first.ID)
	must(t, err)
	m.SchemaVersion = 1
	for i := range m.Files {
		m.Files[i].MTimeNs, m.Files[i].CTimeNs, m.Files[i].Inode = 0, 0, 0
	}
	m.CreatedAt = m.CreatedAt.Add(time.Second) // newer than the first, so it is the baseline
	v1, err := store.Save(ctx, m)
	must(t, err)
	if _, err := store.Load(ctx, v1); err != nil {
		t.Fatalf("a schema 1 manifest does not load: %v", err)
	}
	again, err := OpenStore(storeDir(store)).Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(2)})
	must(t, err)
	if again.Stats.Hashed != 20 || again.New || again.ID != v1 {
		t.Errorf("capture over a schema 1 baseline: %+v; want every file read, and the same files named by the schema 1 checkpoint %s", again, v1)
	}
	bad := *m
	bad.Files = append([]Entry(nil), m.Files...)
	bad.Files[0].MTimeNs = 1
	var me *ManifestError
	if _, err := store.Save(ctx, &bad); !errors.As(err, &me) {
		t.Errorf("a schema 1 manifest with stat fields saved: %v", err)
	}
}

func sortedPaths(m *Manifest) []string {
	var out []string
	for _, e := range m.Files {
		out = append(out, e.Path)
	}
	sort.Strings(out)
	return out
}
