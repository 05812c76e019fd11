package blobsweep_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
)

// TestASweepKeepsTheChunksOfALiveCheckpointAndTheFilesTheyName: a checkpoint's manifest names its
// files only through its chunks, blobs like the files. A sweep long after the capture keeps every
// chunk and every file blob the live checkpoint references, so it still restores; once the checkpoint
// is deleted the next sweep takes them all. A chunk gone missing is reported, never a failure.
func TestASweepKeepsTheChunksOfALiveCheckpointAndTheFilesTheyName(t *testing.T) {
	ctx := context.Background()
	layout, _ := blobstore.NewLayout("p")
	mem := blobstore.NewMemObjectStore()
	store := blobstore.NewSessionStore(mem, layout, blobstore.StoreOptions{}).Checkpoints()
	ws := t.TempDir()
	for i := range 1500 { // several chunks
		p := filepath.Join(ws, fmt.Sprintf("d%02d", i%30), fmt.Sprintf("f%04d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "file %d", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := store.Create(ctx, ws, checkpoint.CaptureOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root, _ := mem.Bytes(layout.CheckpointManifest(c.ID))
	chunks, err := checkpoint.ManifestChunks(root)
	if err != nil || len(chunks) < 3 {
		t.Fatalf("%d chunks (%v), want several", len(chunks), err)
	}
	blobs := mem.Keys(layout.BlobsPrefix())
	if want := 1500 + len(chunks); len(blobs) != want {
		t.Fatalf("%d blobs stored, want %d: the files and the chunks", len(blobs), want)
	}
	now := time.Now()
	age := func() {
		for _, k := range mem.Keys(layout.BlobsPrefix()) {
			mem.SetModified(k, now.Add(-48*time.Hour))
		}
	}
	sweep := func() *blobsweep.Report {
		t.Helper()
		rep, err := blobsweep.Run(ctx, mem, blobsweep.Options{Layout: layout, Margin: time.Hour, Lock: &blobsweep.MemLock{}, Holder: "t",
			Clock: func() time.Time { return now }, NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}

	age()
	if rep := sweep(); rep.Deleted != 0 || rep.Plan.Referenced != int64(len(blobs)) {
		t.Fatalf("a sweep with the checkpoint live deleted %d blobs and found %d of %d referenced", rep.Deleted, rep.Plan.Referenced, len(blobs))
	}
	if left := mem.Keys(layout.BlobsPrefix()); !slices.Equal(left, blobs) {
		t.Fatalf("%d of %d blobs left", len(left), len(blobs))
	}
	if _, err := (&checkpoint.Store{Manifests: store.Manifests, Blobs: store.Blobs}).Load(ctx, c.ID); err != nil {
		t.Fatalf("the checkpoint no longer loads after the sweep: %v", err)
	}

	// One chunk lost: the checkpoint is reported damaged and nothing fails; the other chunks' files
	// are still kept.
	if err := mem.Delete(ctx, layout.Blob(chunks[0])); err != nil {
		t.Fatal(err)
	}
	rep := sweep()
	if !slices.Equal(rep.DamagedCheckpoints, []string{c.ID}) {
		t.Errorf("damaged checkpoints %v, want [%s]", rep.DamagedCheckpoints, c.ID)
	}
	if res := rep.Result(); res.DamagedCheckpoints != 1 || res.DamagedSessions != 0 {
		t.Errorf("the Job result counts %d damaged checkpoint(s) and %d session(s), want 1 and 0", res.DamagedCheckpoints, res.DamagedSessions)
	}
	if left := len(mem.Keys(layout.BlobsPrefix())); left < len(blobs)-1-maxChunkFiles {
		t.Errorf("%d blobs left of %d: more than the lost chunk's files were swept", left, len(blobs))
	}

	if err := store.Delete(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if rep := sweep(); len(mem.Keys(layout.BlobsPrefix())) != 0 || rep.Plan.Referenced != 0 {
		t.Fatalf("after the checkpoint's deletion %d blobs are left (%d referenced), want none", len(mem.Keys(layout.BlobsPrefix())), rep.Plan.Referenced)
	}
}

// maxChunkFiles bounds the files one chunk names.
const maxChunkFiles = 1024
