package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// setVerified sets the AgentSession's Verified condition.
func setVerified(s *v1alpha1.AgentSession, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: v1alpha1.SessionConditionVerified, Status: status,
		Reason: reason, Message: apimap.Message(message), ObservedGeneration: s.Generation})
}

// applyVerify writes what a finished verify Job reported. Every final state names the Job, which ties
// it to the inputs the Job was named after (conditions.Settled).
func (r *AgentSessionReconciler) applyVerify(ctx context.Context, s *v1alpha1.AgentSession, step jobStep, rep jobs.Report) (ctrl.Result, error) {
	job, gen := step.job, s.Generation
	s.Status.LastRun = v1alpha1.JobRun{Name: job.Name, Generation: gen}
	failed := step.state == jobs.Failed || (rep.Result != nil && rep.Result.Outcome == task.Failed) ||
		(rep.Summary != nil && rep.Summary.Outcome == task.Failed)
	switch {
	case failed:
		f := failureOf(job, rep)
		msg := fmt.Sprintf("verify Job %s failed: %s", job.Name, f)
		if f.retryable() {
			reason := string(f.reason)
			if f.reason == task.ReasonSessionNotFound {
				setVerified(s, metav1.ConditionFalse, v1alpha1.ReasonSessionNotFound, msg)
			}
			conditions.MarkReconciling(&s.Status.Conditions, gen, reason, msg+"; it runs again after "+r.Jobs.RetryAfter.String())
			return r.retryLater(ctx, job)
		}
		reason := v1alpha1.ReasonJobFailed
		if f.reason == task.ReasonSessionCorrupt {
			reason = v1alpha1.ReasonSessionCorrupt
			setVerified(s, metav1.ConditionFalse, reason, msg)
		}
		conditions.MarkStalled(&s.Status.Conditions, gen, reason, msg)
		r.Recorder.Eventf(s, job, corev1.EventTypeWarning, v1alpha1.ReasonJobFailed, "Verify", "%s", apimap.Message(msg))
		return ctrl.Result{}, reconcile.TerminalError(errors.New(msg))
	case rep.ProblemReason != "":
		conditions.MarkStalled(&s.Status.Conditions, gen, rep.ProblemReason, rep.Problem)
		r.Recorder.Eventf(s, job, corev1.EventTypeWarning, rep.ProblemReason, "Verify", "%s", apimap.Message(rep.Problem))
		return ctrl.Result{}, reconcile.TerminalError(errors.New(rep.Problem))
	}

	v := rep.Result.Verify
	if !v.Intact {
		reason := apimap.VerifyProblemReason(v)
		msg := fmt.Sprintf("verify Job %s found session %s unusable: %s", job.Name, s.Spec.SessionID, v.Problem)
		s.Status.Recording = v1alpha1.SessionRecording{}
		setVerified(s, metav1.ConditionFalse, reason, msg)
		conditions.MarkStalled(&s.Status.Conditions, gen, reason, msg)
		r.Recorder.Eventf(s, job, corev1.EventTypeWarning, reason, "Verify", "%s", apimap.Message(msg))
		return ctrl.Result{}, nil
	}
	// The anchors become Checkpoints before the session is marked Verified: a pass that cannot create
	// them leaves the result unread, and the next pass mints them from it again.
	if err := r.mintCheckpoints(ctx, s, v); err != nil {
		return ctrl.Result{}, err
	}
	s.Status.Recording = apimap.SessionRecording(v, r.Prices)
	msg := fmt.Sprintf("verify Job %s: %d events, %d steps, %d blobs, every digest matched", job.Name, v.Events, v.Steps, v.Blobs)
	wasVerified := meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.SessionConditionVerified)
	setVerified(s, metav1.ConditionTrue, v1alpha1.ReasonVerified, msg)
	conditions.MarkReady(&s.Status.Conditions, gen, v1alpha1.ReasonVerified, msg)
	if !wasVerified {
		r.Recorder.Eventf(s, job, corev1.EventTypeNormal, v1alpha1.ReasonVerified, "Verify", "%s", msg)
	}
	ctrl.LoggerFrom(ctx).Info("Verified session", "sessionID", s.Spec.SessionID, "job", job.Name, "events", v.Events)
	return ctrl.Result{}, nil
}
