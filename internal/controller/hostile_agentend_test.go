package controller

// Hostile tests of how a recorded agent's end is read. Each comment tells the defect the test found;
// the test holds its fix.

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// An exit status above 128+64 is no signal (Linux has 64), and 255 is what exit(-1) gives, the most
// common "failed" status of all (sys.exit(-1), process.exit(-1), os.Exit(-1)). terminationEnd calls
// every status above 128 a kill, so such an agent reads "Killed (SIG127)" in status, in the event and
// as the ResumePlan's stop.
func TestAnExitStatusAbove192IsNoSignal(t *testing.T) {
	failed := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}}
	for _, code := range []int32{255, 200, 193} {
		end, ok := agentEndOf(failed, []jobs.Termination{{Container: AgentContainer, ExitCode: code, Reason: "Error"}})
		if !ok || end.How != v1alpha1.AgentFailed || end.Signal != "" {
			t.Errorf("exit %d: %s, want Failed (exit code %d): no signal number is above 64", code, agentEndWords(end), code)
		}
	}
}

// The Job's deadline "outranks the exit it caused", but it also outranks an exit it did not cause: an
// agent that finished (exit 0) or failed (exit 3) on its own, whose proxy was still committing when
// the deadline came, reads DeadlineExceeded; the ResumePlan then says "ran out of time before
// finishing" for a run whose agent finished.
func TestTheDeadlineDoesNotOutrankAnExitItDidNotCause(t *testing.T) {
	deadline := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded}}}}
	end, _ := agentEndOf(deadline, []jobs.Termination{{Container: AgentContainer, ExitCode: 0, Reason: "Completed"}})
	got, _ := apimap.RunEnd(end)
	if end.How != v1alpha1.AgentFinished {
		t.Errorf("an agent that exited 0 (Completed) reads %s, --agent-end %s: the agent finished, the proxy ran out of time", agentEndWords(end), got)
	}
}

// A recording Job failed after the agent was killed; the proxy committed, so the session goes on to
// verification and status.agentEnd says Killed. Before the verify Job finishes the Job's pod is gone
// (deleted by hand, by the pod GC of a removed node, by the TTL controller's foreground deletion...).
// The next pass runs followRecording again (record() runs until Verified), finds no termination, and
// stalls the session as a failed recording, with a terminal error, although status.agentEnd already
// holds the kubelet's word and the run is committed: the session never becomes Ready and no ResumePlan
// is ever made.
func TestAJudgedRunIsVerifiedWhenItsPodIsGone(t *testing.T) {
	e := newEnv(t)
	_, pod := e.recordKilledAgent("gone")
	verify := e.waitJob("gone", "verify")
	e.eventually("status.agentEnd", func() (bool, string) {
		s := e.session("gone")
		return s.Status.AgentEnd.How == v1alpha1.AgentKilled, fmt.Sprintf("%+v", s.Status.AgentEnd)
	})

	// The pod goes; the Job stays (its TTL has not run out).
	if err := e.c.Delete(e.ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	e.runJob(verify)
	var s *v1alpha1.AgentSession
	e.eventually("the session verified or stalled", func() (bool, string) {
		s = e.session("gone")
		return meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionStalled) ||
			meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.SessionConditionVerified), fmt.Sprintf("%+v", s.Status.Conditions)
	})
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("a committed run whose agent end is in status stalled once its pod was gone: %s: %s (agentEnd %+v)", c.Reason, c.Message, s.Status.AgentEnd)
	}
}

// runProxyAlone runs the recording Job's proxy as the kubelet would, with no agent beside it (its
// container never started: an image that cannot be pulled, a Secret key missing), and stops it as the
// Job controller's deletion at the deadline does. The proxy commits what it has: nothing.
func (e *env) runProxyAlone(job *batchv1.Job) string {
	e.t.Helper()
	args, env, termLog := e.proxyCommand(job)
	p := startProxy(e.t, append(args, "--termination-log", termLog), env)
	if code := p.stop(e.t); code != 0 {
		e.t.Fatalf("proxy exited %d\n%s", code, p.output)
	}
	return p.output.String()
}

// An agent whose image cannot be pulled never starts; the recording Job runs until its deadline, then
// the Job controller deletes the pod, and the proxy, told to stop, commits an empty session. Before
// this change that was a failed recording (Stalled, RecordingFailed). Now agentEndOf says
// DeadlineExceeded with no termination of the agent at all, sessionCommitted is true, and the session
// is verified, with an AgentStoppedShort event saying the agent "ended DeadlineExceeded before the
// run finished; the proxy committed what it did": a run that never ran is Ready, and what kept it from
// running (the pull error the Reconciling message said) is gone.
func TestAnAgentThatNeverStartedIsNoRunToJudge(t *testing.T) {
	e := newEnv(t)
	_, job := e.startRecording("never")
	// The kubelet: the proxy sidecar runs, the agent's image cannot be pulled.
	pod := e.kubeletRuns(job, corev1.PodPending, corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}})
	e.eventually("the stuck agent in Reconciling", func() (bool, string) {
		c := meta.FindStatusCondition(e.session("never").Status.Conditions, v1alpha1.ConditionReconciling)
		return c != nil && strings.Contains(c.Message, "ImagePullBackOff"), fmt.Sprintf("%+v", c)
	})
	// The deadline: the pod is deleted, the proxy commits, the Job fails.
	e.runProxyAlone(job)
	if err := e.c.Delete(e.ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	var j batchv1.Job
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(job), &j); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	j.Status.StartTime, j.Status.Failed = &now, 1
	j.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, LastProbeTime: now, LastTransitionTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, Message: "Job was active longer than specified deadline",
			LastProbeTime: now, LastTransitionTime: now}}
	if err := e.c.Status().Update(e.ctx, &j); err != nil {
		t.Fatal(err)
	}
	var s *v1alpha1.AgentSession
	e.eventually("the session past its recording", func() (bool, string) {
		s = e.session("never")
		return meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionStalled) || len(e.jobsOf("never", "verify")) == 1 ||
			s.Status.AgentEnd.How != "", fmt.Sprintf("%+v", s.Status.Conditions)
	})
	if len(e.jobsOf("never", "verify")) == 1 || s.Status.AgentEnd.How != "" {
		t.Errorf("an agent that never started is taken for a run to judge: agentEnd %+v, a verify Job %v, events %q",
			s.Status.AgentEnd, len(e.jobsOf("never", "verify")) == 1, e.eventMessages("never"))
	}
}
