package controller

import (
	"fmt"
	"maps"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// maxWritesPerSession is the most writes one session may cost on the steady path (its steadyChanges
// changes together), measured: the finalizer patch, the ResumePlan create, two Job creates, and up to
// three status patches of the session (Reconciling, Verified, the mirrored verdict) and three of its
// ResumePlan (waiting for the session, Job running, verdict). It is above the goal of 3 per change
// (steadyChanges × 3 = 9); see TestScaleWritesPerChange.
const maxWritesPerSession = 10

// TestScaleWritesPerChange runs the scale harness at a small size and asserts its properties: the
// no-op baseline writes once per session (so the counter counts), the controllers create each child
// exactly once per session, cost at most maxWritesPerSession writes per session, and never reconcile
// one change twice (a pass that writes after reading what an earlier pass read).
func TestScaleWritesPerChange(t *testing.T) {
	const n = 20
	noop := runScale(t, sideNoop, n, scaleWorkers, 2*time.Minute)
	t.Log(noop)
	for i := range n {
		if d := cmp.Diff(map[string]int{"patch AgentSession/status": 1}, noop.writes[scaleName(i)]); d != "" {
			t.Errorf("no-op writes of %s (-want +got):\n%s", scaleName(i), d)
		}
	}
	if len(noop.failedWrites) != 0 || len(noop.repeated) != 0 {
		t.Errorf("no-op: failed writes %v, repeated passes %v", noop.failedWrites, noop.repeated)
	}

	ours := runScale(t, sideControllers, n, scaleWorkers, 2*time.Minute)
	t.Log(ours)
	once := map[string]int{"patch AgentSession": 1, "create ResumePlan": 1, "create Job": 2}
	for i := range n {
		name := scaleName(i)
		got := map[string]int{}
		maps.Copy(got, ours.writes[name])
		for k := range got {
			if _, ok := once[k]; !ok {
				delete(got, k)
			}
		}
		if d := cmp.Diff(once, got); d != "" {
			t.Errorf("%s: the finalizer, the ResumePlan and the two Jobs, each written once (-want +got):\n%s", name, d)
		}
	}
	if got := ours.maxWrites(); got > maxWritesPerSession {
		t.Errorf("a session cost %d writes, more than %d (%.2f per change): %s", got, maxWritesPerSession, float64(got)/steadyChanges, ours.writeMix())
	}
	if len(ours.repeated) != 0 {
		t.Errorf("%d passes reconciled a change twice:\n%v", len(ours.repeated), ours.repeated)
	}
	// A pass that reads a cache which has not yet seen the controller's own last write has its write
	// refused (409 on the optimistic lock, or AlreadyExists) and runs again: a round trip wasted, never
	// a change written twice. How often depends on timing; a few per hundred sessions is usual.
	if got := sum(ours.failedWrites); got > n/2 {
		t.Errorf("%d write attempts refused for %d sessions: %v", got, n, ours.failedWrites)
	}
}

// BenchmarkControllersVsNoop measures the AgentSession and ResumePlan controllers against the no-op
// reconciler on the same API server (the comparison's terms are in scale_test.go): sessions/s for
// each, their ratio, and the API writes per session and per change. ARW_SCALE_SESSIONS sets the
// number of sessions (1,000 by default), ARW_SCALE_WORKERS every controller's MaxConcurrentReconciles.
func BenchmarkControllersVsNoop(b *testing.B) {
	n := envInt(b, "ARW_SCALE_SESSIONS", 1000)
	workers := envInt(b, "ARW_SCALE_WORKERS", scaleWorkers)
	for range b.N {
		noop := runScale(b, sideNoop, n, workers, 20*time.Minute)
		b.Log(noop)
		ours := runScale(b, sideControllers, n, workers, 20*time.Minute)
		b.Log(ours)
		for _, r := range ours.repeated[:min(10, len(ours.repeated))] {
			b.Log("repeated: ", r)
		}
		b.ReportMetric(noop.perSecond(), "noop-sessions/s")
		b.ReportMetric(ours.perSecond(), "sessions/s")
		b.ReportMetric(100*ours.perSecond()/noop.perSecond(), "%-of-noop")
		b.ReportMetric(ours.writesPerSession(), "writes/session")
		b.ReportMetric(ours.writesPerSession()/steadyChanges, "writes/session/change")
		b.ReportMetric(float64(len(ours.repeated)), "repeated-passes")
		b.ReportMetric(ours.cpuPerSession(), "apiserver-cpu-ms/session")
		b.ReportMetric(noop.cpuPerSession(), "noop-apiserver-cpu-ms/session")
		fmt.Fprintf(os.Stderr, "scale: %d sessions, %d workers: noop %.1f/s, controllers %.1f/s (%.0f %%), %.2f writes/session (%.2f per change); API server CPU %.1f vs %.1f ms/session\n",
			n, workers, noop.perSecond(), ours.perSecond(), 100*ours.perSecond()/noop.perSecond(), ours.writesPerSession(), ours.writesPerSession()/steadyChanges,
			ours.cpuPerSession(), noop.cpuPerSession())
	}
}

func envInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
