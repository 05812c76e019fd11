package blobsweep_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"

	"github.com/agentrewind/agentrewind/internal/testenv"
)

// The interleaving harness plays a writer (a push or a checkpoint capture) and a blob sweep against
// one in-memory store, one step at a time, in every order: each of them parks at every point its
// hooks name, and a scheduler picks who goes next, depth first over all choices. A third action,
// "age", moves the store's clock three days on, once: everything stored is then older than the
// margin, as after a writer stopped between its blobs and its root (a suspended laptop, a paused
// container) or objects stored again long after they were orphaned. Every step moves the clock one
// second; a writer waiting for a delete window to close moves it as far as it waits. After each
// schedule, a writer that succeeded must find every object its root references stored.

// interleaving is one run of the harness under a schedule.
type interleaving struct {
	mu     sync.Mutex
	now    time.Time
	aged   bool
	park   chan string // an actor says it parked, at what point ("" once it is done)
	resume map[string]chan struct{}
	live   map[string]bool
}

func (in *interleaving) clock() time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.now
}

func (in *interleaving) advance(d time.Duration) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.now = in.now.Add(d)
}

// yield parks actor until the scheduler resumes it.
func (in *interleaving) yield(ctx context.Context, actor, point string) error {
	in.park <- actor + ":" + point
	select {
	case <-in.resume[actor]:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fixture is what every schedule starts from and the write it plays.
type fixture struct {
	// orphan stores, three days before the schedule starts, objects the write will reuse, and
	// removes the roots that name them.
	orphan func(ctx context.Context, store *blobstore.SessionStore, mem *blobstore.MemObjectStore) error
	// write is the push or capture under test; root names what it stored, restored counts the
	// objects it stored again.
	write func(ctx context.Context, store *blobstore.SessionStore) (root string, restored int, err error)
	// missing lists the objects the root written references that the store lacks.
	missing func(t *testing.T, mem *blobstore.MemObjectStore, root string) []string
}

// outcome is what one schedule did.
type outcome struct {
	trace      []string
	committed  bool
	writeErr   error
	missing    []string
	deleted    int64
	restored   int
	choiceSeen []int // options at each decision
}

// storeWrap lets a mutation hide or bypass part of the fence.
type storeWrap func(*blobstore.MemObjectStore) (writeSide blobstore.ObjectStore, sweepSide blobsweep.Objects)

func plainStore(m *blobstore.MemObjectStore) (blobstore.ObjectStore, blobsweep.Objects) { return m, m }

func runInterleaving(t *testing.T, fx fixture, schedule []int, wrap storeWrap) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	in := &interleaving{now: start.Add(-72 * time.Hour), park: make(chan string),
		resume: map[string]chan struct{}{"write": make(chan struct{}), "sweep": make(chan struct{})},
		live:   map[string]bool{"write": true, "sweep": true}}
	mem := blobstore.NewMemObjectStore()
	mem.Clock = in.clock
	layout := blobstore.Layout{}
	writeSide, sweepSide := wrap(mem)

	// Three days ago: objects were stored, then the roots naming them deleted.
	if err := fx.orphan(ctx, blobstore.NewSessionStore(mem, layout, blobstore.StoreOptions{Parallelism: 2}), mem); err != nil {
		t.Fatal(err)
	}
	in.now = start

	var out outcome
	var wg sync.WaitGroup
	hooks := blobstore.WriteHooks{
		Step: func(ctx context.Context, step blobstore.WriteStep) error { return in.yield(ctx, "write", string(step)) },
		Sleep: func(ctx context.Context, d time.Duration) error {
			in.advance(d)
			return in.yield(ctx, "write", "waited "+d.String())
		},
	}
	store := blobstore.NewSessionStore(writeSide, layout, blobstore.StoreOptions{Parallelism: 2, WriteHooks: hooks})
	var root string
	wg.Go(func() {
		defer func() { in.park <- "write:" }()
		if in.yield(ctx, "write", "begin") != nil {
			return
		}
		var err error
		root, out.restored, err = fx.write(ctx, store)
		out.writeErr = err
		out.committed = err == nil
	})
	sweepHook := func(point string) func(context.Context) error {
		return func(ctx context.Context) error { return in.yield(ctx, "sweep", point) }
	}
	wg.Go(func() {
		defer func() { in.park <- "sweep:" }()
		if in.yield(ctx, "sweep", "begin") != nil {
			return
		}
		rep, err := blobsweep.Run(ctx, sweepSide, blobsweep.Options{Layout: layout, Margin: time.Hour, Window: time.Minute,
			Lock: &blobsweep.MemLock{}, Holder: "sweep", Clock: in.clock, Parallelism: 2, NoCache: true,
			Hooks: blobsweep.Hooks{AfterMark: sweepHook("marked"), AfterList: sweepHook("listed"),
				AfterWindowRecorded: sweepHook("window recorded"), AfterRemark: sweepHook("re-marked"), AfterDelete: sweepHook("deleted a batch")}})
		if rep != nil {
			out.deleted = rep.Deleted
		}
		if err != nil && ctx.Err() == nil {
			t.Errorf("the sweep failed: %v", err)
		}
	})

	parked := map[string]string{}
	arrive := func() {
		ev := <-in.park
		actor, point, _ := strings.Cut(ev, ":")
		if point == "" {
			delete(in.live, actor)
			delete(parked, actor)
			return
		}
		parked[actor] = point
	}
	arrive()
	arrive()
	for decision := 0; len(in.live) > 0; decision++ {
		options := slices.Sorted(func(yield func(string) bool) {
			for a := range parked {
				if !yield(a) {
					return
				}
			}
		})
		if !in.aged {
			options = append(options, "age")
		}
		choice := 0
		if decision < len(schedule) {
			choice = schedule[decision]
		}
		out.choiceSeen = append(out.choiceSeen, len(options))
		pick := options[choice]
		in.advance(time.Second)
		if pick == "age" {
			in.aged = true
			in.advance(72 * time.Hour)
			out.trace = append(out.trace, "age")
			continue
		}
		out.trace = append(out.trace, pick+"@"+parked[pick])
		delete(parked, pick)
		in.resume[pick] <- struct{}{}
		arrive()
	}
	wg.Wait()
	if out.committed {
		out.missing = fx.missing(t, mem, root)
	}
	return out
}

type summary struct {
	schedules, committed, deleting, restoring, losing int
	firstLoss                                         outcome
}

func explore(t *testing.T, fx fixture, wrap storeWrap, stopAtLoss bool) summary {
	var sum summary
	for schedule := []int{}; schedule != nil; {
		out := runInterleaving(t, fx, schedule, wrap)
		if t.Failed() {
			t.Fatalf("under schedule %v", out.trace)
		}
		sum.schedules++
		if out.committed {
			sum.committed++
		}
		if out.deleted > 0 {
			sum.deleting++
		}
		if out.restored > 0 {
			sum.restoring++
		}
		if len(out.missing) > 0 {
			if sum.losing == 0 {
				sum.firstLoss = out
			}
			sum.losing++
			if stopAtLoss {
				return sum
			}
		}
		schedule = testenv.NextSchedule(schedule, out.choiceSeen)
	}
	return sum
}

// pushFixture pushes a session that reuses blobs of one pushed three days before and orphaned.
func pushFixture(t *testing.T) fixture {
	old, _ := record(t, "old", 1, 2)
	fresh, _ := record(t, "fresh", 1, 2, 3)
	mem := blobstore.NewMemObjectStore()
	if _, err := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{}).Push(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	needs := mem.Keys(blobstore.Layout{}.BlobsPrefix())
	return fixture{
		orphan: func(ctx context.Context, store *blobstore.SessionStore, mem *blobstore.MemObjectStore) error {
			if _, err := store.Push(ctx, old); err != nil {
				return err
			}
			return mem.DeleteKeys(ctx, mem.Keys(store.Layout().SessionsPrefix()))
		},
		write: func(ctx context.Context, store *blobstore.SessionStore) (string, int, error) {
			res, err := store.Push(ctx, fresh)
			if err != nil {
				return "", 0, err
			}
			return "fresh", res.ObjectsRestored, nil
		},
		missing: func(_ *testing.T, mem *blobstore.MemObjectStore, _ string) []string {
			var missing []string
			for _, k := range needs {
				if _, ok := mem.Bytes(k); !ok {
					missing = append(missing, k)
				}
			}
			return missing
		},
	}
}

// captureFixture takes a checkpoint of a workspace whose files, and the manifest chunk naming them,
// a checkpoint of it deleted three days before left stored.
func captureFixture(t *testing.T) fixture {
	ws := t.TempDir()
	for i, name := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(ws, name), payloadJSON(uint64(i+1), 4096), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	anchor := checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "run", Turn: 1}}
	return fixture{
		orphan: func(ctx context.Context, store *blobstore.SessionStore, mem *blobstore.MemObjectStore) error {
			if _, err := store.Checkpoints().Create(ctx, ws, anchor); err != nil {
				return err
			}
			return mem.DeleteKeys(ctx, mem.Keys(store.Layout().CheckpointsPrefix()))
		},
		write: func(ctx context.Context, store *blobstore.SessionStore) (string, int, error) {
			c, err := store.Checkpoints().Create(ctx, ws, anchor)
			if err != nil {
				return "", 0, err
			}
			return c.ID, c.Stats.StoredAgainBlobs, nil
		},
		missing: func(t *testing.T, mem *blobstore.MemObjectStore, id string) []string {
			store := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{})
			m, err := store.Checkpoints().Load(context.Background(), id)
			if err != nil {
				return []string{fmt.Sprintf("checkpoint %s: %v", id, err)}
			}
			if len(m.Files) != 2 {
				t.Errorf("checkpoint %s holds %d files, want 2", id, len(m.Files))
			}
			var missing []string
			for _, e := range m.Files {
				if _, ok := mem.Bytes(store.Layout().Blob(e.Hash)); !ok {
					missing = append(missing, e.Path)
				}
			}
			return missing
		},
	}
}

