package blobsweep_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
)

// manualClock is a store clock that tests move by hand; a push's waits move it as far as they wait.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) get() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
func (c *manualClock) sleep(_ context.Context, d time.Duration) error { c.add(d); return nil }

// A committed session whose index was lost is repaired by pushing it again. Meanwhile no sweep
// deletes anything, since what the session references is unknown; and the repair settles like a new
// push, storing again what a sweep (of a newer kind, whose window record it cannot read) deleted.
func TestARepairPushSettlesLikeANewOne(t *testing.T) {
	ctx := context.Background()
	clock := &manualClock{now: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	mem := blobstore.NewMemObjectStore()
	mem.Clock = clock.get
	layout := blobstore.Layout{}
	dir, hashes := record(t, "run", 1, 2)
	store := blobstore.NewSessionStore(mem, layout, blobstore.StoreOptions{WriteHooks: blobstore.WriteHooks{Sleep: clock.sleep}})
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := mem.Delete(ctx, indexOf(t, mem, layout, "run")); err != nil {
		t.Fatal(err)
	}
	clock.add(72 * time.Hour)
	rep, err := blobsweep.Run(ctx, mem, blobsweep.Options{Layout: layout, Margin: time.Hour, Lock: &blobsweep.MemLock{}, Holder: "s",
		Clock: clock.get, NoCache: true})
	if err == nil || rep.Deleted != 0 {
		t.Fatalf("a sweep past a session without its index: %v, %d deleted; want an error and nothing deleted", err, rep.Deleted)
	}
	victim := layout.Blob(hashes[1])
	store = blobstore.NewSessionStore(mem, layout, blobstore.StoreOptions{WriteHooks: blobstore.WriteHooks{Sleep: clock.sleep,
		Step: func(ctx context.Context, step blobstore.WriteStep) error {
			if step == blobstore.RootStored {
				mem.Set(layout.SweepWindowsPrefix()+"20261208T120000Z-60000ms-gc-job", nil)
				return mem.Delete(ctx, victim)
			}
			return nil
		}}})
	res, err := store.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !res.AlreadyCommitted || res.ObjectsRestored != 1 {
		t.Fatalf("the repair push: committed before %v, %d objects stored again; want true and the one deleted", res.AlreadyCommitted, res.ObjectsRestored)
	}
	if _, err := store.Pull(ctx, "run", filepath.Join(t.TempDir(), "pulled")); err != nil {
		t.Fatalf("the repaired session does not pull: %v", err)
	}
}

// A window record this version cannot read (another format, a holder it does not accept) may be a
// sweep that deleted: the push checks every object rather than trusting the records it can read.
func TestAPushChecksEveryObjectWhenAWindowRecordIsUnreadable(t *testing.T) {
	ctx := context.Background()
	clock := &manualClock{now: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	mem := blobstore.NewMemObjectStore()
	mem.Clock = clock.get
	layout := blobstore.Layout{}
	dir, hashes := record(t, "run", 1, 2)
	victim := layout.Blob(hashes[1])
	store := blobstore.NewSessionStore(mem, layout, blobstore.StoreOptions{WriteHooks: blobstore.WriteHooks{Sleep: clock.sleep,
		Step: func(ctx context.Context, step blobstore.WriteStep) error {
			if step == blobstore.RootStored { // a sweep of a newer kind deleted, and left its record
				mem.Set(layout.SweepWindowsPrefix()+"20261205T120000Z-60000ms-gc-job", nil)
				return mem.Delete(ctx, victim)
			}
			return nil
		}}})
	res, err := store.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.ObjectsRestored != 1 {
		t.Fatalf("stored %d objects again, want the one deleted", res.ObjectsRestored)
	}
	if _, ok := mem.Bytes(victim); !ok {
		t.Fatal("the push committed without the deleted blob")
	}
}

// slowListing makes every listing of sessions/ take two minutes of the store's clock.
type slowListing struct {
	*blobstore.MemObjectStore
	clock *manualClock
}

func (s slowListing) ListPages(ctx context.Context, prefix string, fn func([]blobstore.ObjectInfo) error) error {
	if strings.HasPrefix(prefix, (blobstore.Layout{}).SessionsPrefix()) {
		s.clock.add(2 * time.Minute)
	}
	return s.MemObjectStore.ListPages(ctx, prefix, fn)
}

// skewed signs windows an hour ahead of the store, as a host whose clock runs ahead does.
type skewed struct{ *blobstore.MemObjectStore }

func (s skewed) OpenDeleteWindow(ctx context.Context, d time.Duration) (blobstore.DeleteWindow, error) {
	w, err := s.MemObjectStore.OpenDeleteWindow(ctx, d)
	w.Opened = w.Opened.Add(time.Hour)
	return w, err
}

// A sweep that can never delete inside its windows (re-marking takes longer than a window) or whose
// windows would not mean what they say (its clock far from the store's) stops with an error that
// says why, rather than recording windows for ever or blocking every push.
func TestASweepThatCannotDeleteInItsWindowsStops(t *testing.T) {
	for name, wrap := range map[string]func(*blobstore.MemObjectStore, *manualClock) blobsweep.Objects{
		"re-marking outlasts the window":    func(m *blobstore.MemObjectStore, c *manualClock) blobsweep.Objects { return slowListing{m, c} },
		"the host's clock is an hour ahead": func(m *blobstore.MemObjectStore, _ *manualClock) blobsweep.Objects { return skewed{m} },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clock := &manualClock{now: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
			mem := blobstore.NewMemObjectStore()
			mem.Clock = clock.get
			orphan := blobstore.Layout{}.Blob(memHash(1))
			memPut(t, mem, orphan, "x", clock.get().Add(-48*time.Hour))
			rep, err := blobsweep.Run(ctx, wrap(mem, clock), blobsweep.Options{Layout: blobstore.Layout{}, Margin: time.Hour,
				Lock: &blobsweep.MemLock{}, Holder: "s", Clock: clock.get})
			if err == nil {
				t.Fatalf("the sweep succeeded (%d deleted, %d windows)", rep.Deleted, rep.Windows)
			}
			if _, ok := mem.Bytes(orphan); !ok {
				t.Fatal("the orphan was deleted")
			}
			if n := len(mem.Keys(blobstore.Layout{}.SweepWindowsPrefix())); n > 3 {
				t.Fatalf("%d window records, want at most 3", n)
			}
			t.Log(err)
		})
	}
}

// indexOf is the key of session id's one segment index.
func indexOf(t testing.TB, mem *blobstore.MemObjectStore, layout blobstore.Layout, id string) string {
	t.Helper()
	objs, err := mem.List(context.Background(), layout.SessionsPrefix()+id+"/")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, o := range objs {
		if layout.IsSessionIndex(id, o.Key) {
			found = append(found, o.Key)
		}
	}
	if len(found) != 1 {
		t.Fatalf("session %s has segment indexes %v, want one", id, found)
	}
	return found[0]
}

// sweptDuringCapture is a store whose sweep, once the capture's manifest is stored, deletes the
// blob of a.txt in a window open since before the capture, and then runs change.
func sweptDuringCapture(t *testing.T, change func()) (*blobstore.SessionStore, *blobstore.MemObjectStore, string) {
	t.Helper()
	clock := &manualClock{now: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	mem := blobstore.NewMemObjectStore()
	mem.Clock = clock.get
	layout := blobstore.Layout{}
	ws := t.TempDir()
	a := []byte("the bytes a sweep deletes\n")
	for name, data := range map[string][]byte{"a.txt": a, "b.txt": []byte("kept\n")} {
		if err := os.WriteFile(filepath.Join(ws, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	victim := layout.Blob(fmt.Sprintf("%x", sha256.Sum256(a)))
	store := blobstore.NewSessionStore(mem, layout, blobstore.StoreOptions{WriteHooks: blobstore.WriteHooks{Sleep: clock.sleep,
		Step: func(ctx context.Context, step blobstore.WriteStep) error {
			if step == blobstore.RootStored {
				mem.Set(layout.SweepWindowsPrefix()+"20261205T115959Z-60000ms-gc-job", nil)
				change()
				return mem.Delete(ctx, victim)
			}
			return nil
		}}})
	return store, mem, ws
}

// A capture that a sweep overlapped stores again, from the workspace, each blob the sweep deleted
// before the manifest naming it was stored; the checkpoint then restores byte for byte.
func TestACaptureStoresAgainWhatASweepDeletedDuringIt(t *testing.T) {
	ctx := context.Background()
	store, _, ws := sweptDuringCapture(t, func() {})
	c, err := store.Checkpoints().Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Stats.StoredAgainBlobs != 1 {
		t.Fatalf("stored %d blobs again, want the one the sweep deleted", c.Stats.StoredAgainBlobs)
	}
	into := t.TempDir()
	if _, err := store.Checkpoints().Restore(ctx, into, c.ID, checkpoint.RestoreOptions{Guard: checkpoint.GuardOff}); err != nil {
		t.Fatalf("the checkpoint does not restore: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(into, "a.txt")); string(got) != "the bytes a sweep deletes\n" {
		t.Fatalf("a.txt restored as %q", got)
	}
}

// When the file whose blob a sweep deleted has changed since it was captured, the capture cannot
// store it again: it fails naming the file, and withdraws the checkpoint rather than list one that
// cannot be restored.
func TestACaptureWhoseLostBlobCannotBeStoredAgainIsWithdrawn(t *testing.T) {
	ctx := context.Background()
	var ws string
	store, mem, ws := sweptDuringCapture(t, func() {
		if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("written after the capture read it\n"), 0o644); err != nil {
			t.Error(err)
		}
	})
	_, err := store.Checkpoints().Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}})
	if err == nil || !strings.Contains(err.Error(), "a.txt") || !strings.Contains(err.Error(), "withdrawn") || !strings.Contains(err.Error(), "take the checkpoint again") {
		t.Fatalf("the capture: %v; want it to fail naming a.txt, the checkpoint withdrawn", err)
	}
	if left := mem.Keys(store.Layout().CheckpointsPrefix()); len(left) != 0 {
		t.Fatalf("the withdrawn checkpoint is still stored: %v", left)
	}
	if list, err := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{}).Checkpoints().List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("checkpoints listed after the withdrawal: %v, %v", list, err)
	}
}
