package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

func TestDecideRunReadsAFinishedJob(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "r-replay-0123456789"}, Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}}}
	replay := newReplay("r", "s")
	fork := newFork("f", "s", 2)
	withGoal := newFork("g", "s", 2)
	withGoal.Spec.Goal = v1alpha1.Goal{Tool: "submit"}
	passed := &task.Result{Task: task.Replay, Outcome: task.Succeeded, Replay: &task.ReplayResult{Passed: true}}
	stop := &task.Divergence{Step: 3, Kind: "tool_call", Reason: "ToolNotRecorded", Message: "no recorded call of fetch"}
	cases := []struct {
		name    string
		fr      *v1alpha1.ForkRun
		state   jobs.State
		rep     jobs.Report
		outcome v1alpha1.ForkOutcome
		reason  string
		child   string
		msgSays []string
	}{
		{"a replay that passed", replay, jobs.Succeeded, jobs.Report{Result: passed}, v1alpha1.OutcomePassed, v1alpha1.ReasonPassed, "", []string{job.Name, "Passed"}},
		{"a pass whose agent then failed is Failed, not healthy", replay, jobs.Failed, jobs.Report{Result: passed},
			v1alpha1.OutcomeFailed, v1alpha1.ReasonJobFailed, "", []string{"Passed", "the agent container failed", "backoff limit"}},
		{"a replay that diverged stays Diverged when the agent failed on the 409", replay, jobs.Failed,
			jobs.Report{Result: &task.Result{Task: task.Replay, Outcome: task.Succeeded, Replay: &task.ReplayResult{Divergence: stop}}},
			v1alpha1.OutcomeDiverged, v1alpha1.ReasonDiverged, "", []string{"stopped at step 3 (ToolNotRecorded): no recorded call of fetch"}},
		{"a fork names its committed child, even when it diverged", fork, jobs.Failed,
			jobs.Report{Result: &task.Result{Task: task.Fork, Outcome: task.Succeeded, Fork: &task.ForkResult{ChildSessionID: "c-1", DivergedAtStep: new(int64(3)), Divergence: stop}}},
			v1alpha1.OutcomeDiverged, v1alpha1.ReasonDiverged, "c-1", nil},
		{"a goal the proxy did not evaluate is said so", withGoal, jobs.Succeeded,
			jobs.Report{Result: &task.Result{Task: task.Fork, Outcome: task.Succeeded, Fork: &task.ForkResult{ChildSessionID: "c-2"}}},
			v1alpha1.OutcomeCompleted, v1alpha1.ReasonCompleted, "c-2", []string{"the goal (tool submit) was not evaluated"}},
		{"a task that failed says the engine's reason", fork, jobs.Failed,
			jobs.Report{Summary: &task.Summary{Task: task.Fork, Outcome: task.Failed, Reason: task.ReasonSessionNotFound, Message: "gone"}},
			v1alpha1.OutcomeFailed, v1alpha1.ReasonJobFailed, "", []string{"SessionNotFound: gone"}},
		{"a Job that succeeded without a result", replay, jobs.Succeeded,
			jobs.Report{ProblemReason: conditions.ReasonResultMissing, Problem: "Job r-replay-0123456789 finished without a result"},
			v1alpha1.OutcomeFailed, conditions.ReasonResultMissing, "", []string{job.Name}},
		{"a result the API cannot spell", replay, jobs.Succeeded,
			jobs.Report{Result: &task.Result{Task: task.Replay, Outcome: task.Succeeded, Replay: &task.ReplayResult{Divergence: &task.Divergence{Kind: "ledger", Reason: "X"}}}},
			v1alpha1.OutcomeFailed, conditions.ReasonResultCorrupt, "", []string{"cannot be written as status"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := decideRun(tc.fr, job, tc.state, tc.rep, price.Default())
			if d := cmp.Diff([]string{string(tc.outcome), tc.reason, tc.child}, []string{string(v.status.Outcome), v.reason, v.childID}); d != "" {
				t.Errorf("outcome, reason, child (-want +got):\n%s", d)
			}
			for _, s := range tc.msgSays {
				if !strings.Contains(v.message, s) {
					t.Errorf("message %q does not say %q", v.message, s)
				}
			}
		})
	}
}

func TestTheAgentsSecretsReachTheProxyGroupedBySecret(t *testing.T) {
	ref := func(name, secret, key string, optional bool) corev1.EnvVar {
		sel := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}
		if optional {
			sel.Optional = new(true)
		}
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: sel}}
	}
	env := agentEnv([]corev1.EnvVar{
		ref("B", "zeta", "b", true), ref("A", "alpha", ".token", false), ref("C", "alpha", "c", true), ref("D", "alpha", ".token", true),
		{Name: "PLAIN", Value: "x"}, ref(EnvOpenAIAPIKey, "keys", "openai", false), // replaced by the placeholder: not the agent's
	})
	want := []learnedSecret{
		{name: "alpha", items: []corev1.KeyToPath{{Key: ".token", Path: "key-0"}, {Key: "c", Path: "key-1"}}, optional: false},
		{name: "zeta", items: []corev1.KeyToPath{{Key: "b", Path: "key-0"}}, optional: true},
	}
	if d := cmp.Diff(want, learnedSecrets(env), cmp.AllowUnexported(learnedSecret{})); d != "" {
		t.Errorf("learned secrets (-want +got):\n%s", d)
	}
}
