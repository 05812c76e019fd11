package controller

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// An agent killed after the proxy committed what it did is a run to judge, not a failed recording:
// the session is verified, its status says how the agent ended (the kubelet's word, which the proxy
// beside it could not see), an event says so, and the ResumePlan is judged with it, so its stop is
// Killed rather than a clean end.
func TestAnAgentKilledAfterItsRunWasCommittedIsJudgedNotStalled(t *testing.T) {
	e := newEnv(t)
	job, _ := e.recordKilledAgent("killed")

	e.runJob(e.waitJob("killed", "verify"))
	s := e.waitSession("killed", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("the session stalled: %+v", c)
	}
	end := s.Status.AgentEnd
	if end.How != v1alpha1.AgentKilled || end.Signal != "SIGKILL" || end.ExitCode == nil || *end.ExitCode != 137 || end.Reason != "Error" {
		t.Errorf("status.agentEnd %+v, want Killed by SIGKILL, exit code 137, reason Error", end)
	}
	if !slices.ContainsFunc(e.eventMessages("killed"), func(m string) bool {
		return strings.Contains(m, "ended Killed (SIGKILL) before the run finished") && strings.Contains(m, job.Name)
	}) {
		t.Errorf("events %v: want one saying the agent was killed", e.eventMessages("killed"))
	}

	planJob := e.waitJob("killed", "resume-plan")
	if args := strings.Join(planJob.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--agent-end Killed:137:SIGKILL") {
		t.Fatalf("the resume-plan Job's args %q do not carry the agent's end", args)
	}
	if out := e.runJob(planJob); !strings.Contains(out, `"outcome":"Succeeded"`) {
		t.Fatalf("engine resume-plan:\n%s", out)
	}
	var rp v1alpha1.ResumePlan
	rp.Name, rp.Namespace = "killed", e.ns
	e.eventually("the ResumePlan's verdict", func() (bool, string) {
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(&rp), &rp); err != nil {
			return false, err.Error()
		}
		return rp.Status.Verdict != "", "no verdict"
	})
	if rp.Status.Stop != v1alpha1.RunKilled {
		t.Errorf("ResumePlan stop %q (reachability %+v), want Killed", rp.Status.Stop, rp.Status.Reachability)
	}
}

// How an agent's container ended reads from the kubelet's termination and the Job's condition: exit
// 0 finished, another code failed, 128+n killed by signal n (named where common, n at most 64),
// OOMKilled killed, a signal at a Job's deadline ran out of time (an exit of the agent's own stays
// its own); an agent that never terminated has no end.
func TestAnAgentsEndIsWhatTheKubeletSaw(t *testing.T) {
	failedJob := func(reason string) *batchv1.Job {
		return &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason}}}}
	}
	done := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	agent := func(code int32, reason string) []jobs.Termination {
		return []jobs.Termination{{Container: ProxyContainer}, {Container: AgentContainer, ExitCode: code, Reason: reason}}
	}
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		ts   []jobs.Termination
		want string
		ok   bool
	}{
		{"exit 0", done, agent(0, "Completed"), "Finished/0/", true},
		{"exit 3", failedJob("BackoffLimitExceeded"), agent(3, "Error"), "Failed/3/", true},
		{"SIGKILL", failedJob("BackoffLimitExceeded"), agent(137, "Error"), "Killed/137/SIGKILL", true},
		{"SIGTERM", failedJob("BackoffLimitExceeded"), agent(143, "Error"), "Killed/143/SIGTERM", true},
		{"signal 37", failedJob("BackoffLimitExceeded"), agent(165, "Error"), "Killed/165/SIG37", true},
		{"out of memory", failedJob("BackoffLimitExceeded"), agent(137, "OOMKilled"), "Killed/137/SIGKILL", true},
		{"the deadline", failedJob(batchv1.JobReasonDeadlineExceeded), agent(143, "Error"), "DeadlineExceeded/143/SIGTERM", true},
		{"the deadline, no agent end", failedJob(batchv1.JobReasonDeadlineExceeded), nil, "", false},
		{"the deadline after the agent's own exit", failedJob(batchv1.JobReasonDeadlineExceeded), agent(3, "Error"), "Failed/3/", true},
		{"exit 255, no signal", failedJob("BackoffLimitExceeded"), agent(255, "Error"), "Failed/255/", true},
		{"the highest signal", failedJob("BackoffLimitExceeded"), agent(192, "Error"), "Killed/192/SIG64", true},
		{"evicted", failedJob("BackoffLimitExceeded"), []jobs.Termination{{Container: ProxyContainer}}, "", false},
		{"a code no process exits with", failedJob("BackoffLimitExceeded"), agent(-1, "Error"), "Failed//", true},
	} {
		end, ok := agentEndOf(tc.job, tc.ts)
		got := ""
		if ok {
			got = string(end.How) + "/"
			if end.ExitCode != nil {
				got += strconv.Itoa(int(*end.ExitCode))
			}
			got += "/" + end.Signal
		}
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// recordKilledAgent records session name through the real proxy, whose agent makes one model call and
// is killed (exit 137, as SIGKILL ends it); the proxy, stopped after it, commits. It returns the
// recording Job, failed, and its pod, whose status says so.
func (e *env) recordKilledAgent(name string) (*batchv1.Job, *corev1.Pod) {
	e.t.Helper()
	_, job := e.startRecording(name)
	_, upstream := fakeLLM(e.t, hiThere)
	agent := func(env map[string]string) int {
		c := sdk.NewClient(option.WithBaseURL(env[EnvAnthropicBaseURL]), option.WithAPIKey(env[EnvAnthropicAPIKey]), option.WithMaxRetries(0))
		if _, err := c.Messages.New(context.Background(), sdk.MessageNewParams{Model: "claude-test", MaxTokens: 16,
			Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hello"))}}); err != nil {
			e.t.Errorf("the recorded call: %v", err)
		}
		return 137
	}
	if code, out := e.runForkPod(job, agent, "--anthropic-upstream", upstream); code != 137 {
		e.t.Fatalf("agent exit %d\n%s", code, out)
	}
	// The kubelet's part: the agent was killed; the proxy, stopped after it, committed and exited 0.
	pod := &corev1.Pod{}
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: job.Name + "-pod"}, pod); err != nil {
		e.t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodFailed,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: ProxyContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: AgentContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "Error"}}}}}
	if err := e.c.Status().Update(e.ctx, pod); err != nil {
		e.t.Fatal(err)
	}
	e.finishJob(job, false, "")
	return job, pod
}
