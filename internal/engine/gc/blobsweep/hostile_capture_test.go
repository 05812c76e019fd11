package blobsweep_test

// Hostile tests of a capture's settlement against blob sweeps. Each states the property it holds; the
// ones marked "Found" failed before the fix they name.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
)

var hcT0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// hcWorkspace writes files into a new workspace, their mtimes an hour back so a later capture with a
// baseline reuses them without reading (as a real idle workspace would).
func hcWorkspace(t *testing.T, files map[string]string) string {
	t.Helper()
	ws := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for name, data := range files {
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func hcBlobKey(data string) string {
	return blobstore.Layout{}.Blob(fmt.Sprintf("%x", sha256.Sum256([]byte(data))))
}

// hcChunkKeys are the blob keys of the chunks checkpoint id's stored root names.
func hcChunkKeys(t *testing.T, mem *blobstore.MemObjectStore, id string) []string {
	t.Helper()
	root, ok := mem.Bytes(blobstore.Layout{}.CheckpointManifest(id))
	if !ok {
		t.Fatalf("checkpoint %s has no stored root", id)
	}
	hashes, err := checkpoint.ManifestChunks(root)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, h := range hashes {
		keys = append(keys, blobstore.Layout{}.Blob(h))
	}
	return keys
}

// hcRestores says whether checkpoint id, read by a fresh store, restores.
func hcRestores(ctx context.Context, mem blobstore.ObjectStore, id string) error {
	into, err := os.MkdirTemp("", "hc-restore-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(into)
	fresh := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{}).Checkpoints()
	_, err = fresh.Restore(ctx, into, id, checkpoint.RestoreOptions{Guard: checkpoint.GuardOff})
	return err
}

func hcListed(ctx context.Context, t *testing.T, mem blobstore.ObjectStore) []string {
	t.Helper()
	list, err := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{}).Checkpoints().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	return ids
}

func hcSweep(ctx context.Context, t *testing.T, mem *blobstore.MemObjectStore, clock *manualClock) *blobsweep.Report {
	t.Helper()
	rep, err := blobsweep.Run(ctx, mem, blobsweep.Options{Layout: blobstore.Layout{}, Margin: time.Hour, Lock: &blobsweep.MemLock{},
		Holder: "gc", Clock: clock.get, NoCache: true})
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	return rep
}

// Found, fixed: a capture whose settlement fails (here: a readable window record longer than a
// write waits, as a sweep configured with a longer window writes) returns an error but does not
// withdraw the manifest it stored. A sweep deleted one of its blobs before the manifest was stored,
// so a checkpoint that cannot be restored stays listed. Worse, the next capture of the unchanged
// workspace takes it as its baseline, finds the same files, and returns its id as a success.
func TestHostileCaptureSettleFailureLeavesUnrestorableCheckpointListed(t *testing.T) {
	for name, hook := range map[string]func(ctx context.Context, cancel context.CancelFunc, mem *blobstore.MemObjectStore, clock *manualClock) blobstore.WriteHooks{
		// a sweep with a one-hour window, opened a second before the capture began
		"window longer than a write waits": func(_ context.Context, _ context.CancelFunc, mem *blobstore.MemObjectStore, clock *manualClock) blobstore.WriteHooks {
			return blobstore.WriteHooks{Sleep: clock.sleep}
		},
		// the capture is cancelled (its pod stopped) while it waits out an ordinary window
		"cancelled while waiting": func(_ context.Context, cancel context.CancelFunc, mem *blobstore.MemObjectStore, clock *manualClock) blobstore.WriteHooks {
			return blobstore.WriteHooks{Sleep: func(ctx context.Context, d time.Duration) error {
				cancel()
				return ctx.Err()
			}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clock := &manualClock{now: hcT0}
			mem := blobstore.NewMemObjectStore()
			mem.Clock = clock.get
			a := "the bytes a sweep deletes\n"
			ws := hcWorkspace(t, map[string]string{"a.txt": a, "b.txt": "kept\n"})
			victim := hcBlobKey(a)
			window := "20261205T115959Z-60s-gc"
			if strings.HasPrefix(name, "window longer") {
				window = "20261205T115959Z-3600s-gc"
			}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			hooks := hook(cctx, cancel, mem, clock)
			hooks.Step = func(ctx context.Context, step blobstore.WriteStep) error {
				if step == blobstore.RootStored {
					mem.Set(blobstore.Layout{}.SweepWindowsPrefix()+window, nil)
					return mem.Delete(ctx, victim)
				}
				return nil
			}
			store := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{WriteHooks: hooks})
			_, err := store.Checkpoints().Create(cctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}})
			if err == nil {
				t.Fatal("the capture succeeded although it could not settle")
			}
			t.Logf("first capture: %v", err)
			listed := hcListed(ctx, t, mem)
			for _, id := range listed {
				if rerr := hcRestores(ctx, mem, id); rerr != nil {
					t.Errorf("after the failed capture, checkpoint %s is listed and does not restore: %v", id, rerr)
				}
			}
			// The next capture, in a healthy moment, of the workspace nobody touched.
			mem.Delete(ctx, blobstore.Layout{}.SweepWindowsPrefix()+window)
			clock.add(2 * time.Hour)
			next := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{}).Checkpoints()
			c, err := next.Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 2}})
			if err != nil {
				t.Fatalf("the next capture: %v", err)
			}
			if rerr := hcRestores(ctx, mem, c.ID); rerr != nil {
				t.Errorf("the next capture SUCCEEDED (new=%v) returning checkpoint %s, which does not restore: %v", c.New, c.ID, rerr)
			}
		})
	}
}

