package ui

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/internal/blobstore"
)

// TestStoreSourceKeepsNoPulledCopyOnDisk: however many sessions a user browses through (more than
// the server caches, so each is loaded again), the pulled copies, their sealed vaults among them,
// do not pile up on disk.
func TestStoreSourceKeepsNoPulledCopyOnDisk(t *testing.T) {
	root := triageRoot(t)
	layout, err := blobstore.NewLayout("ui")
	if err != nil {
		t.Fatal(err)
	}
	store := blobstore.NewSessionStore(blobstore.NewMemObjectStore(), layout, blobstore.StoreOptions{})
	ctx := context.Background()
	for _, id := range []string{"triage", "triage-fix"} {
		if _, err := store.Push(ctx, filepath.Join(root, id)); err != nil {
			t.Fatal(err)
		}
	}
	src, err := NewStoreSource(store, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	for i := 0; i < 3*maxCached; i++ {
		for _, id := range []string{"triage", "triage-fix"} {
			s, err := src.Open(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Events) == 0 {
				t.Fatalf("%s opened with no events", id)
			}
		}
	}
	var files int
	_ = filepath.Walk(src.cache, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			files++
		}
		return nil
	})
	if files != 0 {
		t.Errorf("%d files left under the pull directory after %d opens, want none", files, 6*maxCached)
	}
}
