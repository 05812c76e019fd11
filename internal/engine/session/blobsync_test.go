package session

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestBlobsAreSyncedWhenTheSessionCommitsNotWhenWritten records a session whose answer is a blob and
// watches the fsyncs: none while events are appended (the recording's request path), and at Close every
// blob and the blobs directory, before meta.json commits the session.
func TestBlobsAreSyncedWhenTheSessionCommitsNotWhenWritten(t *testing.T) {
	var mu sync.Mutex // Close syncs several blobs at once
	var synced []string
	committed := false
	dir := t.TempDir()
	realSync := fsync
	fsync = func(f *os.File) error {
		mu.Lock()
		defer mu.Unlock()
		if _, err := os.Stat(filepath.Join(dir, MetaFile)); err == nil {
			committed = true
		}
		synced = append(synced, f.Name())
		return realSync(f)
	}
	t.Cleanup(func() { fsync = realSync })

	w, err := Create(dir, Meta{ID: "s1", FingerprintMode: "strict"}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range sampleEvents(strings.Repeat("0123456789abcdef", 2048)) { // a 32 KiB answer
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	blobs, err := filepath.Glob(filepath.Join(dir, BlobsDir, "*"))
	if err != nil || len(blobs) == 0 {
		t.Fatalf("no blob written (%v)", err)
	}
	if len(synced) != 0 {
		t.Fatalf("appending synced %v: the request path waits for the disk", synced)
	}
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range append(blobs, filepath.Join(dir, BlobsDir)) {
		if !slices.Contains(synced, want) {
			t.Errorf("Close did not sync %s (synced %v)", want, synced)
		}
	}
	if committed {
		t.Error("a blob was synced after meta.json was written")
	}
	if _, err := Open(dir); err != nil {
		t.Fatalf("the committed session does not open: %v", err)
	}
}