// Found, fixed: the Store remembers every chunk it stored or loaded (holdsChunk) and never asks
// the store for it again. A long-lived Store (an operator, a recorder) that captured checkpoint P,
// whose P was deleted elsewhere and swept, later saves a manifest with P's chunks without storing
// them; no window overlaps this capture, so settlement checks nothing, and a checkpoint that cannot
// be restored is returned and listed.
func TestHostileCaptureStaleChunkCacheAfterDeleteAndSweep(t *testing.T) {
	ctx := context.Background()
	clock := &manualClock{now: hcT0}
	mem := blobstore.NewMemObjectStore()
	mem.Clock = clock.get
	ws := hcWorkspace(t, map[string]string{"a.txt": "one\n", "b.txt": "two\n"})
	cs := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{WriteHooks: blobstore.WriteHooks{Sleep: clock.sleep}}).Checkpoints()
	p, err := cs.Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}})
	if err != nil {
		t.Fatal(err)
	}
	chunks := hcChunkKeys(t, mem, p.ID)
	// Another process (agentrewind checkpoint delete) removes P; a day later a sweep collects.
	other := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{}).Checkpoints()
	if err := other.Delete(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	clock.add(72 * time.Hour)
	rep := hcSweep(ctx, t, mem, clock)
	for _, k := range chunks {
		if _, ok := mem.Bytes(k); ok {
			t.Fatalf("setup: the sweep kept chunk %s (report %+v)", k, rep)
		}
	}
	clock.add(time.Hour) // the sweep's window long closed
	// The same long-lived Store captures the unchanged workspace again.
	m, err := cs.Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 2}})
	if err != nil {
		t.Fatalf("second capture: %v", err)
	}
	for _, k := range hcChunkKeys(t, mem, m.ID) {
		if _, ok := mem.Bytes(k); !ok {
			t.Errorf("the capture returned checkpoint %s (new=%v) naming chunk %s, which is not stored", m.ID, m.New, k)
		}
	}
	if rerr := hcRestores(ctx, mem, m.ID); rerr != nil {
		t.Errorf("checkpoint %s returned by a successful capture does not restore: %v", m.ID, rerr)
	}
}