// writers are the writes the harness plays against a sweep.
var writers = map[string]func(*testing.T) fixture{"push": pushFixture, "checkpoint capture": captureFixture}

// No schedule of a push or a capture and a sweep, with or without a pause long enough to age every
// object, lets the write succeed with a root that references an object the sweep deleted. The
// schedules include the sweep deleting the reused objects and the writer storing them again, which
// the summary checks, so the property is not held by a sweep that never deletes.
func TestNoInterleavingOfAWriteAndASweepLeavesAHole(t *testing.T) {
	for name, newFixture := range writers {
		t.Run(name, func(t *testing.T) {
			sum := explore(t, newFixture(t), plainStore, false)
			t.Logf("%d schedules: %d succeeded, %d with deletions, %d with objects stored again", sum.schedules, sum.committed, sum.deleting, sum.restoring)
			if sum.losing > 0 {
				t.Fatalf("%d of %d schedules succeeded with objects missing; the first: %v missing %v",
					sum.losing, sum.schedules, sum.firstLoss.trace, sum.firstLoss.missing)
			}
			if sum.deleting == 0 || sum.restoring == 0 || sum.committed < sum.schedules/2 {
				t.Fatalf("the schedules never had the sweep delete (%d) or the writer store again (%d), or rarely succeed (%d of %d): they prove nothing",
					sum.deleting, sum.restoring, sum.committed, sum.schedules)
			}
		})
	}
}

