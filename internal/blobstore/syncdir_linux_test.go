//go:build linux

package blobstore

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPullSyncsEveryFileAndDirectoryItWrites records what a pull makes durable before it renames
// the session into place: every file it wrote (events.jsonl, each blob, the vault, meta.json) and
// both directories that hold them, so that none of it is still in flight at its destination.
func TestPullSyncsEveryFileAndDirectoryItWrites(t *testing.T) {
	dir, meta, store, _ := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var synced []string
	testHookSynced = func(path string) {
		mu.Lock()
		defer mu.Unlock()
		synced = append(synced, path)
	}
	defer func() { testHookSynced = nil }()
	out := filepath.Join(t.TempDir(), "pulled")
	if _, err := store.Pull(ctx, meta.ID, out); err != nil {
		t.Fatal(err)
	}
	// Last, after the rename, the entry of out in its parent.
	if len(synced) == 0 || synced[len(synced)-1] != filepath.Dir(out) {
		t.Fatalf("the pull's last sync was not of %s, which holds the session's entry: %v", filepath.Dir(out), synced)
	}
	synced = synced[:len(synced)-1]
	// The pull synced the rest under its temporary directory, since renamed to out: the shortest path.
	if len(synced) == 0 {
		t.Fatal("the pull synced nothing")
	}
	tmp := slices.MinFunc(synced, func(a, b string) int { return len(a) - len(b) })
	var got []string
	for _, p := range synced {
		rel, err := filepath.Rel(tmp, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("synced %s, outside the pull's directory %s", p, tmp)
		}
		got = append(got, filepath.ToSlash(rel))
	}
	want := []string{".", "blobs"}
	for name := range sessionFiles(t, out) {
		want = append(want, name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paths synced before the rename (-want +got):\n%s", diff)
	}
}
