package blobstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
)

// A fork stores only the segments from its fork point on and lists its parent's for the rest. Once
// the parent is deleted from the store, the blob sweep must keep every segment the fork lists (and
// delete the parent's own), and the fork must still pull, verified, and read.
func TestAForkWhoseParentIsGoneKeepsItsSegmentsThroughTheBlobSweep(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dirs, err := blobstore.ForkFamily(root)
	if err != nil {
		t.Fatal(err)
	}
	mem := blobstore.NewMemObjectStore()
	layout := blobstore.Layout{}
	store := blobstore.NewSessionStore(mem, layout, blobstore.StoreOptions{Parallelism: 2})
	if _, err := store.Push(ctx, dirs[0]); err != nil {
		t.Fatal(err)
	}
	res, err := store.Push(ctx, dirs[20]) // the fork that forks earliest: it shares the most
	if err != nil {
		t.Fatal(err)
	}
	if res.SegmentsSkipped == 0 {
		t.Fatalf("the fork shares no segment with its parent (%+v): the test proves nothing", res)
	}
	for _, k := range mem.Keys(layout.SessionsPrefix() + "parent/") {
		if err := mem.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	later := time.Now().Add(2 * time.Hour) // every blob is older than the margin
	rep, err := blobsweep.Run(ctx, mem, blobsweep.Options{Layout: layout, Margin: time.Hour, Lock: &blobsweep.MemLock{},
		Holder: "t", Clock: func() time.Time { return later }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Deleted == 0 {
		t.Fatal("the sweep deleted none of the parent's own segments: it cannot be told from one that deletes nothing")
	}
	pulled, err := store.Pull(ctx, "fork-19", filepath.Join(t.TempDir(), "fork"))
	if err != nil {
		t.Fatalf("the fork does not pull once its parent is gone and swept: %v", err)
	}
	if pulled.Events == 0 {
		t.Fatal("the fork pulled no events")
	}
}
