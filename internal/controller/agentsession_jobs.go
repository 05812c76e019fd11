package controller

import (
	"context"
	"fmt"
	"strconv"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// verifyJob is the Job that verifies the session as the current generation describes it.
func (r *AgentSessionReconciler) verifyJob(s *v1alpha1.AgentSession, loc Location) (jobs.Spec, error) {
	spec := r.Jobs.spec()
	spec.Owner = s
	spec.Purpose = string(task.Verify)
	spec.Inputs = []string{strconv.FormatInt(s.Generation, 10), s.Spec.SessionID, loc.String()}
	spec.Args = r.Stores.jobArgs(loc, s.Spec.SessionID)
	r.Stores.jobStore(&spec, loc)
	return spec, nil
}

// verify runs the verify Job for this generation and, once it finished, writes what it found.
func (r *AgentSessionReconciler) verify(ctx context.Context, s *v1alpha1.AgentSession) (ctrl.Result, error) {
	loc := r.Stores.LocationOf(s)
	spec, err := r.verifyJob(s, loc)
	if err != nil {
		return ctrl.Result{}, err
	}
	desired, err := jobs.Build(spec, r.Scheme)
	if err != nil {
		return ctrl.Result{}, err
	}
	if conditions.RunSettled(s.Status.Conditions, s.Status.LastRun, s.Generation, desired.Name) {
		return ctrl.Result{}, nil // this generation's Job was read already
	}
	step, err := r.ensureJob(ctx, s, desired)
	if err != nil {
		return ctrl.Result{}, err
	}
	if step.state == jobs.Running {
		return r.markRunning(ctx, &s.Status.Conditions, s.Generation, step, fmt.Sprintf("verify Job %s is running", step.job.Name))
	}
	store, err := r.Stores.Open(ctx, loc)
	if err == nil {
		var rep jobs.Report
		if rep, err = jobs.Read(ctx, r.APIReader, store, step.job, task.Verify); err == nil {
			return r.applyVerify(ctx, s, step, rep)
		}
	}
	conditions.MarkReconciling(&s.Status.Conditions, s.Generation, v1alpha1.ReasonStorageUnavailable,
		fmt.Sprintf("the result of verify Job %s cannot be read yet: %v", step.job.Name, err))
	return ctrl.Result{}, err
}
