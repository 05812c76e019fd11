package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// TestWhatACollectedSessionLeavesBehindSaysSo: the garbage collector collects a session (no goal
// declared, so Unresumable, past a zero grace) that a hand-made ResumePlan judges and a finished
// Replay ran from, while their controllers are down. The plan stalls with SessionCollected naming the
// collection, and its controller, back, keeps saying so with the session gone, where it used to wait
// "WaitingForSession" for ever; the ForkRun keeps its outcome and its final condition says the session
// was collected since; both get an event from the collector.
func TestWhatACollectedSessionLeavesBehindSaysSo(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "done", strings.Repeat("done ", 40), false))
	// The sessions' controller (with its finalizer) runs throughout; the plans' and the runs' only
	// until the collection: what they say after it, the collector wrote.
	var gcDeps Deps
	e.runManager(nil, cache.Options{}, func(mgr ctrl.Manager, deps *Deps, n int64) []setupper {
		gcDeps = *deps
		gcDeps.Recorder = mgr.GetEventRecorder(fmt.Sprintf("gc-test-%d", n))
		sessions := &AgentSessionReconciler{Deps: *deps}
		sessions.Recorder = mgr.GetEventRecorder(fmt.Sprintf("agentsession-test-%d", n))
		return []setupper{sessions}
	})
	dependents := func(mgr ctrl.Manager, deps *Deps, n int64) []setupper {
		plans := &ResumePlanReconciler{Deps: *deps}
		plans.Recorder = mgr.GetEventRecorder(fmt.Sprintf("resumeplan-test-%d", n))
		runs := &ForkRunReconciler{Deps: *deps}
		runs.Recorder = mgr.GetEventRecorder(fmt.Sprintf("forkrun-test-%d", n))
		return []setupper{plans, runs}
	}
	stopDependents := e.runManager(nil, cache.Options{}, dependents)
	e.readySession("done")
	e.runJob(e.waitJob("done", "resume-plan"))
	hand := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"}, Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "done"}}}
	e.create(hand)
	e.runJob(e.waitJob("by-hand", "resume-plan"))
	for _, name := range []string{"done", "by-hand"} {
		rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
		e.waitCondition(rp, func() []metav1.Condition { return rp.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerdictComputed)
	}
	e.create(newReplay("replayed", "done"))
	job := e.waitJob("replayed", "replay")
	e.writeResult(job, &task.Result{Task: task.Replay, Outcome: task.Succeeded, Replay: &task.ReplayResult{SessionID: "done", Passed: true}})
	e.finishJob(job, true, "")
	e.waitForkRun("replayed", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPassed)

	stopDependents()
	g := &GarbageCollector{Deps: gcDeps, Options: GCOptions{Namespaces: []string{e.ns}}, Ticker: e.clock}
	e.eventually("a GC pass deletes the session", func() (bool, string) {
		rep, err := g.Pass(e.ctx)
		return err == nil && slices.Contains(rep.Deleted, e.ns+"/done"), fmt.Sprintf("%+v %v", rep.Plan, err)
	})
	e.eventually("the session is gone", func() (bool, string) {
		var s v1alpha1.AgentSession
		err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "done"}, &s)
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})

	e.runManager(nil, cache.Options{}, dependents)
	rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: e.ns}}
	e.waitCondition(rp, func() []metav1.Condition { return rp.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue, ReasonSessionCollected)
	const said = "AgentSession done (session done) was collected as "
	if msg := conditionMessage(rp.Status.Conditions, v1alpha1.ConditionStalled); !strings.Contains(msg, said) || !strings.Contains(msg, "nothing left to judge") {
		t.Errorf("the hand-made plan's Stalled message does not name the collection:\n%s", msg)
	}
	// Once the session is gone the plan keeps saying so; a new generation looks again.
	time.Sleep(time.Second)
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(rp), rp); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Reason != ReasonSessionCollected {
		t.Errorf("the plan went back to waiting: %+v", rp.Status.Conditions)
	}

	fr := e.waitForkRun("replayed", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPassed)
	e.eventually("the ForkRun says its session was collected", func() (bool, string) {
		fr = e.forkRun("replayed")
		msg := conditionMessage(fr.Status.Conditions, v1alpha1.ConditionReady)
		return strings.Contains(msg, "since then "+said) && strings.Contains(msg, job.Name), msg
	})
	if fr.Status.Outcome != v1alpha1.OutcomePassed {
		t.Errorf("the ForkRun's outcome changed to %s", fr.Status.Outcome)
	}
	for _, name := range []string{"by-hand", "replayed"} {
		e.eventually(name+"'s SessionCollected event", func() (bool, string) {
			got := e.eventReasons(name)
			return slices.Contains(got, ReasonSessionCollected), fmt.Sprint(got)
		})
	}
}
