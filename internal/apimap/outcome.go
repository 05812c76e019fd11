package apimap

import (
	"fmt"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// ForkOutcome is how a finished ForkRun ended, read from its engine Job's result: a task that could not
// do its job Failed; a replay Passed or Diverged; a fork Diverged when it left the recording and
// stopped, else reached or missed its goal, or Completed when it had none.
func ForkOutcome(r *task.Result) (v1alpha1.ForkOutcome, error) {
	if r.Outcome == task.Failed {
		return v1alpha1.OutcomeFailed, nil
	}
	switch {
	case r.Task == task.Replay && r.Replay != nil:
		if r.Replay.Passed {
			return v1alpha1.OutcomePassed, nil
		}
		return v1alpha1.OutcomeDiverged, nil
	case r.Task == task.Fork && r.Fork != nil:
		f := r.Fork
		switch {
		case f.DivergedAtStep != nil:
			return v1alpha1.OutcomeDiverged, nil
		case f.ReachedGoal == nil:
			return v1alpha1.OutcomeCompleted, nil
		case *f.ReachedGoal:
			return v1alpha1.OutcomeGoalReached, nil
		default:
			return v1alpha1.OutcomeGoalMissed, nil
		}
	}
	return "", fmt.Errorf("a %s result is not the result of a fork or a replay", r.Task)
}

// Healthy says whether an outcome makes the ForkRun Ready: it passed, completed or reached its goal.
// Any other outcome is final too, and Stalls the ForkRun with the outcome as reason, so a GitOps tool
// reports a failed replay suite as failed rather than as healthy.
func Healthy(o v1alpha1.ForkOutcome) bool {
	switch o {
	case v1alpha1.OutcomePassed, v1alpha1.OutcomeCompleted, v1alpha1.OutcomeGoalReached:
		return true
	}
	return false
}
