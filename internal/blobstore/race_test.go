package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/testenv"
)

// The race harness plays two pushes under one session id against one in-memory store, one request
// at a time, in every order: each push parks before every request it makes on the session's own
// objects (a read, a write, a create or a delete; the HEADs that confirm an upload are not choices),
// and a scheduler picks who goes next, depth first over all choices. Blobs and segments are
// content-addressed and shared by design, so their requests are not choices either.

// raceSched is one run of the harness under a schedule.
type raceSched struct {
	park   chan string // an actor says it parked, at what request ("" once it is done)
	resume map[string]chan struct{}
}

func (r *raceSched) yield(ctx context.Context, actor, point string) error {
	r.park <- actor + ":" + point
	select {
	case <-r.resume[actor]:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// racer is one push's view of the store: it parks before each request on the session's objects.
type racer struct {
	store  CreatingStore
	sched  *raceSched
	actor  string
	prefix string
}

func (r racer) park(ctx context.Context, op, key string) error {
	if !strings.HasPrefix(key, r.prefix) {
		return nil
	}
	return r.sched.yield(ctx, r.actor, op+" "+path.Base(key))
}

func (r racer) Put(ctx context.Context, key string, rd io.Reader, size int64) error {
	if err := r.park(ctx, "put", key); err != nil {
		return err
	}
	return r.store.Put(ctx, key, rd, size)
}

func (r racer) Create(ctx context.Context, key string, rd io.Reader, size int64) error {
	if err := r.park(ctx, "create", key); err != nil {
		return err
	}
	return r.store.Create(ctx, key, rd, size)
}

func (r racer) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := r.park(ctx, "get", key); err != nil {
		return nil, err
	}
	return r.store.Get(ctx, key)
}

func (r racer) Delete(ctx context.Context, key string) error {
	if err := r.park(ctx, "delete", key); err != nil {
		return err
	}
	return r.store.Delete(ctx, key)
}

func (r racer) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := r.park(ctx, "list", prefix+"*"); err != nil {
		return nil, err
	}
	return r.store.List(ctx, prefix)
}

func (r racer) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	return r.store.Stat(ctx, key)
}

// raceOutcome is what one schedule did.
type raceOutcome struct {
	trace      []string
	errs       map[string]error
	choiceSeen []int
}

// raceFixture is two local sessions under one id, and what the store must hold after either wins.
type raceFixture struct {
	dirs map[string]string // by actor
	// same says the two are one session: both pushes must succeed.
	same bool
	// before, when set, stores what an earlier push of a third session left under the id.
	before func(mem *MemObjectStore)
}

// storeWrapper lets a mutation take away part of the protection.
type storeWrapper func(*MemObjectStore) CreatingStore

func memCreating(m *MemObjectStore) CreatingStore { return m }

