package controller

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// steadyWrites are the writes one session costs on the steady path, its steadyChanges changes
// together: created, the finalizer, the verify Job and the session's status (Reconciling); its verify
// Job finished, the session's status (Verified), the ResumePlan, made only then, the resume-plan Job
// and the plan's status (Job running); its resume-plan Job finished, the plan's status (the verdict)
// and the session's (the verdict mirrored for `kubectl get agentsessions`, whose Verdict and
// Reachability columns can only read the session's own fields). 9 writes, 3 per change: the goal.
var steadyWrites = map[string]int{
	"patch AgentSession": 1, "create Job": 2, "patch AgentSession/status": 3,
	"create ResumePlan": 1, "patch ResumePlan/status": 2,
}

// maxPassesPerSession is the most reconcile passes each controller may spend on one session that no
// refused write sent back: one per change it has work for. The session's controller reacts to the
// session's creation, its verify Job finishing and its plan's verdict; the plan's to its creation, the
// session's verification and its Job finishing. An event of a controller's own write (a finalizer, a
// status, a child's creation) starts no pass.
const maxPassesPerSession = steadyChanges

// TestScaleWritesPerChange runs the scale harness at a small size and asserts its properties: the
// no-op baseline writes once per session (so the counter counts); the controllers cost each session
// exactly steadyWrites, 3 writes per change; they spend at most maxPassesPerSession passes per
// session and controller, plus one per refused write; and they never reconcile one change twice (a
// pass that writes after reading what an earlier pass read).
func TestScaleWritesPerChange(t *testing.T) {
	const n = 20
	noop := runScale(t, sideNoop, n, scaleWorkers, 2*time.Minute, nil)
	t.Log(noop)
	for i := range n {
		if d := cmp.Diff(map[string]int{"patch AgentSession/status": 1}, noop.writes[scaleName(i)]); d != "" {
			t.Errorf("no-op writes of %s (-want +got):\n%s", scaleName(i), d)
		}
	}
	if len(noop.failedWrites) != 0 || len(noop.repeated) != 0 {
		t.Errorf("no-op: failed writes %v, repeated passes %v", noop.failedWrites, noop.repeated)
	}

	var restart restartFigures
	ours := runScale(t, sideControllers, n, scaleWorkers, 2*time.Minute, func(e *scaleEnv) {
		restart = e.measureRestart(sideControllers, n, scaleWorkers, time.Minute)
	})
	t.Log(ours)
	t.Log(restart)
	// A restart finds every session settled: it reads, and writes nothing (no status rewritten, no Job
	// made again, no plan re-judged).
	if restart.writes != 0 {
		t.Errorf("a manager restarted over %d settled sessions made %d writes, want none", n, restart.writes)
	}
	for i := range n {
		name := scaleName(i)
		if d := cmp.Diff(steadyWrites, ours.writes[name]); d != "" {
			t.Errorf("%s: the writes of its %d changes (-want +got):\n%s", name, steadyChanges, d)
		}
	}
	if got, want := ours.maxWrites(), sum(steadyWrites); got > want {
		t.Errorf("a session cost %d writes, more than %d (%.2f per change): %s", got, want, float64(got)/steadyChanges, ours.writeMix())
	}
	refused := sum(ours.failedWrites)
	for _, kind := range []string{"AgentSession", "ResumePlan"} {
		if got, most := ours.passes[kind], maxPassesPerSession*n+refused; got > most {
			t.Errorf("the %s controller ran %d passes for %d sessions, more than %d (%d per session and %d refused writes): it reacts to changes it has no work for",
				kind, got, n, most, maxPassesPerSession, refused)
		}
	}
	if len(ours.repeated) != 0 {
		t.Errorf("%d passes reconciled a change twice:\n%v", len(ours.repeated), ours.repeated)
	}
	// A pass that reads a cache which has not yet seen the controller's own last write has its write
	// refused (409 on the optimistic lock, or AlreadyExists) and runs again: a round trip wasted, never
	// a change written twice. Passes start only on another object's change (a Job that finished, a
	// plan's verdict), so it takes a Job that finished before the cache held the pass that made it; how
	// often depends on timing, and none in a thousand sessions is usual.
	if refused > n/2 {
		t.Errorf("%d write attempts refused for %d sessions: %v", refused, n, ours.failedWrites)
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
		noop := runScale(b, sideNoop, n, workers, 20*time.Minute, nil)
		b.Log(noop)
		var restarts []float64
		ours := runScale(b, sideControllers, n, workers, 20*time.Minute, func(e *scaleEnv) {
			// Alternate the sides, so that neither always runs on a warmer API server; the median ratio.
			for range envInt(b, "ARW_RESTART_ROUNDS", restartRounds) {
				noop := e.measureRestart(sideNoop, n, workers, 5*time.Minute)
				ours := e.measureRestart(sideControllers, n, workers, 5*time.Minute)
				b.Log(noop)
				b.Log(ours)
				restarts = append(restarts, 100*ours.perSecond()/noop.perSecond())
			}
		})
		b.Log(ours)
		slices.Sort(restarts)
		restartRatio := restarts[len(restarts)/2]
		for _, r := range ours.repeated[:min(10, len(ours.repeated))] {
			b.Log("repeated: ", r)
		}
		b.ReportMetric(noop.perSecond(), "noop-sessions/s")
		b.ReportMetric(ours.perSecond(), "sessions/s")
		b.ReportMetric(100*ours.perSecond()/noop.perSecond(), "%-of-noop")
		b.ReportMetric(ours.writesPerSession(), "writes/session")
		b.ReportMetric(ours.writesPerSession()/steadyChanges, "writes/session/change")
		b.ReportMetric(float64(len(ours.repeated)), "repeated-passes")
		b.ReportMetric(restartRatio, "restart-%-of-noop")
		b.ReportMetric(ours.cpuPerSession(), "apiserver-cpu-ms/session")
		b.ReportMetric(noop.cpuPerSession(), "noop-apiserver-cpu-ms/session")
		fmt.Fprintf(os.Stderr, "scale: %d sessions, %d workers: noop %.1f/s, controllers %.1f/s (%.0f %%), %.2f writes/session (%.2f per change); API server CPU %.1f vs %.1f ms/session; restart over the settled sessions %.0f %% of a no-op (median of %v)\n",
			n, workers, noop.perSecond(), ours.perSecond(), 100*ours.perSecond()/noop.perSecond(), ours.writesPerSession(), ours.writesPerSession()/steadyChanges,
			ours.cpuPerSession(), noop.cpuPerSession(), restartRatio, restarts)
	}
}

// restartRounds is how many times the benchmark measures a restart of each side.
const restartRounds = 3

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
