package blobsweep_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// margin is short so that "old" needs only a short sleep; ageing sleeps past it.
const margin = 2 * time.Second

func age() { time.Sleep(margin + 1500*time.Millisecond) }

// population stores the mixed population of the integration test and returns the keys the sweep
// must delete: the unique blobs of a deleted session and the segments of its log no other session's
// log shares, and an old orphan blob.
func population(t *testing.T, e *s3env) (doomed []string) {
	t.Helper()
	ctx := context.Background()
	dirA, hA := record(t, "kept-a", 1, 2, 3)
	e.push(t, dirA)
	dirB, _ := record(t, "kept-b", 3, 4) // shares blob 3 with kept-a and with the deleted session
	e.push(t, dirB)
	dirGone, hGone := record(t, "deleted", 3, 5, 6)
	e.push(t, dirGone)
	// The GC controller deleted this session: its objects go, its blobs (its log's segments too) stay
	// for the sweep.
	goneSegments := e.segmentsOf(t, "deleted")
	e.deleteKeys(t, e.sessionKeys(t, "deleted", "")...)
	// An upload interrupted before meta.json: uncommitted, still a root.
	dirUp, _ := record(t, "uploading", 7)
	e.push(t, dirUp)
	e.deleteKeys(t, e.sessionKeys(t, "uploading", "meta.json")...)
	// A checkpoint whose workspace holds the bytes of the deleted session's blob 6 and of kept-a's blob 1.
	ws := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ws, "six.json"), blobBytes(t, dirGone, hGone[6]), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "one.json"), blobBytes(t, dirA, hA[1]), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "own.txt"), []byte("a file only the checkpoint has"), 0o644))
	if _, err := e.store.Checkpoints().Create(ctx, ws, checkpoint.CaptureOptions{
		Anchor: checkpoint.Anchor{Session: "kept-a", Turn: 1, Step: 1, Author: session.AuthorRecorder}}); err != nil {
		t.Fatal(err)
	}
	oldOrphan := e.putBlob(t, []byte("an orphan nobody references"))
	doomed = []string{e.layout.Blob(hGone[5]), oldOrphan}
	kept := append(append(e.segmentsOf(t, "kept-a"), e.segmentsOf(t, "kept-b")...), e.segmentsOf(t, "uploading")...)
	for _, key := range goneSegments {
		if !contains(kept, key) && !contains(doomed, key) {
			doomed = append(doomed, key)
		}
	}
	if len(doomed) < 3 {
		t.Fatalf("the deleted session's log shares every segment with the others: %v", goneSegments)
	}
	return doomed
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSweepLeavesExactlyTheReferencedAndYoungBlobs(t *testing.T) {
	e := startS3(t)
	doomed := population(t, e)
	age()
	young := e.putBlob(t, []byte("an orphan uploaded just now"))
	// Every sweep here starts one second after the young orphan's modification time as the listing
	// shows it, not at the real time: the orphan stays inside the margin however long a loaded
	// machine takes over the sweeps and pulls in between, yet a sweep that ignored the margin would
	// delete it. The blobs stored before age() are older than the cutoff by more than a second.
	sweepStart := e.lastModified(t, young).Add(time.Second)
	clock := func() time.Time { return sweepStart }
	before := e.keys(t)

	// A dry run reports the same deletions and deletes nothing.
	dry, err := blobsweep.Run(context.Background(), e.objects, blobsweep.Options{Layout: e.layout, Margin: margin, DryRun: true, Clock: clock})
	must(t, err)
	var wouldDelete []string
	for _, d := range dry.Plan.Unreferenced {
		if d.Delete {
			wouldDelete = append(wouldDelete, d.Key)
		}
	}
	if diff := cmp.Diff(sorted(doomed), sorted(wouldDelete)); diff != "" {
		t.Errorf("dry run would delete (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, e.keys(t)); diff != "" {
		t.Fatalf("the dry run changed the store (-before +after):\n%s", diff)
	}

	lock := &blobsweep.MemLock{}
	rep, err := blobsweep.Run(context.Background(), e.objects, blobsweep.Options{Layout: e.layout, Margin: margin, Lock: lock, Holder: "sweep-1", Clock: clock})
	must(t, err)
	// The sweep leaves its mark cache and the record of its one delete window beside what it kept.
	windows := 0
	for _, k := range e.keys(t) {
		if _, ok := e.layout.SweepWindowFromKey(k); ok && strings.HasSuffix(k, "-sweep-1") {
			windows++
		}
	}
	if windows != 1 || rep.Windows != 1 {
		t.Errorf("the sweep recorded %d delete windows and reports %d, want one", windows, rep.Windows)
	}
	kept := without(e.keys(t), e.layout.SweepWindowsPrefix())
	for _, k := range e.keys(t) {
		if strings.HasPrefix(k, e.layout.SweepWindowsPrefix()) {
			kept = without(kept, k)
		}
	}
	if diff := cmp.Diff(sorted(append(without(before, doomed...), e.layout.SweepMarks())), kept); diff != "" {
		t.Errorf("keys after the sweep (-want +got):\n%s", diff)
	}
	if !contains(e.keys(t), young) {
		t.Error("the young orphan was deleted")
	}
	want := blobsweep.Report{Sessions: 2, Uncommitted: 1, Checkpoints: 1, Deleted: int64(len(doomed))}
	got := blobsweep.Report{Sessions: rep.Sessions, Uncommitted: rep.Uncommitted, Checkpoints: rep.Checkpoints, Deleted: rep.Deleted}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if rep.Plan.Young != 1 || rep.FreedBytes <= 0 || lock.Holder() != "" {
		t.Errorf("young = %d, freed = %d, lock holder after the sweep = %q", rep.Plan.Young, rep.FreedBytes, lock.Holder())
	}
	// Every retained session still pulls and verifies.
	for _, id := range []string{"kept-a", "kept-b"} {
		if _, err := e.store.Pull(context.Background(), id, filepath.Join(t.TempDir(), id)); err != nil {
			t.Errorf("pulling %s after the sweep: %v", id, err)
		}
	}
	// A second sweep finds nothing more to delete, and reads no root again: the mark cache holds
	// the references of the three logs' segments.json and the manifest (one GET, the cache itself).
	again, err := blobsweep.Run(context.Background(), e.objects, blobsweep.Options{Layout: e.layout, Margin: margin, Lock: lock, Holder: "sweep-2", Clock: clock})
	must(t, err)
	if again.Deleted != 0 || again.Cached != 4 || again.Requests.Get != 1 || again.CacheProblem != "" {
		t.Errorf("second sweep: deleted %d, %d roots from the cache, %d GETs, cache problem %q; want 0, 4, 1, none",
			again.Deleted, again.Cached, again.Requests.Get, again.CacheProblem)
	}
}

func TestSweepIgnoresADamagedMarkCacheAndReadsEveryRoot(t *testing.T) {
	e := startS3(t)
	doomed := population(t, e)
	// A cache from elsewhere that claims nothing is referenced, then damaged: it must not be used.
	e.putBlob(t, nil) // an empty blob nobody references, old by the time of the sweep
	const damaged = "agentrewind-gc-marks/v1\ngarbage that does not verify"
	must(t, e.objects.Put(context.Background(), e.layout.SweepMarks(), strings.NewReader(damaged), int64(len(damaged))))
	age()
	rep, err := blobsweep.Run(context.Background(), e.objects, blobsweep.Options{Layout: e.layout, Margin: margin, Lock: &blobsweep.MemLock{}, Holder: "s"})
	must(t, err)
	if rep.CacheProblem == "" || rep.Cached != 0 || rep.Requests.Get != 6 {
		t.Errorf("cache problem %q, %d cached, %d GETs; want a problem, 0 and 6 (the cache, four roots and the checkpoint manifest's one chunk)", rep.CacheProblem, rep.Cached, rep.Requests.Get)
	}
	if rep.Deleted != int64(len(doomed))+1 {
		t.Errorf("deleted %d, want %d", rep.Deleted, len(doomed)+1)
	}
	for _, id := range []string{"kept-a", "kept-b"} {
		if _, err := e.store.Pull(context.Background(), id, filepath.Join(t.TempDir(), id)); err != nil {
			t.Errorf("pulling %s after the sweep: %v", id, err)
		}
	}
}

// interrupting wraps the store: it cancels the sweep's context at the n-th read and fails the test
// if anything is deleted.
type interrupting struct {
	blobsweep.Objects
	cancel  context.CancelFunc
	n       int64
	reads   atomic.Int64
	deletes atomic.Int64
}

func (w *interrupting) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if w.reads.Add(1) == w.n {
		w.cancel()
	}
	return w.Objects.Get(ctx, key)
}

