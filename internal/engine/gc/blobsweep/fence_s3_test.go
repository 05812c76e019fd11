package blobsweep_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
)

// The defect as it was found, on a real S3 server: a session pushed again after its record was
// deleted reuses its orphaned blobs, and a sweep that chose them before the push stored its index
// deletes them while the push runs. The push must not commit with them missing: it sees the sweep's
// open window, waits for it to close by the store's clock, stores the deleted objects again, and
// the session pulls. The sweep here deletes right after the push listed the windows, the worst moment.
func TestS3AReusingPushStoresAgainWhatASweepDeletedDuringIt(t *testing.T) {
	e := startS3(t)
	ctx := context.Background()
	old, _ := record(t, "run", 1, 2)
	e.push(t, old)
	for _, k := range e.keys(t) {
		if strings.HasPrefix(k, e.layout.SessionsPrefix()) {
			e.deleteKeys(t, k)
		}
	}
	hooks := sweepDuringWrite(t, e)
	store := blobstore.NewSessionStore(e.objects, e.layout, blobstore.StoreOptions{WriteHooks: hooks})
	res, err := store.Push(ctx, old) // the same session, pushed again
	if err != nil {
		t.Fatal(err)
	}
	if res.BlobsSkipped == 0 || res.ObjectsRestored == 0 {
		t.Fatalf("the push skipped %d blobs and stored %d objects again, want both: %+v", res.BlobsSkipped, res.ObjectsRestored, res)
	}
	if _, err := e.store.Pull(ctx, "run", filepath.Join(t.TempDir(), "pulled")); err != nil {
		t.Fatalf("the session the push committed does not pull: %v", err)
	}
}

// The same on a real S3 server for a checkpoint capture, as hostile testing found it: a workspace
// captured again after its checkpoint was deleted reuses the orphaned blobs ("0 new bytes uploaded"),
// and a sweep that chose them before the manifest was stored deletes them. The capture must store
// them again before it returns, so the checkpoint restores.
func TestS3ACaptureStoresAgainWhatASweepDeletedDuringIt(t *testing.T) {
	e := startS3(t)
	ctx := context.Background()
	ws := t.TempDir()
	for i, name := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(ws, name), payloadJSON(uint64(i+1), 4096), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}}
	if _, err := e.store.Checkpoints().Create(ctx, ws, opts); err != nil {
		t.Fatal(err)
	}
	for _, k := range e.keys(t) {
		if strings.HasPrefix(k, e.layout.CheckpointsPrefix()) {
			e.deleteKeys(t, k)
		}
	}
	hooks := sweepDuringWrite(t, e)
	store := blobstore.NewSessionStore(e.objects, e.layout, blobstore.StoreOptions{WriteHooks: hooks})
	c, err := store.Checkpoints().Create(ctx, ws, opts)
	if err != nil {
		t.Fatal(err)
	}
	if c.Stats.UploadedBlobs != 0 || c.Stats.StoredAgainBlobs == 0 {
		t.Fatalf("the capture uploaded %d blobs and stored %d again, want none and some: %+v", c.Stats.UploadedBlobs, c.Stats.StoredAgainBlobs, c.Stats)
	}
	into := t.TempDir()
	if _, err := e.store.Checkpoints().Restore(ctx, into, c.ID, checkpoint.RestoreOptions{Guard: checkpoint.GuardOff}); err != nil {
		t.Fatalf("the checkpoint the capture returned does not restore: %v", err)
	}
	for i, name := range []string{"a.txt", "b.txt"} {
		if got, _ := os.ReadFile(filepath.Join(into, name)); string(got) != string(payloadJSON(uint64(i+1), 4096)) {
			t.Fatalf("%s restored as %d other bytes", name, len(got))
		}
	}
}

// sweepDuringWrite starts a sweep of the orphans (older than its margin by its clock) and holds it
// once it re-marked the roots; the write hooks it returns let it delete right after the writer
// listed the windows, the worst moment, and wait for it to finish, failing the test if it deleted
// nothing.
func sweepDuringWrite(t *testing.T, e *s3env) blobstore.WriteHooks {
	t.Helper()
	ctx := context.Background()
	later := time.Now().Add(2 * time.Hour)
	remarked, release, swept := make(chan struct{}), make(chan struct{}), make(chan *blobsweep.Report, 1)
	go func() {
		rep, err := blobsweep.Run(ctx, e.objects, blobsweep.Options{Layout: e.layout, Margin: time.Hour, Window: 3 * time.Second,
			Lock: &blobsweep.MemLock{}, Holder: "sweep", Clock: func() time.Time { return later }, NoCache: true,
			Hooks: blobsweep.Hooks{AfterRemark: func(context.Context) error {
				close(remarked)
				<-release
				return nil
			}}})
		if err != nil {
			t.Errorf("sweep: %v", err)
		}
		swept <- rep
	}()
	<-remarked
	return blobstore.WriteHooks{Step: func(_ context.Context, step blobstore.WriteStep) error {
		if step == blobstore.WindowsListed {
			close(release)
			if rep := <-swept; rep == nil || rep.Deleted == 0 {
				t.Errorf("the sweep deleted nothing while the write was under way (%+v): the test proves nothing", rep)
			}
		}
		return nil
	}}
}
