package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// ReasonAnchorMismatch: the session's verification lists no recorder anchor with the Checkpoint's step,
// turn and digest, so the Checkpoint anchors nothing a rewind may go back to.
const ReasonAnchorMismatch = "AnchorMismatch"

// CheckpointReconciler checks a Checkpoint's anchor against its session's verification and, when the
// Checkpoint asks for one, captures the workspace into the store in a checkpoint Job. It never mints a
// Checkpoint: the AgentSession controller does, from the recorder's anchors.
type CheckpointReconciler struct {
	Deps
}

// SetupWithManager registers the reconciler: it owns its snapshot Jobs and watches the sessions whose
// verification its anchors are checked against.
func (r *CheckpointReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.Checkpoint{}, sessionRefField, func(o client.Object) []string {
		return []string{o.(*v1alpha1.Checkpoint).Spec.SessionRef.Name}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Checkpoint{}).
		Owns(&batchv1.Job{}).
		Watches(&v1alpha1.AgentSession{}, handler.EnqueueRequestsFromMapFunc(r.checkpointsOfSession)).
		Named("checkpoint").
		Complete(r)
}

// checkpointsOfSession maps an AgentSession to its Checkpoints.
func (r *CheckpointReconciler) checkpointsOfSession(ctx context.Context, o client.Object) []reconcile.Request {
	return requestsFor(ctx, r, &v1alpha1.CheckpointList{}, o.GetNamespace(), sessionRefField, o.GetName(), "the Checkpoints of a session")
}

// sessionCheckpoints lists the Checkpoints that name a session.
func (r *CheckpointReconciler) sessionCheckpoints(ctx context.Context, namespace, session string) ([]v1alpha1.Checkpoint, error) {
	var list v1alpha1.CheckpointList
	if err := r.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{sessionRefField: session}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// Checkpoint: anchors checked against their session's verify result, snapshot Jobs over a workspace
// claim. Only the operator writes a Checkpoint's status (config/policy/checkpoint_minter.yaml).
// +kubebuilder:rbac:groups=agentrewind.io,resources=checkpoints,verbs=create;get;list;watch;patch
// +kubebuilder:rbac:groups=agentrewind.io,resources=checkpoints/status,verbs=get;patch
// +kubebuilder:rbac:groups=agentrewind.io,resources=checkpoints/finalizers,verbs=update
// +kubebuilder:rbac:groups=agentrewind.io,resources=agentsessions,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list

// Reconcile is get → the session's verification → the anchor → the snapshot Job → status, with one
// status patch.
func (r *CheckpointReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var ck v1alpha1.Checkpoint
	if err := r.Get(ctx, req.NamespacedName, &ck); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ck.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // its manifest is shared by deduplication: only the blob sweep removes it
	}
	base := ck.DeepCopy()
	defer func() {
		ck.Status.ObservedGeneration = ck.Generation
		err = passError(err, patchStatus(ctx, r.Client, &ck, base, func(o client.Object) any { return o.(*v1alpha1.Checkpoint).Status }))
		r.Metrics.checkpointWritten(base, &ck, err)
		res, err = settle(ctx, res, err)
	}()

	var s v1alpha1.AgentSession
	if err := r.Get(ctx, types.NamespacedName{Namespace: ck.Namespace, Name: ck.Spec.SessionRef.Name}, &s); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		conditions.MarkReconciling(&ck.Status.Conditions, ck.Generation, conditions.ReasonWaitingForSession,
			fmt.Sprintf("AgentSession %s does not exist", ck.Spec.SessionRef.Name))
		return ctrl.Result{}, nil
	}
	var snapshot *batchv1.Job
	if wantsSnapshot(&ck) {
		if snapshot, err = jobs.Build(r.snapshotJob(&ck, &s), r.Scheme); err != nil {
			return ctrl.Result{}, err
		}
		if conditions.Settled(ck.Status.Conditions, ck.Generation, snapshot.Name) {
			return ctrl.Result{}, nil // the workspace was captured (or failed to be) for good
		}
	}
	v, done, err := r.anchorOf(ctx, &ck, &s)
	if done || err != nil {
		return ctrl.Result{}, err
	}
	if snapshot == nil {
		msg := fmt.Sprintf("the verification of AgentSession %s (Job %s) lists this anchor: step %d, turn %d; no workspace snapshot was asked for",
			s.Name, v.job, *ck.Spec.Step, *ck.Spec.TurnIndex)
		conditions.MarkReady(&ck.Status.Conditions, ck.Generation, v1alpha1.ReasonAnchorOnly, msg)
		return ctrl.Result{}, nil
	}
	return r.capture(ctx, &ck, &s, snapshot)
}

// wantsSnapshot says whether the Checkpoint asks for a snapshot of a workspace, not an anchor only.
func wantsSnapshot(ck *v1alpha1.Checkpoint) bool { return ck.Spec.Workspace.Volume.ClaimName != "" }

// verification is a session's verify result as a Checkpoint reads it, with the Job that produced it.
type verification struct {
	job    string
	result *task.VerifyResult
}