// hiddenWindows is a writer's view of the store without the sweeps' window records.
type hiddenWindows struct{ *blobstore.MemObjectStore }

func (h hiddenWindows) List(ctx context.Context, prefix string) ([]blobstore.ObjectInfo, error) {
	if prefix == (blobstore.Layout{}).SweepWindowsPrefix() {
		return nil, nil
	}
	return h.MemObjectStore.List(ctx, prefix)
}

// unfenced is a sweep's view of a store that ignores delete windows, as a plain delete does.
type unfenced struct{ *blobstore.MemObjectStore }

func (u unfenced) DeleteKeysIn(ctx context.Context, _ blobstore.DeleteWindow, keys []string) error {
	return u.DeleteKeys(ctx, keys)
}

// The harness finds the loss each half of the fence prevents, for each writer: one that does not
// see the windows succeeds before a sweep's deletes land, and a sweep whose deletes the store does
// not bound deletes after the writer waited for its window to close.
func TestTheInterleavingHarnessFindsALossWithoutTheFence(t *testing.T) {
	for writer, newFixture := range writers {
		fx := newFixture(t)
		for name, wrap := range map[string]storeWrap{
			"writer ignores the windows": func(m *blobstore.MemObjectStore) (blobstore.ObjectStore, blobsweep.Objects) {
				return hiddenWindows{m}, m
			},
			"store ignores the windows": func(m *blobstore.MemObjectStore) (blobstore.ObjectStore, blobsweep.Objects) {
				return m, unfenced{m}
			},
		} {
			t.Run(writer+"/"+name, func(t *testing.T) {
				sum := explore(t, fx, wrap, true)
				if sum.losing == 0 {
					t.Fatalf("no schedule of %d lost an object: the harness cannot tell the fence from its absence", sum.schedules)
				}
				t.Logf("lost %v after %v", sum.firstLoss.missing, sum.firstLoss.trace)
			})
		}
	}
}