func runRace(t *testing.T, fx raceFixture, schedule []int, wrap storeWrapper) (raceOutcome, *MemObjectStore) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sched := &raceSched{park: make(chan string), resume: map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}}
	mem := NewMemObjectStore()
	if fx.before != nil {
		fx.before(mem)
	}
	objs := wrap(mem)
	out := raceOutcome{errs: map[string]error{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, actor := range []string{"a", "b"} {
		store := NewSessionStore(racer{store: objs, sched: sched, actor: actor, prefix: Layout{}.SessionsPrefix() + "run/"},
			Layout{}, StoreOptions{Parallelism: 1})
		wg.Go(func() {
			defer func() { sched.park <- actor + ":" }()
			if sched.yield(ctx, actor, "begin") != nil {
				return
			}
			_, err := store.Push(ctx, fx.dirs[actor])
			mu.Lock()
			out.errs[actor] = err
			mu.Unlock()
		})
	}
	parked, live := map[string]string{}, map[string]bool{"a": true, "b": true}
	arrive := func() {
		actor, point, _ := strings.Cut(<-sched.park, ":")
		if point == "" {
			delete(live, actor)
			delete(parked, actor)
			return
		}
		parked[actor] = point
	}
	arrive()
	arrive()
	for decision := 0; len(live) > 0; decision++ {
		options := slices.Sorted(func(yield func(string) bool) {
			for a := range parked {
				if !yield(a) {
					return
				}
			}
		})
		choice := 0
		if decision < len(schedule) {
			choice = schedule[decision]
		}
		out.choiceSeen = append(out.choiceSeen, len(options))
		pick := options[choice]
		out.trace = append(out.trace, pick+"@"+parked[pick])
		delete(parked, pick)
		sched.resume[pick] <- struct{}{}
		arrive()
	}
	wg.Wait()
	return out, mem
}

// raceVerdict checks one schedule's end: the pushes' answers, and the store holding exactly the
// winner's session, which pulls as the winner recorded it. It returns what is wrong, "" when nothing.
func raceVerdict(t *testing.T, fx raceFixture, out raceOutcome, mem *MemObjectStore, solo map[string][]string, seen map[string]string) string {
	t.Helper()
	var winners []string
	for _, actor := range []string{"a", "b"} {
		err := out.errs[actor]
		var conflict *ConflictError
		switch {
		case err == nil:
			winners = append(winners, actor)
		case fx.same || !errors.As(err, &conflict):
			return "push " + actor + " failed other than with a conflict: " + err.Error()
		}
	}
	switch {
	case fx.same && len(winners) != 2:
		return "a push of the same session failed"
	case !fx.same && len(winners) != 1:
		return "both pushes of different content under one id succeeded"
	}
	// Most schedules end in one of a few stores: pull each (store, winner) once.
	winner := winners[0]
	end := winner + "\n" + storeDigest(mem)
	if verdict, ok := seen[end]; ok {
		return verdict
	}
	verdict := winnerPulls(t, fx, winner, mem, solo)
	seen[end] = verdict
	return verdict
}

// storeDigest names what the store holds: every key with its content's hash.
func storeDigest(mem *MemObjectStore) string {
	h := sha256.New()
	for _, key := range mem.Keys("") {
		data, _ := mem.Bytes(key)
		sum := sha256.Sum256(data)
		fmt.Fprintf(h, "%s %x\n", key, sum)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// winnerPulls checks that the store holds exactly the winner's session, which pulls as recorded.
func winnerPulls(t *testing.T, fx raceFixture, winner string, mem *MemObjectStore, solo map[string][]string) string {
	t.Helper()
	pulled := filepath.Join(t.TempDir(), "pulled")
	if _, err := NewSessionStore(mem, Layout{}, StoreOptions{}).Pull(context.Background(), "run", pulled); err != nil {
		return "the winner's session does not pull: " + err.Error()
	}
	want, got := sessionFiles(t, fx.dirs[winner]), sessionFiles(t, pulled)
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			return "the pulled session is not the winner's: " + name + " differs"
		}
	}
	if keys := mem.Keys(Layout{}.SessionsPrefix()); !fx.same && fx.before == nil && !slices.Equal(keys, solo[winner]) {
		return "the store holds " + strings.Join(keys, " ") + " under the session, not just the winner's " + strings.Join(solo[winner], " ")
	}
	return ""
}

// soloKeys are the session keys a push of each local session stores on its own.
func soloKeys(t *testing.T, fx raceFixture) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for actor, dir := range fx.dirs {
		mem := NewMemObjectStore()
		if _, err := NewSessionStore(mem, Layout{}, StoreOptions{}).Push(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
		out[actor] = mem.Keys(Layout{}.SessionsPrefix())
	}
	return out
}

type raceSummary struct {
	schedules, conflictsAtCommit int
	firstBad                     string
	firstTrace                   []string
}

func exploreRaces(t *testing.T, fx raceFixture, wrap storeWrapper, stopAtBad bool) raceSummary {
	t.Helper()
	solo := soloKeys(t, fx)
	seen := map[string]string{}
	var sum raceSummary
	for schedule := []int{}; schedule != nil; {
		out, mem := runRace(t, fx, schedule, wrap)
		sum.schedules++
		for _, err := range out.errs {
			var conflict *ConflictError
			if errors.As(err, &conflict) && conflict.Raced {
				sum.conflictsAtCommit++
			}
		}
		if bad := raceVerdict(t, fx, out, mem, solo, seen); bad != "" && sum.firstBad == "" {
			sum.firstBad, sum.firstTrace = bad, out.trace
			if stopAtBad {
				return sum
			}
		}
		schedule = testenv.NextSchedule(schedule, out.choiceSeen)
	}
	return sum
}

// raceFixtures are the races a push may be in: two different sessions; two that differ only in
// meta.json (one index and vault); one session pushed twice; and two different sessions where an
// interrupted push of a third left its objects under the id.
func raceFixtures(t *testing.T) map[string]raceFixture {
	root := t.TempDir()
	rec := func(name string, seed uint64, vault []byte) string {
		dir := filepath.Join(root, name)
		recordSession(t, dir, "run", "", payloads(seed, 3, 2<<10), vault)
		return dir
	}
	a, b := rec("a", 1, testVault), rec("b", 100, sealedBytes(7, 64))
	twin := filepath.Join(root, "twin")
	if err := os.CopyFS(twin, os.DirFS(a)); err != nil {
		t.Fatal(err)
	}
	metaPath := filepath.Join(twin, "meta.json")
	meta := mustRead(t, metaPath)
	other := regexp.MustCompile(`"createdAt":\s*\d+`).ReplaceAll(meta, []byte(`"createdAt":1`))
	if bytes.Equal(other, meta) {
		t.Fatal("the twin's meta.json is not changed")
	}
	if err := os.WriteFile(metaPath, other, 0o644); err != nil {
		t.Fatal(err)
	}
	third := rec("third", 500, sealedBytes(9, 64))
	interrupted := func(mem *MemObjectStore) {
		// A push of the third session that stopped before meta.json: everything but the commit.
		setup := NewSessionStore(mem, Layout{}, StoreOptions{})
		if _, err := setup.Push(context.Background(), third); err != nil {
			t.Fatal(err)
		}
		_ = mem.Delete(context.Background(), Layout{}.SessionMeta("run"))
	}
	return map[string]raceFixture{
		"different sessions":             {dirs: map[string]string{"a": a, "b": b}},
		"the same log, another meta":     {dirs: map[string]string{"a": a, "b": twin}},
		"one session twice":              {dirs: map[string]string{"a": a, "b": a}, same: true},
		"over an interrupted third push": {dirs: map[string]string{"a": a, "b": b}, before: interrupted},
	}
}

// No order of two pushes' requests under one id lets both commit different content, lets the loser
// be told it pushed, or leaves the winner's session damaged or mixed with the loser's objects. The
// summary checks that some schedules reach the commit together, so the property is not held by
// pushes that never race.
func TestNoInterleavingOfTwoPushesUnderOneIDLosesAnUpdate(t *testing.T) {
	for name, fx := range raceFixtures(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sum := exploreRaces(t, fx, memCreating, true)
			t.Logf("%d schedules, %d lost at the commit", sum.schedules, sum.conflictsAtCommit)
			if sum.firstBad != "" {
				t.Fatalf("%s, under %v", sum.firstBad, sum.firstTrace)
			}
			if !fx.same && sum.conflictsAtCommit == 0 {
				t.Fatal("no schedule had the loser find meta.json taken at its commit: the schedules prove nothing")
			}
		})
	}
}

