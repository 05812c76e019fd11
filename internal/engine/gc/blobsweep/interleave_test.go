package blobsweep_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"

	"github.com/agentrewind/agentrewind/internal/testenv"
)

// The interleaving harness plays a push and a blob sweep against one in-memory store, one step at a
// time, in every order: each of them parks at every point its hooks name, and a scheduler picks who
// goes next, depth first over all choices. A third action, "age", moves the store's clock three
// days on, once: everything stored is then older than the margin, as after a push stopped between
// its blobs and its commit (a suspended laptop, a paused container) or a session pushed again long
// after its blobs were orphaned. Every step moves the clock one second; a push waiting for a delete
// window to close moves it as far as it waits. After each schedule, a push that committed must find
// every object it references stored.

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

// fixture is what every schedule starts from: the local sessions and the keys the new one needs.
type fixture struct {
	old, fresh string   // the session whose blobs were orphaned, and the one pushed again with them
	needs      []string // the blob and segment keys a push of fresh stores
}

// outcome is what one schedule did.
type outcome struct {
	trace      []string
	committed  bool
	pushErr    error
	missing    []string
	deleted    int64
	restored   int
	choiceSeen []int // options at each decision
}

// storeWrap lets a mutation hide or bypass part of the fence.
type storeWrap func(*blobstore.MemObjectStore) (pushSide blobstore.ObjectStore, sweepSide blobsweep.Objects)

func plainStore(m *blobstore.MemObjectStore) (blobstore.ObjectStore, blobsweep.Objects) { return m, m }

func runInterleaving(t *testing.T, fx fixture, schedule []int, wrap storeWrap) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	in := &interleaving{now: start.Add(-72 * time.Hour), park: make(chan string),
		resume: map[string]chan struct{}{"push": make(chan struct{}), "sweep": make(chan struct{})},
		live:   map[string]bool{"push": true, "sweep": true}}
	mem := blobstore.NewMemObjectStore()
	mem.Clock = in.clock
	layout := blobstore.Layout{}
	pushSide, sweepSide := wrap(mem)

	// Three days ago: the old session was pushed; then its record was deleted, orphaning its blobs.
	setup := blobstore.NewSessionStore(mem, layout, blobstore.StoreOptions{Parallelism: 2})
	if _, err := setup.Push(ctx, fx.old); err != nil {
		t.Fatal(err)
	}
	for _, k := range mem.Keys(layout.SessionsPrefix()) {
		_ = mem.Delete(ctx, k)
	}
	in.now = start

	var out outcome
	var wg sync.WaitGroup
	hooks := blobstore.PushHooks{
		Step: func(ctx context.Context, step blobstore.PushStep) error { return in.yield(ctx, "push", string(step)) },
		Sleep: func(ctx context.Context, d time.Duration) error {
			in.advance(d)
			return in.yield(ctx, "push", "waited "+d.String())
		},
	}
	store := blobstore.NewSessionStore(pushSide, layout, blobstore.StoreOptions{Parallelism: 2, PushHooks: hooks})
	wg.Go(func() {
		defer func() { in.park <- "push:" }()
		if in.yield(ctx, "push", "begin") != nil {
			return
		}
		res, err := store.Push(ctx, fx.fresh)
		out.pushErr = err
		if err == nil {
			out.committed = true
			out.restored = res.ObjectsRestored
		}
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
		for _, k := range fx.needs {
			if _, ok := mem.Bytes(k); !ok {
				out.missing = append(out.missing, k)
			}
		}
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

func interleavingFixture(t *testing.T) fixture {
	old, _ := record(t, "old", 1, 2)
	fresh, _ := record(t, "fresh", 1, 2, 3)
	mem := blobstore.NewMemObjectStore()
	if _, err := blobstore.NewSessionStore(mem, blobstore.Layout{}, blobstore.StoreOptions{}).Push(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	return fixture{old: old, fresh: fresh, needs: mem.Keys(blobstore.Layout{}.BlobsPrefix())}
}

// No schedule of a push and a sweep, with or without a pause long enough to age every object, lets
// the push commit a session that references an object the sweep deleted. The schedules include the
// sweep deleting the push's reused blobs and the push storing them again, which the summary checks,
// so the property is not held by a sweep that never deletes.
func TestNoInterleavingOfPushAndSweepCommitsAHole(t *testing.T) {
	fx := interleavingFixture(t)
	sum := explore(t, fx, plainStore, false)
	t.Logf("%d schedules: %d committed, %d with deletions, %d with objects stored again", sum.schedules, sum.committed, sum.deleting, sum.restoring)
	if sum.losing > 0 {
		t.Fatalf("%d of %d schedules committed a session with objects missing; the first: %v missing %v",
			sum.losing, sum.schedules, sum.firstLoss.trace, sum.firstLoss.missing)
	}
	if sum.deleting == 0 || sum.restoring == 0 || sum.committed < sum.schedules/2 {
		t.Fatalf("the schedules never had the sweep delete (%d) or the push store again (%d), or rarely commit (%d of %d): they prove nothing",
			sum.deleting, sum.restoring, sum.committed, sum.schedules)
	}
}

// hiddenWindows is a push's view of the store without the sweeps' window records.
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

// The harness finds the loss each half of the fence prevents: a push that does not see the
// windows commits before a sweep's deletes land, and a sweep whose deletes the store does not bound
// deletes after the push waited for its window to close.
func TestTheInterleavingHarnessFindsALossWithoutTheFence(t *testing.T) {
	fx := interleavingFixture(t)
	for name, wrap := range map[string]storeWrap{
		"push ignores the windows": func(m *blobstore.MemObjectStore) (blobstore.ObjectStore, blobsweep.Objects) {
			return hiddenWindows{m}, m
		},
		"store ignores the windows": func(m *blobstore.MemObjectStore) (blobstore.ObjectStore, blobsweep.Objects) {
			return m, unfenced{m}
		},
	} {
		t.Run(name, func(t *testing.T) {
			sum := explore(t, fx, wrap, true)
			if sum.losing == 0 {
				t.Fatalf("no schedule of %d lost an object: the harness cannot tell the fence from its absence", sum.schedules)
			}
			t.Logf("lost %v after %v", sum.firstLoss.missing, sum.firstLoss.trace)
		})
	}
}