// loadHookStore runs onChunkGet once, after the first chunk read returns its bytes.
type loadHookStore struct {
	*blobstore.MemObjectStore
	once  sync.Once
	chunk string
	hook  func()
}

func (s *loadHookStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.MemObjectStore.Get(ctx, key)
	if err == nil && key == s.chunk {
		data, _ := io.ReadAll(rc)
		s.once.Do(s.hook)
		return io.NopCloser(strings.NewReader(string(data))), nil
	}
	return rc, err
}

// Found, fixed: Create lists the checkpoints and loads the baseline BEFORE it reads the store's
// time (settling). Files unchanged since the baseline are taken from it without asking the store. If
// the baseline is deleted and a sweep deletes its blobs while the baseline is being read (a slow
// read of a big manifest), the sweep's window closed before `since`, so settlement checks nothing.
func TestHostileCaptureBaselineSweptBeforeSince(t *testing.T) {
	for _, addFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("new file %v", addFile), func(t *testing.T) {
			ctx := context.Background()
			clock := &manualClock{now: hcT0}
			mem := blobstore.NewMemObjectStore()
			mem.Clock = clock.get
			ws := hcWorkspace(t, map[string]string{"a.txt": "one\n", "b.txt": "two\n"})
			p, err := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{}).Checkpoints().
				Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}})
			if err != nil {
				t.Fatal(err)
			}
			chunks := hcChunkKeys(t, mem, p.ID)
			clock.add(72 * time.Hour)
			hs := &loadHookStore{MemObjectStore: mem, chunk: chunks[0]}
			hs.hook = func() {
				// While the capture reads its baseline: P is deleted, a sweep runs, time passes.
				_ = mem.Delete(ctx, blobstore.Layout{}.CheckpointManifest(p.ID))
				hcSweep(ctx, t, mem, clock)
				clock.add(3 * time.Minute)
			}
			if addFile {
				if err := os.WriteFile(filepath.Join(ws, "c.txt"), []byte("three\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			store := blobstore.NewSessionStore(hs, blobstore.Layout{}, blobstore.StoreOptions{WriteHooks: blobstore.WriteHooks{Sleep: clock.sleep}})
			c, err := store.Checkpoints().Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 2}})
			if err != nil {
				t.Logf("capture failed (acceptable): %v", err)
				return
			}
			if _, ok := mem.Bytes(hcBlobKey("one\n")); !ok {
				t.Logf("blob of a.txt was swept")
			}
			if rerr := hcRestores(ctx, mem, c.ID); rerr != nil {
				t.Errorf("the capture returned checkpoint %s (new=%v), which does not restore: %v", c.ID, c.New, rerr)
			}
		})
	}
}

// hcSwept is sweptDuringCapture with a readable one-minute window and any files.
func hcSwept(t *testing.T, files map[string]string, victims []string, change func(ws string)) (*blobstore.SessionStore, *blobstore.MemObjectStore, string) {
	t.Helper()
	clock := &manualClock{now: hcT0}
	mem := blobstore.NewMemObjectStore()
	mem.Clock = clock.get
	ws := hcWorkspace(t, files)
	store := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{WriteHooks: blobstore.WriteHooks{Sleep: clock.sleep,
		Step: func(ctx context.Context, step blobstore.WriteStep) error {
			if step == blobstore.RootStored {
				mem.Set(blobstore.Layout{}.SweepWindowsPrefix()+"20261205T115959Z-60s-gc", nil)
				change(ws)
				for _, v := range victims {
					if err := mem.Delete(ctx, v); err != nil {
						return err
					}
				}
			}
			return nil
		}}})
	return store, mem, ws
}

