package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// A verified session records the verify Job it read in status.lastRun, and a manager that starts
// again, its Job gone with its TTL, does not verify it again: not when its Ready message no longer
// names the Job (lastRun is read, never the message), and not when its status was written before
// lastRun existed (the message is read, as it was written then). Without either, the same restart
// does run the Job again, so the restart would have shown a rerun.
func TestAVerifiedSessionIsNotVerifiedAgainWhenItsJobIsGone(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "run-last", "a result", false))
	stop := e.startManager(nil)
	e.create(newSession("run-last", "run-last"))
	job := e.waitJob("run-last", "verify")
	e.runJob(job)
	s := e.waitSession("run-last", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
	if want := (v1alpha1.JobRun{Name: job.Name, Generation: s.Generation}); s.Status.LastRun != want {
		t.Fatalf("status.lastRun %+v, want %+v", s.Status.LastRun, want)
	}

	restart := func(edit func(s *v1alpha1.AgentSession)) int {
		t.Helper()
		stop()
		for _, j := range e.jobsOf("run-last", "verify") {
			if err := e.c.Delete(e.ctx, &j, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
		e.eventually("the verify Job gone", func() (bool, string) { return len(e.jobsOf("run-last", "verify")) == 0, "still there" })
		s := e.session("run-last")
		edit(s)
		if err := e.c.Status().Update(e.ctx, s); err != nil {
			t.Fatal(err)
		}
		stop = e.startManager(nil)
		time.Sleep(2 * time.Second) // the new manager's first pass over every session
		return len(e.jobsOf("run-last", "verify"))
	}
	reword := func(s *v1alpha1.AgentSession, msg string) {
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		c.Message = msg
	}
	if n := restart(func(s *v1alpha1.AgentSession) { reword(s, "verified; the Job is not named here") }); n != 0 {
		t.Errorf("with lastRun and a message naming no Job: %d verify Jobs after the restart, want none", n)
	}
	if n := restart(func(s *v1alpha1.AgentSession) {
		s.Status.LastRun = v1alpha1.JobRun{}
		reword(s, "verify Job "+job.Name+" found the session intact")
	}); n != 0 {
		t.Errorf("a status from before lastRun, its message naming the Job: %d verify Jobs after the restart, want none", n)
	}
	if n := restart(func(s *v1alpha1.AgentSession) {
		s.Status.LastRun = v1alpha1.JobRun{}
		reword(s, "verified; the Job is not named here")
	}); n != 1 {
		t.Errorf("with neither: %d verify Jobs after the restart, want the Job run again", n)
	}
}

// A finished ForkRun records its Job in status.lastRun and is not run again by a manager that starts
// after its Job is gone, even when its final message no longer names the Job.
func TestAFinishedForkRunIsNotRunAgainWhenItsJobIsGone(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "done-fork", "a result", false))
	stop := e.startForkManager(nil)
	e.readySession("done-fork")
	e.create(newReplay("once", "done-fork"))
	job := e.waitJob("once", "replay")
	e.writeResult(job, &task.Result{Task: task.Replay, Outcome: task.Succeeded, Replay: &task.ReplayResult{SessionID: "done-fork", Passed: true}})
	e.finishJob(job, true, "")
	fr := e.waitForkRun("once", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPassed)
	if want := (v1alpha1.JobRun{Name: job.Name, Generation: fr.Generation}); fr.Status.LastRun != want {
		t.Fatalf("status.lastRun %+v, want %+v", fr.Status.LastRun, want)
	}
	stop()
	if err := e.c.Delete(e.ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	e.eventually("the replay Job gone", func() (bool, string) { return len(e.jobsOf("once", "replay")) == 0, "still there" })
	meta.FindStatusCondition(fr.Status.Conditions, v1alpha1.ConditionReady).Message = "passed; the Job is not named here"
	if err := e.c.Status().Update(e.ctx, fr); err != nil {
		t.Fatal(err)
	}
	e.startForkManager(nil)
	time.Sleep(2 * time.Second)
	if n := len(e.jobsOf("once", "replay")); n != 0 {
		t.Errorf("%d replay Jobs after the restart, want none: the run was read already", n)
	}
}