// overwriting is a store that ignores If-None-Match: a create replaces what is there.
type overwriting struct{ *MemObjectStore }

func (o overwriting) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	return o.Put(ctx, key, r, size)
}

// sharedNames is a store where a session's index and vault have one name each, as before they were
// named by their hash: the loser's replace the winner's.
type sharedNames struct{ *MemObjectStore }

var hashedName = regexp.MustCompile(`/(segments|vault)\.[0-9a-f]{64}\.`)

func shared(key string) string { return hashedName.ReplaceAllString(key, "/$1.") }

func (s sharedNames) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.MemObjectStore.Put(ctx, shared(key), r, size)
}
func (s sharedNames) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.MemObjectStore.Get(ctx, shared(key))
}
func (s sharedNames) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	return s.MemObjectStore.Stat(ctx, shared(key))
}
func (s sharedNames) Delete(ctx context.Context, key string) error {
	return s.MemObjectStore.Delete(ctx, shared(key))
}

// The harness finds the lost update each part of the protection prevents: without a conditional
// create both pushes commit, and with one name for every session's index and vault the loser's
// replace the winner's.
func TestTheRaceHarnessFindsALostUpdateWithoutTheProtection(t *testing.T) {
	fx := raceFixtures(t)["different sessions"]
	for name, wrap := range map[string]storeWrapper{
		"a store that ignores If-None-Match": func(m *MemObjectStore) CreatingStore { return overwriting{m} },
		"one name per index and vault":       func(m *MemObjectStore) CreatingStore { return sharedNames{m} },
	} {
		t.Run(name, func(t *testing.T) {
			sum := exploreRaces(t, fx, wrap, true)
			if sum.firstBad == "" {
				t.Fatalf("no schedule of %d went wrong: the harness cannot tell the protection from its absence", sum.schedules)
			}
			t.Logf("%s, under %v", sum.firstBad, sum.firstTrace)
		})
	}
}