// Found (minor), fixed: two paths hold the same bytes; one of them changes after it was read.
// The other still holds the bytes, but the capture stores again only from the first path it met, and
// fails.
func TestHostileCaptureSameHashTwoPathsOneChanged(t *testing.T) {
	ctx := context.Background()
	same := "shared bytes\n"
	store, _, ws := hcSwept(t, map[string]string{"a.txt": same, "z.txt": same}, []string{hcBlobKey(same)}, func(ws string) {
		os.WriteFile(filepath.Join(ws, "a.txt"), []byte("changed\n"), 0o644)
	})
	c, err := store.Checkpoints().Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}})
	if err != nil {
		t.Errorf("the capture failed although z.txt still holds the lost blob's bytes: %v", err)
		return
	}
	t.Logf("stored again %d", c.Stats.StoredAgainBlobs)
}

// Held: A file whose blob was swept is replaced by a FIFO, a symlink, a directory, or removed, before
// it is stored again: the capture must fail promptly (no hang on the FIFO) and withdraw.
func TestHostileCaptureLostFileReplaced(t *testing.T) {
	a := "the bytes a sweep deletes\n"
	for name, change := range map[string]func(ws string){
		"fifo": func(ws string) {
			p := filepath.Join(ws, "a.txt")
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Error(err)
			}
		},
		"symlink to a copy with the same bytes": func(ws string) {
			p := filepath.Join(ws, "a.txt")
			os.WriteFile(filepath.Join(ws, "..", filepath.Base(ws)+"-copy"), []byte(a), 0o644)
			os.Remove(p)
			os.Symlink(filepath.Join(ws, "..", filepath.Base(ws)+"-copy"), p)
		},
		"directory": func(ws string) {
			p := filepath.Join(ws, "a.txt")
			os.Remove(p)
			os.Mkdir(p, 0o755)
		},
		"removed": func(ws string) { os.Remove(filepath.Join(ws, "a.txt")) },
		"same size other bytes": func(ws string) {
			os.WriteFile(filepath.Join(ws, "a.txt"), []byte(strings.ToUpper(a)), 0o644)
		},
		"longer with the same prefix": func(ws string) {
			os.WriteFile(filepath.Join(ws, "a.txt"), []byte(a+"more"), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			store, mem, ws := hcSwept(t, map[string]string{"a.txt": a, "b.txt": "kept\n"}, []string{hcBlobKey(a)}, change)
			done := make(chan error, 1)
			go func() {
				_, err := store.Checkpoints().Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}})
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("the capture succeeded with a lost blob it could not store again")
				}
				if !strings.Contains(err.Error(), "withdrawn") {
					t.Errorf("error does not say withdrawn: %v", err)
				}
				if ids := hcListed(context.Background(), t, mem); len(ids) != 0 {
					t.Errorf("listed after withdrawal: %v", ids)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the capture hangs")
			}
		})
	}
}

// Held: Every chunk of the manifest is deleted by the sweep before the root was stored: they are
// stored again from memory.
func TestHostileCaptureChunksSwept(t *testing.T) {
	ctx := context.Background()
	clock := &manualClock{now: hcT0}
	mem := blobstore.NewMemObjectStore()
	mem.Clock = clock.get
	ws := hcWorkspace(t, map[string]string{"a.txt": "one\n", "b.txt": "two\n"})
	store := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{WriteHooks: blobstore.WriteHooks{Sleep: clock.sleep,
		Step: func(ctx context.Context, step blobstore.WriteStep) error {
			if step == blobstore.RootStored {
				mem.Set(blobstore.Layout{}.SweepWindowsPrefix()+"20261205T115959Z-60s-gc", nil)
				for _, k := range mem.Keys(blobstore.Layout{}.BlobsPrefix()) {
					mem.Delete(ctx, k)
				}
			}
			return nil
		}}})
	c, err := store.Checkpoints().Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if rerr := hcRestores(ctx, mem, c.ID); rerr != nil {
		t.Fatalf("does not restore: %v (stored again %d)", rerr, c.Stats.StoredAgainBlobs)
	}
}

// droppingStore acknowledges Puts of drop without storing them once armed (a proxy answering for
// the server), and can fail Deletes under a prefix.
type droppingStore struct {
	*blobstore.MemObjectStore
	mu          sync.Mutex
	drop        string
	armed       bool
	failDeletes string
}

