package blobstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// faultySession is the session the fault tests move: blobs big enough that a truncated read loses
// real data, and enough of them that parallel uploads interleave.
func faultySession(t *testing.T) (string, session.Meta) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run-1")
	meta := writeSession(t, dir, "run-1", "", append(payloads(1, 2, 1<<20), payloads(10, 10, 24<<10)...))
	return dir, meta
}

// storeVia opens a session store reaching the server through endpoint, under prefix.
func (e *s3Env) storeVia(t *testing.T, endpoint, prefix string, timeout time.Duration) *SessionStore {
	t.Helper()
	cfg := e.config(endpoint)
	cfg.Prefix = prefix
	if timeout > 0 {
		cfg.RequestTimeout = timeout
	}
	objs := e.open(t, cfg)
	layout, err := NewLayout(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return NewSessionStore(objs, layout, StoreOptions{Parallelism: 4})
}

// TestS3SurvivesEachFaultOnce puts every request through one fault kind on its first attempt: the
// retries must absorb it, and the session must come back byte for byte. (A false 200 cannot be
// retried away, since it looks like success; the schedules test covers it.)
func TestS3SurvivesEachFaultOnce(t *testing.T) {
	env := startS3(t)
	env.open(t, env.config("")) // creates the bucket
	dir, meta := faultySession(t)
	for f := fault500; f <= faultStall; f++ {
		t.Run(f.String(), func(t *testing.T) {
			proxy := startFaultProxy(t, env.srv.Endpoint, uint64(f), map[fault]int{f: 1}, 1)
			proxy.stall = time.Second
			prefix := "each/" + f.String()
			store := env.storeVia(t, proxy.addr, prefix, 300*time.Millisecond)
			ctx := context.Background()
			if _, err := store.Push(ctx, dir); err != nil {
				t.Fatalf("push through %s faults: %v", f, err)
			}
			out := filepath.Join(t.TempDir(), "out")
			if _, err := store.Pull(ctx, meta.ID, out); err != nil {
				t.Fatalf("pull through %s faults: %v", f, err)
			}
			assertSameSession(t, dir, out)
			if got := streamAll(t, store, meta.ID); len(got) != 14 {
				t.Fatalf("streamed %d events through %s faults, want 14", len(got), f)
			}
			if proxy.counts()[f.String()] == 0 {
				t.Fatalf("the proxy injected no %s fault", f)
			}
		})
	}
}

// TestS3FaultSchedulesNeverCorruptACommittedSession pushes and pulls through seeded schedules of
// mixed faults. Bounded schedules (each request faulted at most twice, fewer than the attempts
// allowed) must succeed; hostile ones (faults on any attempt) and lying ones (false 200s too) may
// fail, but only with an error: a session that is listed
// always pulls back intact, no blob object ever holds bytes other than its hash's, a pull never
// returns wrong bytes, and a clean re-push completes what a failed one left.
func TestS3FaultSchedulesNeverCorruptACommittedSession(t *testing.T) {
	env := startS3(t)
	clean := env.open(t, env.config(""))
	dir, meta := faultySession(t)
	mixed := map[fault]int{faultNone: 40, fault500: 10, fault503: 10, faultResetBefore: 10, faultResetAfter: 10, faultTruncate: 10, faultLatency: 10}
	hostile := map[fault]int{faultNone: 50, fault500: 10, fault503: 10, faultResetBefore: 10, faultResetAfter: 10, faultTruncate: 10}
	lying := map[fault]int{faultNone: 80, fault503: 5, faultResetAfter: 5, faultTruncate: 5, faultFalseOK: 5}
	injected := map[string]int{}
	failures, hostilePushes := 0, map[bool]int{}
	for _, tc := range []struct {
		profile       string
		weights       map[fault]int
		maxPerRequest int
		seeds         []uint64
		mustSucceed   bool
	}{
		{"bounded", mixed, 2, []uint64{1, 2, 3, 4}, true},
		{"hostile", hostile, 1000, []uint64{11, 12, 13, 14, 15, 16}, false},
		{"lying", lying, 1000, []uint64{21, 22, 23}, false},
	} {
		for _, seed := range tc.seeds {
			name := fmt.Sprintf("%s/seed-%d", tc.profile, seed)
			t.Run(name, func(t *testing.T) {
				proxy := startFaultProxy(t, env.srv.Endpoint, seed, tc.weights, tc.maxPerRequest)
				prefix := "sched/" + tc.profile + "/" + fmt.Sprint(seed)
				layout, _ := NewLayout(prefix)
				cleanStore := NewSessionStore(clean, layout, StoreOptions{})
				faulty, err := openVia(env, proxy.addr, prefix)
				if err != nil {
					if tc.mustSucceed {
						t.Fatalf("open through a bounded schedule: %v", err)
					}
					failures++
					return
				}
				ctx := context.Background()
				_, pushErr := faulty.Push(ctx, dir)
				if pushErr != nil {
					failures++
				}
				if tc.mustSucceed && pushErr != nil {
					t.Fatalf("push through a bounded schedule: %v", pushErr)
				}
				if tc.profile == "hostile" {
					hostilePushes[pushErr == nil]++
				}
				assertCommittedIntact(t, cleanStore, dir, meta.ID, pushErr == nil)
				verifyStoredBlobs(t, clean, layout)

				out := filepath.Join(t.TempDir(), "faulty-pull")
				if _, err := faulty.Pull(ctx, meta.ID, out); err == nil {
					assertSameSession(t, dir, out)
				} else if tc.mustSucceed {
					t.Fatalf("pull through a bounded schedule: %v", err)
				} else if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
					t.Fatalf("a failed pull left %s behind", out)
				}

				if _, err := cleanStore.Push(ctx, dir); err != nil {
					t.Fatalf("clean re-push after the faulty one: %v", err)
				}
				assertCommittedIntact(t, cleanStore, dir, meta.ID, true)
				for k, v := range proxy.counts() {
					injected[k] += v
				}
			})
		}
	}
	t.Logf("faults injected: %v; failed operations: %d; hostile pushes that succeeded: %d, failed: %d", injected, failures, hostilePushes[true], hostilePushes[false])
	if hostilePushes[true] == 0 || hostilePushes[false] == 0 {
		t.Errorf("the hostile schedules should make some pushes fail and let some succeed, to check both outcomes: %v", hostilePushes)
	}
	for _, f := range []fault{fault500, fault503, faultResetBefore, faultResetAfter, faultTruncate, faultLatency, faultFalseOK} {
		if injected[f.String()] == 0 {
			t.Errorf("no %s fault was injected: the schedules do not exercise it", f)
		}
	}
}

