package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// proxyErrorLog is the end of a proxy's log that could not start, as the kubelet keeps it for a
// container that failed without a termination message (FallbackToLogsOnError).
const proxyErrorLog = "pulling session golden\nError: --provider anthropic: session golden records openai; leave --provider out to replay it as recorded\n"

// kubeletRuns plays the kubelet for a Job: its pod with the proxy sidecar and the agent in the given
// states.
func (e *env) kubeletRuns(job *batchv1.Job, phase corev1.PodPhase, proxy, agent corev1.ContainerStatus) *corev1.Pod {
	e.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-pod", Namespace: e.ns, Labels: map[string]string{jobs.LabelJobUID: string(job.UID)}},
		Spec: *job.Spec.Template.Spec.DeepCopy()}
	e.create(pod)
	proxy.Name, agent.Name = ProxyContainer, AgentContainer
	pod.Status = corev1.PodStatus{Phase: phase, InitContainerStatuses: []corev1.ContainerStatus{proxy}, ContainerStatuses: []corev1.ContainerStatus{agent}}
	if err := e.c.Status().Update(e.ctx, pod); err != nil {
		e.t.Fatal(err)
	}
	return pod
}

var (
	proxyFailed  = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: proxyErrorLog}}
	crashLooping = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=proxy"}}
	agentWaits   = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	agentRuns    = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
)

// waitGone waits until the Job is deleted (the API server keeps it while its finalizers run).
func (e *env) waitGone(job *batchv1.Job) {
	e.t.Helper()
	e.eventually("Job "+job.Name+" deleted", func() (bool, string) {
		var got batchv1.Job
		err := e.c.Get(e.ctx, client.ObjectKeyFromObject(job), &got)
		return apierrors.IsNotFound(err) || (err == nil && got.DeletionTimestamp != nil), fmt.Sprint(err)
	})
}

// TestARunWhoseProxyCrashLoopsFailsWithItsLastLine: a ForkRun whose proxy sidecar is in
// CrashLoopBackOff, or has just exited non-zero and is started again, fails at the next pod check
// (Jobs.StuckCheck, a minute by default) with ContainerCrashLooping, its message naming the container
// and quoting the last line of its log, and its Job is deleted; it used to say "Job ... is running"
// until the Job's deadline an hour later. A run whose pod is healthy keeps running.
func TestARunWhoseProxyCrashLoopsFailsWithItsLastLine(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "golden", strings.Repeat("golden ", 40), false))
	e.runManager(nil, cache.Options{}, func(mgr ctrl.Manager, deps *Deps, n int64) []setupper {
		deps.Jobs.StuckCheck = time.Second
		return forkReconcilers(mgr, deps, n)
	})
	e.readySession("golden")
	pods := map[string][2]corev1.ContainerStatus{
		"backoff":   {{State: crashLooping, RestartCount: 4, LastTerminationState: proxyFailed}, {State: agentWaits}},
		"just-died": {{State: proxyFailed}, {State: agentWaits}},
		"healthy":   {{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, Started: new(true)}, {State: agentRuns}},
	}
	jobsOf := map[string]*batchv1.Job{}
	for name, st := range pods {
		e.create(newReplay(name, "golden"))
		jobsOf[name] = e.waitJob(name, "replay")
		e.kubeletRuns(jobsOf[name], corev1.PodPending, st[0], st[1])
	}
	for _, name := range []string{"backoff", "just-died"} {
		fr := e.waitForkRun(name, v1alpha1.ConditionStalled, metav1.ConditionTrue, conditions.ReasonContainerCrashLooping)
		job := jobsOf[name]
		msg := meta.FindStatusCondition(fr.Status.Conditions, v1alpha1.ConditionStalled).Message
		for _, want := range []string{"replay Job " + job.Name + " failed: container proxy of pod " + job.Name + "-pod exited 1 (Error)",
			"Error: --provider anthropic: session golden records openai; leave --provider out to replay it as recorded", "the Job is deleted"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: Stalled message does not say %q:\n%s", name, want, msg)
			}
		}
		if fr.Status.Outcome != v1alpha1.OutcomeFailed || fr.Status.CompletionTime == nil {
			t.Errorf("%s: outcome %q, completion %v: want Failed and a completion time", name, fr.Status.Outcome, fr.Status.CompletionTime)
		}
		e.waitGone(job)
		e.eventually(name+"'s warning event", func() (bool, string) {
			got := e.eventReasons(name)
			return slices.Contains(got, conditions.ReasonContainerCrashLooping), fmt.Sprint(got)
		})
	}
	if !strings.Contains(conditionMessage(e.forkRun("backoff").Status.Conditions, v1alpha1.ConditionStalled), "CrashLoopBackOff after 4 restarts") {
		t.Errorf("the backoff run does not say it is in CrashLoopBackOff")
	}
	// A healthy pod is looked at every second as well: it runs on.
	time.Sleep(3 * time.Second)
	healthy := e.forkRun("healthy")
	if c := meta.FindStatusCondition(healthy.Status.Conditions, v1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonJobRunning {
		t.Errorf("the healthy run: %+v, want Reconciling JobRunning", healthy.Status.Conditions)
	}
	var job batchv1.Job
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(jobsOf["healthy"]), &job); err != nil || job.DeletionTimestamp != nil {
		t.Errorf("the healthy run's Job: %v, deleting %v", err, job.DeletionTimestamp)
	}
}

// TestARecordingWhoseProxyCrashLoopsFails: the same for a recording: the session stalls with
// RecordingFailed naming the proxy and its last line, and the recording Job is deleted.
func TestARecordingWhoseProxyCrashLoopsFails(t *testing.T) {
	e := newEnv(t)
	_, job := e.startRecording("crashing")
	e.kubeletRuns(job, corev1.PodPending, corev1.ContainerStatus{State: crashLooping, RestartCount: 2, LastTerminationState: proxyFailed},
		corev1.ContainerStatus{State: agentWaits})
	s := e.waitSession("crashing", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonRecordingFailed)
	msg := conditionMessage(s.Status.Conditions, v1alpha1.ConditionStalled)
	for _, want := range []string{"recording Job " + job.Name + " failed: container proxy", "CrashLoopBackOff after 2 restarts",
		"Error: --provider anthropic: session golden records openai"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Stalled message does not say %q:\n%s", want, msg)
		}
	}
	e.waitGone(job)
	// Gone, the recording is not started again.
	time.Sleep(time.Second)
	if n := len(e.jobsOf("crashing", recordPurpose)); n != 0 {
		t.Errorf("%d recording Jobs after the failed one was deleted, want none", n)
	}
}

func (e *env) forkRun(name string) *v1alpha1.ForkRun {
	e.t.Helper()
	var fr v1alpha1.ForkRun
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &fr); err != nil {
		e.t.Fatal(err)
	}
	return &fr
}