func (s *droppingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	s.mu.Lock()
	drop := s.armed && key == s.drop
	s.mu.Unlock()
	if drop {
		_, err := io.Copy(io.Discard, r)
		return err
	}
	return s.MemObjectStore.Put(ctx, key, r, size)
}

func (s *droppingStore) Delete(ctx context.Context, key string) error {
	if s.failDeletes != "" && strings.HasPrefix(key, s.failDeletes) {
		return errors.New("503 slow down")
	}
	return s.MemObjectStore.Delete(ctx, key)
}

// Found (lying store), fixed: the capture stores a lost blob again and does not check the store
// holds it, as a push's restoreMissing does (confirm). A store that acknowledges without storing
// gives a successful capture with a hole in it.
func TestHostileCaptureStoreAgainNotConfirmed(t *testing.T) {
	ctx := context.Background()
	clock := &manualClock{now: hcT0}
	mem := blobstore.NewMemObjectStore()
	mem.Clock = clock.get
	a := "the bytes a sweep deletes\n"
	ws := hcWorkspace(t, map[string]string{"a.txt": a, "b.txt": "kept\n"})
	ds := &droppingStore{MemObjectStore: mem, drop: hcBlobKey(a)}
	store := blobstore.NewSessionStore(ds, blobstore.Layout{}, blobstore.StoreOptions{WriteHooks: blobstore.WriteHooks{Sleep: clock.sleep,
		Step: func(ctx context.Context, step blobstore.WriteStep) error {
			if step == blobstore.RootStored {
				mem.Set(blobstore.Layout{}.SweepWindowsPrefix()+"20261205T115959Z-60s-gc", nil)
				ds.mu.Lock()
				ds.armed = true
				ds.mu.Unlock()
				return mem.Delete(ctx, hcBlobKey(a))
			}
			return nil
		}}})
	c, err := store.Checkpoints().Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}})
	if err != nil {
		t.Logf("capture failed (good): %v", err)
		return
	}
	if rerr := hcRestores(ctx, mem, c.ID); rerr != nil {
		t.Errorf("the capture succeeded (stored again %d) but checkpoint %s does not restore: %v", c.Stats.StoredAgainBlobs, c.ID, rerr)
	}
}

// Found, fixed: withdraw's Delete fails; the error says "delete it", but the checkpoint stays
// listed and the next capture of the unchanged workspace returns it as a success.
func TestHostileCaptureWithdrawDeleteFails(t *testing.T) {
	ctx := context.Background()
	clock := &manualClock{now: hcT0}
	mem := blobstore.NewMemObjectStore()
	mem.Clock = clock.get
	a := "the bytes a sweep deletes\n"
	ws := hcWorkspace(t, map[string]string{"a.txt": a, "b.txt": "kept\n"})
	ds := &droppingStore{MemObjectStore: mem, failDeletes: blobstore.Layout{}.CheckpointsPrefix()}
	store := blobstore.NewSessionStore(ds, blobstore.Layout{}, blobstore.StoreOptions{WriteHooks: blobstore.WriteHooks{Sleep: clock.sleep,
		Step: func(ctx context.Context, step blobstore.WriteStep) error {
			if step == blobstore.RootStored {
				mem.Set(blobstore.Layout{}.SweepWindowsPrefix()+"20261205T115959Z-60s-gc", nil)
				// changed after it was read: cannot be stored again
				p := filepath.Join(ws, "a.txt")
				os.WriteFile(p, []byte("changed\n"), 0o644)
				return mem.Delete(ctx, hcBlobKey(a))
			}
			return nil
		}}})
	_, err := store.Checkpoints().Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}})
	if err == nil {
		t.Fatal("capture succeeded")
	}
	t.Logf("capture error: %v", err)
	if ids := hcListed(ctx, t, mem); len(ids) > 0 && strings.Contains(err.Error(), "is withdrawn") {
		t.Errorf("the error says the checkpoint is withdrawn, yet %v is still listed (the delete failed)", ids)
	}
	// Put the file back as it was captured (an agent reverting its edit), mtime and all is not
	// needed: any later capture whose files equal the broken checkpoint's is folded into it.
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte(a), 0o644)
	clock.add(time.Hour)
	next := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{}).Checkpoints()
	c, err := next.Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 2}})
	if err != nil {
		t.Fatalf("next capture: %v", err)
	}
	if rerr := hcRestores(ctx, mem, c.ID); rerr != nil {
		t.Errorf("the next capture returned checkpoint %s (new=%v), which does not restore: %v", c.ID, c.New, rerr)
	}
}