// anchorOf checks the Checkpoint's anchor against the session's verification of its current
// generation. done is true when status was written and the pass has nothing more to do: the session is
// not verified yet, cannot be, or does not hold the anchor. A Checkpoint settled on a verify Job is
// checked again only when the session is verified anew (a new generation names a new Job).
func (r *CheckpointReconciler) anchorOf(ctx context.Context, ck *v1alpha1.Checkpoint, s *v1alpha1.AgentSession) (verification, bool, error) {
	gen := ck.Generation
	verified := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SessionConditionVerified)
	if verified != nil && verified.Status == metav1.ConditionFalse && verified.Reason != v1alpha1.ReasonSessionNotFound {
		conditions.MarkStalled(&ck.Status.Conditions, gen, conditions.ReasonSessionNotVerified,
			fmt.Sprintf("AgentSession %s failed verification (%s), so its anchors cannot be trusted", s.Name, verified.Reason))
		return verification{}, true, nil
	}
	spec, err := (&AgentSessionReconciler{Deps: r.Deps}).verifyJob(s, r.Stores.LocationOf(s))
	if err != nil {
		return verification{}, true, err
	}
	name := jobs.Name(s.Name, spec.Purpose, spec.Inputs...)
	if verified == nil || verified.Status != metav1.ConditionTrue || verified.ObservedGeneration != s.Generation ||
		!conditions.RunSettled(s.Status.Conditions, s.Status.LastRun, s.Generation, name) {
		conditions.MarkReconciling(&ck.Status.Conditions, gen, conditions.ReasonWaitingForSession,
			fmt.Sprintf("waiting for AgentSession %s to be verified", s.Name))
		return verification{}, true, nil
	}
	if conditions.Settled(ck.Status.Conditions, gen, name) {
		return verification{}, true, nil // judged against this verification already
	}
	var job batchv1.Job
	if err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &job); err != nil {
		if !apierrors.IsNotFound(err) {
			return verification{}, true, err
		}
		conditions.MarkStalled(&ck.Status.Conditions, gen, conditions.ReasonWaitingForSession,
			fmt.Sprintf("the result of verify Job %s of AgentSession %s is gone with the Job; the session's next verification checks this anchor", name, s.Name))
		return verification{}, true, nil
	}
	store, err := r.Stores.Open(ctx, r.Stores.LocationOf(s))
	var rep jobs.Report
	if err == nil {
		rep, err = jobs.Read(ctx, r.APIReader, store, &job, task.Verify)
	}
	if err != nil {
		conditions.MarkReconciling(&ck.Status.Conditions, gen, v1alpha1.ReasonStorageUnavailable,
			fmt.Sprintf("the result of verify Job %s cannot be read yet: %v", name, err))
		return verification{}, true, err
	}
	if rep.Result == nil || rep.Result.Verify == nil {
		reason, msg := rep.ProblemReason, rep.Problem
		if reason == "" {
			reason, msg = conditions.ReasonResultMissing, fmt.Sprintf("verify Job %s left no verify result", name)
		}
		conditions.MarkStalled(&ck.Status.Conditions, gen, reason, msg)
		return verification{}, true, nil
	}
	v := verification{job: name, result: rep.Result.Verify}
	if msg, ok := matchAnchor(ck.Spec, v); !ok {
		conditions.MarkStalled(&ck.Status.Conditions, gen, ReasonAnchorMismatch, msg)
		r.Recorder.Eventf(ck, nil, corev1.EventTypeWarning, ReasonAnchorMismatch, "Verify", "%s", apimap.Message(msg))
		return verification{}, true, nil
	}
	return v, false, nil
}

// matchAnchor says whether the verification lists the Checkpoint's anchor, and if not, why not.
func matchAnchor(spec v1alpha1.CheckpointSpec, v verification) (string, bool) {
	step, turn := *spec.Step, int(*spec.TurnIndex)
	a, ok := v.result.Anchor(step)
	switch {
	case ok && a.TurnIndex == turn && a.TranscriptDigest == spec.TranscriptDigest:
		return "", true
	case ok:
		return fmt.Sprintf("the verification of AgentSession %s (Job %s) lists the anchor at step %d with turn %d and digest %.12s, not turn %d and digest %.12s",
			spec.SessionRef.Name, v.job, step, a.TurnIndex, a.TranscriptDigest, turn, spec.TranscriptDigest), false
	case v.result.TotalAnchors > int64(len(v.result.Anchors)):
		return fmt.Sprintf("the verification of AgentSession %s (Job %s) lists no recorder anchor at step %d among the latest %d of its %d anchors",
			spec.SessionRef.Name, v.job, step, len(v.result.Anchors), v.result.TotalAnchors), false
	}
	return fmt.Sprintf("the verification of AgentSession %s (Job %s) lists no recorder anchor at step %d (%d anchors)",
		spec.SessionRef.Name, v.job, step, v.result.TotalAnchors), false
}
