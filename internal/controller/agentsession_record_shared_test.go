package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// TestOneRecordingPerSessionID: AgentSessions asking to record the same session id into the same
// store run one recording Job between them, whether the second comes while the first records or both
// come at once: two proxies committing one id would overwrite each other's run. The others say who
// records, and verify that recording once it is stored (the recording Job's end wakes them).
func TestOneRecordingPerSessionID(t *testing.T) {
	e := newEnv(t)
	e.forkSecrets()
	e.startManager(nil)
	named := func(name, id string) *v1alpha1.AgentSession {
		s := recordingSession(name)
		s.Spec.SessionID = id
		return s
	}
	// One after the other: the first's Job runs when the second comes.
	e.create(named("first", "shared"))
	job := e.waitJob("first", recordPurpose)
	e.create(named("second", "shared"))
	e.waitSession("second", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRecording)
	// Both at once.
	e.create(named("x", "burst"))
	e.create(named("y", "burst"))
	e.create(named("z", "burst"))

	recordJobs := func(names ...string) (n int, who string) {
		for _, name := range names {
			if l := len(e.jobsOf(name, recordPurpose)); l > 0 {
				n, who = n+l, who+" "+name
			}
		}
		return n, who
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if n, who := recordJobs("first", "second"); n != 1 {
			t.Fatalf("session shared: %d recording Jobs (%s), want 1", n, who)
		}
		if n, who := recordJobs("x", "y", "z"); n > 1 {
			t.Fatalf("session burst: %d recording Jobs (%s), want 1", n, who)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The burst's Job may come after those 3 s on a busy machine; once it is there, it stays the only one.
	e.eventually("one recording Job for session burst", func() (bool, string) {
		n, who := recordJobs("x", "y", "z")
		if n > 1 {
			t.Fatalf("session burst: %d recording Jobs (%s), want 1", n, who)
		}
		return n == 1, fmt.Sprintf("%d recording Jobs", n)
	})
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if n, who := recordJobs("x", "y", "z"); n != 1 {
			t.Fatalf("session burst: %d recording Jobs (%s) after the first, want 1", n, who)
		}
	}
	if msg := conditionMessage(e.session("second").Status.Conditions, v1alpha1.ConditionReconciling); !strings.Contains(msg, e.ns+"/first records session shared") {
		t.Errorf("second's Reconciling says %q, want who records", msg)
	}

	// The first's recording is committed (here pushed as its proxy would) and its Job completes: the
	// second verifies it without a Job of its own.
	push(t, e.storeKey(), recordSession(t, "shared", strings.Repeat("tool ", 40), false))
	e.finishJob(job, true, "")
	e.runJob(e.waitJob("second", "verify"))
	e.waitSession("second", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
	if n := len(e.jobsOf("second", recordPurpose)); n != 0 {
		t.Errorf("second has %d recording Jobs after the first's completed", n)
	}
}

// TestDeletingARecordingSessionStopsTheRecordingFirst: an AgentSession deleted while its agent is
// recorded deletes its recording Job (pods first) and keeps its finalizer until that Job is gone; only
// then are the session's stored objects deleted. The proxy commits the run when its pod is stopped, so
// deleting them before left a session in the store that nothing records, to be synced back or found
// by a session made again under the same id.
func TestDeletingARecordingSessionStopsTheRecordingFirst(t *testing.T) {
	e := newEnv(t)
	_, job := e.startRecording("doomed")
	s := e.session("doomed")
	if err := e.c.Delete(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	// The Job is being deleted, foreground, and the session waits for it.
	j := e.waitJobDeleting(job)
	if !contains(j.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Errorf("the recording Job's finalizers %v: not deleted foreground", j.Finalizers)
	}
	time.Sleep(time.Second)
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(s), s); err != nil {
		t.Fatalf("the session went while its recording Job still ran: %v", err)
	}
	// The stopped proxy commits the run; then the garbage collector lets the Job go.
	push(t, e.storeKey(), recordSession(t, "doomed", strings.Repeat("late ", 40), false))
	j.Finalizers = nil
	if err := e.c.Update(e.ctx, &j); err != nil {
		t.Fatal(err)
	}
	e.eventually("the session gone", func() (bool, string) {
		err := e.c.Get(e.ctx, client.ObjectKeyFromObject(s), s)
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if left := keys(t, e.storeKey("sessions", "doomed")+"/"); len(left) != 0 {
		t.Errorf("the late commit outlived its session: %v", left)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestARecordingOutlivesNoSpecChange: spec.agent changed while the agent is recorded leaves the one
// recording Job running and the status names the image it runs, not the new one; spec.agent taken
// out, then the session deleted, still stops the recording before its stored objects go.
func TestARecordingOutlivesNoSpecChange(t *testing.T) {
	e := newEnv(t)
	_, job := e.startRecording("changed")
	s := e.editSession("changed", func(s *v1alpha1.AgentSession) { s.Spec.Agent.Image = agentImage + "-next" })
	e.eventually("generation 2 observed", func() (bool, string) {
		s = e.session("changed")
		return s.Status.ObservedGeneration == 2, fmt.Sprint(s.Status.ObservedGeneration)
	})
	if msg := conditionMessage(s.Status.Conditions, v1alpha1.ConditionReconciling); !strings.Contains(msg, "running agent "+agentImage) || strings.Contains(msg, "-next") {
		t.Errorf("Reconciling says %q, want the image the Job runs", msg)
	}
	if n := len(e.jobsOf("changed", recordPurpose)); n != 1 {
		t.Errorf("%d recording Jobs, want 1", n)
	}
	s = e.editSession("changed", func(s *v1alpha1.AgentSession) {
		s.Spec.Agent = v1alpha1.AgentSpec{}
		s.Spec.ProviderKeys = v1alpha1.ProviderKeys{}
	})
	if err := e.c.Delete(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	e.waitJobDeleting(job)
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(s), s); err != nil {
		t.Fatalf("the session went while its recording Job still ran: %v", err)
	}
}

// TestASessionIDReusedWhileTheOldRecordingStopsWaits: a session of the same id created while a deleted
// one's recording Job is being stopped runs no recording beside it (that proxy commits as it stops),
// and once it is gone verifies what is stored instead.
func TestASessionIDReusedWhileTheOldRecordingStopsWaits(t *testing.T) {
	e := newEnv(t)
	_, job := e.startRecording("old")
	old := e.session("old")
	if err := e.c.Delete(e.ctx, old); err != nil {
		t.Fatal(err)
	}
	j := e.waitJobDeleting(job)
	reused := recordingSession("new")
	reused.Spec.SessionID = "old"
	e.create(reused)
	e.eventually("the new session waits", func() (bool, string) {
		msg := conditionMessage(e.session("new").Status.Conditions, v1alpha1.ConditionReconciling)
		return strings.Contains(msg, e.ns+"/old records session old"), msg
	})
	if n := len(e.jobsOf("new", recordPurpose)); n != 0 {
		t.Fatalf("%d recording Jobs beside the one being stopped", n)
	}
	push(t, e.storeKey(), recordSession(t, "old", strings.Repeat("late ", 40), false))
	j.Finalizers = nil
	if err := e.c.Update(e.ctx, &j); err != nil {
		t.Fatal(err)
	}
	e.runJob(e.waitJob("new", "verify"))
	e.waitSession("new", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
	if n := len(e.jobsOf("new", recordPurpose)); n != 0 {
		t.Errorf("%d recording Jobs for a session already stored", n)
	}
}

// waitJobDeleting waits until job carries a deletion timestamp and returns it as then read.
func (e *env) waitJobDeleting(job *batchv1.Job) batchv1.Job {
	e.t.Helper()
	var j batchv1.Job
	e.eventually("Job "+job.Name+" being deleted", func() (bool, string) {
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(job), &j); err != nil {
			return false, err.Error()
		}
		return !j.DeletionTimestamp.IsZero(), "no deletion timestamp"
	})
	return j
}