// A window record dated far in the future (a sweeping host whose clock ran ahead, or any writer of
// gc/windows/) is never removed (records go a day after they close) and fails every capture; each
// failed capture also leaves its manifest listed.
func TestHostileCaptureFutureWindowRecord(t *testing.T) {
	ctx := context.Background()
	clock := &manualClock{now: hcT0}
	mem := blobstore.NewMemObjectStore()
	mem.Clock = clock.get
	mem.Set(blobstore.Layout{}.SweepWindowsPrefix()+"20991231T000000Z-60s-gc", nil)
	ws := hcWorkspace(t, map[string]string{"a.txt": "one\n"})
	store := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{WriteHooks: blobstore.WriteHooks{Sleep: clock.sleep}})
	_, err := store.Checkpoints().Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}})
	t.Logf("capture: %v", err)
	if err != nil {
		if ids := hcListed(ctx, t, mem); len(ids) != 0 {
			t.Errorf("the capture failed, yet checkpoint(s) %v are listed", ids)
		}
	}
	// A sweep does not remove it either.
	clock.add(48 * time.Hour)
	hcSweep(ctx, t, mem, clock)
	if len(mem.Keys(blobstore.Layout{}.SweepWindowsPrefix()+"2099")) != 0 {
		t.Logf("the future record survives a sweep: every later push and capture fails until someone deletes it by hand")
	}
}

// Garbage under gc/windows/ makes every capture check every blob; held as long as it is correct.
func TestHostileCaptureGarbageWindowRecords(t *testing.T) {
	ctx := context.Background()
	for _, rec := range []string{"", "x", "-", "20261205T115959Z--gc", "20261205T115959Z-0s-gc", "20261205T115959Z-60s-", "20261205T115959Z-60s-a/b",
		"../../blobs", "20261205T115959Z-9223372036854775807s-gc", "20261205T115959Z--60s-gc", "20261205T115959Z-+60s-gc", "20261205t115959z-60s-gc"} {
		t.Run(rec, func(t *testing.T) {
			a := "the bytes a sweep deletes\n"
			clock := &manualClock{now: hcT0}
			mem := blobstore.NewMemObjectStore()
			mem.Clock = clock.get
			ws := hcWorkspace(t, map[string]string{"a.txt": a, "b.txt": "kept\n"})
			store := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{WriteHooks: blobstore.WriteHooks{Sleep: clock.sleep,
				Step: func(ctx context.Context, step blobstore.WriteStep) error {
					if step == blobstore.RootStored {
						mem.Set(blobstore.Layout{}.SweepWindowsPrefix()+rec, nil)
						return mem.Delete(ctx, hcBlobKey(a))
					}
					return nil
				}}})
			c, err := store.Checkpoints().Create(ctx, ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}})
			if err != nil {
				t.Logf("capture failed: %v", err)
				for _, id := range hcListed(ctx, t, mem) {
					if rerr := hcRestores(ctx, mem, id); rerr != nil {
						t.Errorf("failed capture left unrestorable %s listed: %v", id, rerr)
					}
				}
				return
			}
			if rerr := hcRestores(ctx, mem, c.ID); rerr != nil {
				t.Errorf("checkpoint %s does not restore: %v", c.ID, rerr)
			}
		})
	}
}
