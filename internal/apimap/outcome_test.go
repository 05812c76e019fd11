package apimap

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

func TestForkOutcomeFromTheJobResult(t *testing.T) {
	cases := []struct {
		name    string
		result  task.Result
		want    v1alpha1.ForkOutcome
		healthy bool
	}{
		{"a task that could not run failed", task.Result{Task: task.Fork, Outcome: task.Failed,
			Failure: &task.Failure{Reason: task.ReasonStorageUnavailable}}, v1alpha1.OutcomeFailed, false},
		{"a replay with no divergence passed", task.Result{Task: task.Replay, Outcome: task.Succeeded,
			Replay: &task.ReplayResult{Passed: true}}, v1alpha1.OutcomePassed, true},
		{"a replay that diverged", task.Result{Task: task.Replay, Outcome: task.Succeeded,
			Replay: &task.ReplayResult{Divergence: &task.Divergence{Step: 3}}}, v1alpha1.OutcomeDiverged, false},
		{"a fork that left the recording and stopped diverged, goal or not", task.Result{Task: task.Fork, Outcome: task.Succeeded,
			Fork: &task.ForkResult{DivergedAtStep: ptr.To[int64](2), ReachedGoal: ptr.To(false)}}, v1alpha1.OutcomeDiverged, false},
		{"a fork that reached its goal", task.Result{Task: task.Fork, Outcome: task.Succeeded,
			Fork: &task.ForkResult{ReachedGoal: ptr.To(true)}}, v1alpha1.OutcomeGoalReached, true},
		{"a fork that missed its goal", task.Result{Task: task.Fork, Outcome: task.Succeeded,
			Fork: &task.ForkResult{ReachedGoal: ptr.To(false)}}, v1alpha1.OutcomeGoalMissed, false},
		{"a fork without a goal completed", task.Result{Task: task.Fork, Outcome: task.Succeeded,
			Fork: &task.ForkResult{}}, v1alpha1.OutcomeCompleted, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ForkOutcome(&tc.result)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || Healthy(got) != tc.healthy {
				t.Fatalf("outcome %s (healthy %v), want %s (healthy %v)", got, Healthy(got), tc.want, tc.healthy)
			}
		})
	}
	if _, err := ForkOutcome(&task.Result{Task: task.Verify, Outcome: task.Succeeded, Verify: &task.VerifyResult{}}); err == nil {
		t.Fatal("a verify result was read as a fork outcome")
	}
}
