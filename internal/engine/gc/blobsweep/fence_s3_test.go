package blobsweep_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
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
	later := time.Now().Add(2 * time.Hour) // the orphans are older than the margin
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
	hooks := blobstore.PushHooks{Step: func(_ context.Context, step blobstore.PushStep) error {
		if step == blobstore.PushWindowsListed {
			close(release)
			if rep := <-swept; rep == nil || rep.Deleted == 0 {
				t.Errorf("the sweep deleted nothing while the push was under way (%+v): the test proves nothing", rep)
			}
		}
		return nil
	}}
	store := blobstore.NewSessionStore(e.objects, e.layout, blobstore.StoreOptions{PushHooks: hooks})
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
