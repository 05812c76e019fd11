package controller

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// The restart measure: what a manager costs when it starts over sessions that are already settled, as
// after an upgrade, a crash or a leader election. Every object is reconciled once on start (the
// informers' initial list), and a controller that reads its Jobs' results again, rebuilds what it
// already wrote or patches an unchanged status pays for it here, for every object it has, each time it
// restarts. Settled objects leave a controller nothing to do, so the baseline is a true no-op: a
// reconciler of each kind that reads its object from the cache and returns.
//
// Both sides run over the same objects (the final state of a controllers scale run, every manager of
// which is stopped first), one after the other, with the same manager options. The clock runs from the
// manager's construction to the moment every session and every plan had a pass and every pass started
// had ended, so it covers the caches' initial lists too: those of the Jobs the controllers own are part
// of their cost.

// restartFigures is what one restart measured.
type restartFigures struct {
	side    scaleSide
	objects int
	elapsed time.Duration
	// writes are the manager's write attempts, failed ones included: none is the goal.
	writes int
	passes int
}

func (f restartFigures) perSecond() float64 { return float64(f.objects) / f.elapsed.Seconds() }

func (f restartFigures) String() string {
	return fmt.Sprintf("restart, %s: %d settled objects reconciled in %s (%.0f objects/s), %d passes, %d writes",
		f.side, f.objects, f.elapsed.Round(time.Millisecond), f.perSecond(), f.passes, f.writes)
}

// restartControllers names the reconcilers of each side, as their reconcile_total metric labels them.
var restartControllers = map[scaleSide][]string{
	sideNoop:        {"restart-noop-agentsession", "restart-noop-resumeplan"},
	sideControllers: {"agentsession", "resumeplan"},
}

// measureRestart starts side's reconcilers over the run's n settled sessions and their n plans and
// measures how long it takes until each was reconciled once and nothing is left running.
func (e *scaleEnv) measureRestart(side scaleSide, n, workers int, timeout time.Duration) restartFigures {
	e.tb.Helper()
	counter := newWriteCounter()
	names := restartControllers[side]
	before := reconcilesEnded(e.tb, names)
	if path := os.Getenv("ARW_RESTART_PROFILE"); path != "" {
		// A CPU profile of this process (the manager under test, the API server's client side) over the
		// restart, for `go tool pprof`.
		f, err := os.Create(fmt.Sprintf("%s.%s.%d", path, side, time.Now().UnixNano()))
		if err != nil {
			e.tb.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			e.tb.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	start := time.Now()
	stop := e.startScaleManager(counter, workers, func(mgr ctrl.Manager) error {
		if side == sideNoop {
			for i, obj := range []client.Object{&v1alpha1.AgentSession{}, &v1alpha1.ResumePlan{}} {
				r := &getOnly{Client: mgr.GetClient(), newObject: func() client.Object { return obj.DeepCopyObject().(client.Object) }}
				if err := ctrl.NewControllerManagedBy(mgr).For(obj).Named(names[i]).Complete(r); err != nil {
					return err
				}
			}
			return nil
		}
		deps := scaleDeps(mgr)
		for _, r := range []setupper{&AgentSessionReconciler{Deps: deps}, &ResumePlanReconciler{Deps: deps}} {
			if err := r.SetupWithManager(e.ctx, mgr); err != nil {
				return err
			}
		}
		return nil
	})
	defer stop()
	deadline := time.Now().Add(timeout)
	for {
		started, objects := counter.started()
		if objects == 2*n && reconcilesEnded(e.tb, names)-before >= started {
			break
		}
		if time.Now().After(deadline) {
			e.tb.Fatalf("restart, %s: %d of %d objects reconciled, %d passes started, after %s", side, objects, 2*n, started, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	f := restartFigures{side: side, objects: 2 * n, elapsed: time.Since(start)}
	var tally scaleFigures
	counter.tally(&tally)
	f.writes, f.passes = tally.totalWrites(), sum(tally.passes)
	return f
}

// getOnly is the no-op reconciler of the restart measure: it reads its object and returns.
type getOnly struct {
	client.Client
	newObject func() client.Object
}

func (r *getOnly) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, client.IgnoreNotFound(r.Get(ctx, req.NamespacedName, r.newObject()))
}

// started is how many passes the counter saw begin (each reads its object first), and how many
// distinct objects they were for.
func (w *writeCounter) started() (passes, objects int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for _, p := range w.passes {
		seen[p.object] = true
	}
	return len(w.passes), len(seen)
}

// reconcilesEnded sums controller-runtime's reconcile_total over the named controllers: every pass
// that ended, whatever its result.
func reconcilesEnded(tb interface{ Fatal(...any) }, controllers []string) int {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	want := map[string]bool{}
	for _, c := range controllers {
		want[c] = true
	}
	n := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && want[l.GetValue()] {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(n)
}
