package controller

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// runVerdict is what a finished ForkRun Job means: the status fields of its result, the condition
// reason and message, and the child session a fork committed.
type runVerdict struct {
	status  v1alpha1.ForkRunStatus // outcome, divergences, firstDivergence, usage, provenance
	reason  string
	message string
	childID string
	atStep  int64 // the step the fork went live at, as the proxy reported it
}

// decideRun reads a finished Job: its result when the proxy left one, else why there is none. The
// result decides the outcome, with one exception: a run the proxy found healthy whose agent container
// failed is Failed, since the agent did not finish as recorded. Every message names the Job, which
// ties the final state to it (conditions.Settled). Usage is priced with prices.
func decideRun(fr *v1alpha1.ForkRun, job *batchv1.Job, state jobs.State, rep jobs.Report, prices *price.Table) runVerdict {
	name := forkTask(fr)
	failed := func(reason, msg string) runVerdict {
		return runVerdict{status: v1alpha1.ForkRunStatus{Outcome: v1alpha1.OutcomeFailed}, reason: reason, message: msg}
	}
	res := rep.Result
	switch {
	case res != nil && res.Outcome == task.Succeeded:
	case state == jobs.Failed || res != nil || (rep.Summary != nil && rep.Summary.Outcome == task.Failed):
		f := failureOf(job, rep)
		reason := v1alpha1.ReasonJobFailed
		if f.reason == task.ReasonInvalidInput {
			// The run was refused for what its spec asks (a request patch the live request has no
			// path for): the spec must change, not the cluster.
			reason = v1alpha1.ReasonInvalidSpec
		}
		return failed(reason, fmt.Sprintf("%s Job %s failed: %s", name, job.Name, f))
	default:
		return failed(rep.ProblemReason, rep.Problem)
	}

	st, err := apimap.ForkRunResult(res, prices)
	if err != nil {
		return failed(conditions.ReasonResultCorrupt, fmt.Sprintf("the result of %s Job %s cannot be written as status: %v", name, job.Name, err))
	}
	v := runVerdict{status: st, reason: string(st.Outcome)}
	var b strings.Builder
	fmt.Fprintf(&b, "%s Job %s: %s", name, job.Name, st.Outcome)
	var stop *task.Divergence
	switch {
	case res.Replay != nil:
		stop = res.Replay.Divergence
		fmt.Fprintf(&b, "; %d answers recorded, %d live", res.Replay.Provenance.Recorded, res.Replay.Provenance.Live)
	case res.Fork != nil:
		stop, v.childID, v.atStep = res.Fork.Divergence, res.Fork.ChildSessionID, res.Fork.AtStep
		fmt.Fprintf(&b, "; %d answers recorded, %d live, %d stubbed; %d tokens spent live",
			res.Fork.Provenance.Recorded, res.Fork.Provenance.Live, res.Fork.Provenance.Stub, res.Fork.TokensSpent.InputTokens+res.Fork.TokensSpent.OutputTokens)
		if g := fr.Spec.Goal.Tool; g != "" && res.Fork.ReachedGoal == nil {
			fmt.Fprintf(&b, "; the goal (tool %s) was not evaluated: the proxy reported no goal", g)
		}
	}
	if stop != nil {
		fmt.Fprintf(&b, "; stopped at step %d (%s): %s", stop.Step, stop.Reason, stop.Message)
	}
	if n := *st.Divergences; n > 0 && stop == nil {
		fmt.Fprintf(&b, "; %d tolerated drifts, the first at step %d", n, *st.FirstDivergence.Step)
	}
	if m := restoredManifest(job.Spec.Template.Spec); m != "" {
		// The proxy ran, so the restore ordered before it finished.
		fmt.Fprintf(&b, "; the workspace was restored from Checkpoint %s (manifest %.12s) before the agent started", fr.Spec.Fork.CheckpointRef.Name, m)
	}
	if state == jobs.Failed && apimap.Healthy(st.Outcome) {
		fmt.Fprintf(&b, "; but the agent container failed: %s", jobs.FailedMessage(job))
		v.status.Outcome, v.reason = v1alpha1.OutcomeFailed, v1alpha1.ReasonJobFailed
	}
	v.message = b.String()
	return v
}