func (w *interrupting) DeleteKeysIn(ctx context.Context, win blobstore.DeleteWindow, keys []string) error {
	w.deletes.Add(int64(len(keys)))
	return w.Objects.DeleteKeysIn(ctx, win, keys)
}

func (w *interrupting) Delete(ctx context.Context, key string) error {
	w.deletes.Add(1)
	return w.Objects.Delete(ctx, key)
}

func TestSweepInterruptedWhileMarkingDeletesNothing(t *testing.T) {
	e := startS3(t)
	population(t, e)
	age()
	before := e.keys(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &interrupting{Objects: e.objects, cancel: cancel, n: 2}
	_, err := blobsweep.Run(ctx, w, blobsweep.Options{Layout: e.layout, Margin: margin, Lock: &blobsweep.MemLock{}, Holder: "crash", Parallelism: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the cancellation", err)
	}
	if w.deletes.Load() != 0 {
		t.Errorf("%d keys deleted after marking was interrupted", w.deletes.Load())
	}
	if diff := cmp.Diff(before, e.keys(t)); diff != "" {
		t.Errorf("the interrupted sweep changed the store (-before +after):\n%s", diff)
	}
}

func TestSweepKeepsABlobUploadedAfterMarkingBegan(t *testing.T) {
	e := startS3(t)
	doomed := population(t, e)
	age()
	var late string
	// A zero margin: only the start time, taken before marking, protects the late upload.
	rep, err := blobsweep.Run(context.Background(), e.objects, blobsweep.Options{Layout: e.layout, Margin: 0, Lock: &blobsweep.MemLock{}, Holder: "race",
		Hooks: blobsweep.Hooks{AfterMark: func(context.Context) error {
			late = e.putBlob(t, []byte("uploaded between mark and sweep"))
			return nil
		}}})
	must(t, err)
	if !contains(e.keys(t), late) {
		t.Errorf("the blob uploaded after marking began was deleted (report %+v)", rep)
	}
	if rep.Deleted != int64(len(doomed)) {
		t.Errorf("deleted %d blobs, want the %d old unreferenced ones", rep.Deleted, len(doomed))
	}
}

func TestSweepKeepsTheBlobsOfASessionCommittedDuringIt(t *testing.T) {
	e := startS3(t)
	doomed := population(t, e)
	// The session's blob is already in the store, old and unreferenced, so its push skips the
	// upload and commits a session that needs it: only the re-mark can save it.
	dir, h := record(t, "latecomer", 42)
	shared := e.putBlob(t, blobBytes(t, dir, h[42]))
	age()
	rep, err := blobsweep.Run(context.Background(), e.objects, blobsweep.Options{Layout: e.layout, Margin: margin, Lock: &blobsweep.MemLock{}, Holder: "race",
		Hooks: blobsweep.Hooks{AfterList: func(context.Context) error {
			e.push(t, dir)
			return nil
		}}})
	must(t, err)
	if !contains(e.keys(t), shared) {
		t.Fatalf("the blob of the session committed during the sweep was deleted (report %+v)", rep)
	}
	if rep.Rescued != 1 || rep.Deleted != int64(len(doomed)) {
		t.Errorf("rescued %d, deleted %d; want 1 and %d", rep.Rescued, rep.Deleted, len(doomed))
	}
	if _, err := e.store.Pull(context.Background(), "latecomer", filepath.Join(t.TempDir(), "s")); err != nil {
		t.Errorf("the session committed during the sweep does not pull: %v", err)
	}
}

func TestSweepUnderALockHeldOrLostDeletesNothing(t *testing.T) {
	e := startS3(t)
	population(t, e)
	age()
	before := e.keys(t)
	lock := &blobsweep.MemLock{}
	lease, err := lock.Acquire(context.Background(), "sweep-a")
	must(t, err)
	if _, err := blobsweep.Run(context.Background(), e.objects, blobsweep.Options{Layout: e.layout, Margin: margin, Lock: lock, Holder: "sweep-b"}); !errors.Is(err, blobsweep.ErrLocked) {
		t.Fatalf("a second sweep: err = %v, want ErrLocked", err)
	}
	must(t, lease.Release(context.Background()))
	_, err = blobsweep.Run(context.Background(), e.objects, blobsweep.Options{Layout: e.layout, Margin: margin, Lock: lock, Holder: "sweep-c",
		Hooks: blobsweep.Hooks{AfterList: func(context.Context) error { lock.Steal("sweep-d"); return nil }}})
	if !errors.Is(err, blobsweep.ErrLeaseLost) {
		t.Fatalf("a sweep that lost its lock: err = %v, want ErrLeaseLost", err)
	}
	if diff := cmp.Diff(before, e.keys(t)); diff != "" {
		t.Errorf("the store changed (-before +after):\n%s", diff)
	}
}
