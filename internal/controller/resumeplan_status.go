package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// applyPlan writes what a finished resume-plan Job reported: the verdicts, or why there are none.
func (r *ResumePlanReconciler) applyPlan(ctx context.Context, rp *v1alpha1.ResumePlan, step jobStep, rep jobs.Report) (ctrl.Result, error) {
	job, gen := step.job, rp.Generation
	rp.Status.LastRun = v1alpha1.JobRun{Name: job.Name, Generation: gen}
	if res, handled, err := r.failedRun(ctx, rp, &rp.Status.Conditions, gen, step, rep, "resume-plan Job", v1alpha1.ReasonJobFailed, "Evaluate"); handled {
		return res, err
	}

	verdicts, err := apimap.ResumePlanVerdicts(rep.Result.ResumePlan)
	if err != nil {
		msg := fmt.Sprintf("the result of resume-plan Job %s cannot be written as status: %v", job.Name, err)
		conditions.MarkStalled(&rp.Status.Conditions, gen, conditions.ReasonResultCorrupt, msg)
		r.Recorder.Eventf(rp, job, corev1.EventTypeWarning, conditions.ReasonResultCorrupt, "Evaluate", "%s", apimap.Message(msg))
		return ctrl.Result{}, reconcile.TerminalError(errors.New(msg))
	}
	previous := rp.Status.Verdict
	verdicts.Conditions, verdicts.ObservedGeneration = rp.Status.Conditions, rp.Status.ObservedGeneration
	verdicts.EvaluatedAt = &metav1.Time{Time: r.Clock.Now()}
	rp.Status = verdicts
	msg := fmt.Sprintf("resume-plan Job %s: %s (%s)", job.Name, verdicts.Verdict, verdicts.Reason)
	conditions.MarkReady(&rp.Status.Conditions, gen, v1alpha1.ReasonVerdictComputed, msg)
	if previous != verdicts.Verdict {
		r.Recorder.Eventf(rp, job, corev1.EventTypeNormal, "VerdictChanged", "Evaluate", "Verdict %s (%s), was %s: %s",
			verdicts.Verdict, verdicts.Reason, orNone(string(previous)), apimap.Message(verdicts.Message))
	}
	ctrl.LoggerFrom(ctx).Info("Computed resume verdict", "job", job.Name, "verdict", verdicts.Verdict, "reason", verdicts.Reason)
	return ctrl.Result{}, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