// applyRun writes a finished Job's verdict: the child session a fork committed first, then the
// status, so a pass cut short creates the child again (idempotently) before the ForkRun settles.
func (r *ForkRunReconciler) applyRun(ctx context.Context, fr *v1alpha1.ForkRun, s *v1alpha1.AgentSession, step jobStep, rep jobs.Report) (ctrl.Result, error) {
	job := step.job
	r.Metrics.jobFinished(job, step.state)
	v := decideRun(fr, job, step.state, rep, r.Prices)
	if v.childID != "" && fr.Spec.Mode == v1alpha1.ModeFork {
		if err := r.ensureChild(ctx, fr, s, v.childID, v.atStep); err != nil {
			return ctrl.Result{}, err
		}
	}
	st := v.status
	st.Conditions, st.ObservedGeneration = fr.Status.Conditions, fr.Status.ObservedGeneration
	st.JobRef, st.ChildSessionRef, st.StartTime = fr.Status.JobRef, fr.Status.ChildSessionRef, fr.Status.StartTime
	st.CompletionTime = new(finishedAt(job, metav1.Time{Time: r.Clock.Now()}))
	st.LastRun = v1alpha1.JobRun{Name: job.Name, Generation: fr.Generation}
	fr.Status = st

	healthy := apimap.Healthy(st.Outcome)
	evType := corev1.EventTypeWarning
	if healthy {
		evType = corev1.EventTypeNormal
		conditions.MarkReady(&fr.Status.Conditions, fr.Generation, v.reason, v.message)
	} else {
		conditions.MarkStalled(&fr.Status.Conditions, fr.Generation, v.reason, v.message)
	}
	r.Recorder.Eventf(fr, job, evType, string(st.Outcome), "Run", "%s", apimap.Message(v.message))
	ctrl.LoggerFrom(ctx).Info("Finished ForkRun", "job", job.Name, "outcome", st.Outcome, "reason", v.reason)
	return ctrl.Result{}, nil
}

// finishedAt is when the Job finished, as the Job controller recorded it.
func finishedAt(job *batchv1.Job, now metav1.Time) metav1.Time {
	if t := job.Status.CompletionTime; t != nil {
		return *t
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime
		}
	}
	return now
}

// ensureChild creates the child AgentSession of a fork: named after the ForkRun, recording the
// session id the proxy committed into the parent's store, with parentRef and forkedAtStep. It has no
// owner reference on purpose: a child session is a recording of its own that outlives the ForkRun's
// TTL (deleting it would delete the recording); the label agentrewind.io/forkrun says where it came
// from. One of that name is adopted only if it records the same session. Its forkedAtStep is
// spec.fork.atStep, else (a fork from a Checkpoint) the step the proxy reported going live at.
func (r *ForkRunReconciler) ensureChild(ctx context.Context, fr *v1alpha1.ForkRun, s *v1alpha1.AgentSession, id string, atStep int64) error {
	name := childSessionName(fr)
	var child v1alpha1.AgentSession
	err := r.Get(ctx, client.ObjectKey{Namespace: fr.Namespace, Name: name}, &child)
	switch {
	case err == nil:
		if child.Spec.SessionID != id {
			return fmt.Errorf("AgentSession %s records session %s, not the fork's child %s", name, child.Spec.SessionID, id)
		}
		fr.Status.ChildSessionRef = v1alpha1.LocalObjectReference{Name: name}
		return nil
	case !apierrors.IsNotFound(err):
		return err
	}
	agent, _ := agentOf(fr, s)
	if at := fr.Spec.Fork.AtStep; at != nil {
		atStep = *at
	}
	child = v1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fr.Namespace},
		Spec: v1alpha1.AgentSessionSpec{SessionID: id, Storage: s.Spec.Storage, Agent: agent,
			ParentRef: v1alpha1.LocalObjectReference{Name: s.Name}, ForkedAtStep: new(atStep)},
	}
	if len(validation.IsValidLabelValue(fr.Name)) == 0 {
		child.Labels = map[string]string{LabelForkRun: fr.Name}
	}
	if err := r.Create(ctx, &child); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return errRequeue
		}
		return fmt.Errorf("creating child AgentSession %s: %w", name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Created child AgentSession", "agentSession", name, "sessionID", id)
	r.Recorder.Eventf(fr, &child, corev1.EventTypeNormal, "ChildSessionCreated", "Fork", "Created AgentSession %s for child session %s", name, id)
	fr.Status.ChildSessionRef = v1alpha1.LocalObjectReference{Name: name}
	return nil
}