func openVia(env *s3Env, endpoint, prefix string) (*SessionStore, error) {
	cfg := env.config(endpoint)
	cfg.Prefix = prefix
	objs, err := Open(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	layout, _ := NewLayout(prefix)
	return NewSessionStore(objs, layout, StoreOptions{Parallelism: 4}), nil
}

// assertCommittedIntact checks, through a fault-free store, that the session is either not listed
// or pulls back identical to dir; must says it has to be listed.
func assertCommittedIntact(t *testing.T, store *SessionStore, dir, id string, must bool) {
	t.Helper()
	list, err := store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		if must {
			t.Fatalf("session %s is not listed after a push that succeeded", id)
		}
		return
	}
	out := filepath.Join(t.TempDir(), "clean-pull")
	if _, err := store.Pull(context.Background(), id, out); err != nil {
		t.Fatalf("a listed session does not pull cleanly: %v", err)
	}
	assertSameSession(t, dir, out)
}

// TestS3ListResumesAcrossPagesThroughFaults lists more keys than fit in one page through a proxy
// that faults every page request once: the listing must come back complete, in order, without
// duplicates.
func TestS3ListResumesAcrossPagesThroughFaults(t *testing.T) {
	env := startS3(t)
	clean := env.open(t, env.config(""))
	ctx := context.Background()
	var want []string
	for i := range 1100 {
		want = append(want, fmt.Sprintf("many/%05d", i))
	}
	err := forEach(ctx, 8, want, func(ctx context.Context, key string) error {
		return clean.Put(ctx, key, strings.NewReader("x"), 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []fault{fault500, faultResetAfter, faultTruncate} {
		proxy := startFaultProxy(t, env.srv.Endpoint, 7, map[fault]int{f: 1}, 1)
		got := keys(t, env.open(t, env.config(proxy.addr)), "many/")
		if !slices.Equal(got, want) {
			t.Fatalf("list through %s faults: %d keys, want %d in order", f, len(got), len(want))
		}
		if proxy.counts()[f.String()] < 3 { // the bucket check and at least two pages
			t.Fatalf("the proxy injected %v: the listing did not span pages", proxy.counts())
		}
	}
}
