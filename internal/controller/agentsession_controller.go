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
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// SessionFinalizer keeps an AgentSession until its own objects in the store are deleted.
const SessionFinalizer = "agentrewind.io/session-data"

// sessionIDField indexes AgentSessions by spec.sessionID, to find the sessions sharing a recording.
const sessionIDField = "spec.sessionID"

// AgentSessionReconciler records a session whose spec asks for it in a Job, verifies the recorded
// session in a Job, writes what it found into status, creates the session's ResumePlan once the
// session is verified (or found unusable), and deletes the session's stored objects when it is deleted.
type AgentSessionReconciler struct {
	Deps
}

// SetupWithManager registers the reconciler: it owns its recording and verify Jobs, and watches the
// ResumePlans of its sessions.
// It reacts only to the changes it has work for (sessionChanged, jobStateChanged, planVerdictChanged):
// an event of its own finalizer or status write would start a pass on a cache that may not hold that
// write yet, whose status patch the API server then refuses with a conflict.
func (r *AgentSessionReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.AgentSession{}, sessionIDField, func(o client.Object) []string {
		return []string{o.(*v1alpha1.AgentSession).Spec.SessionID}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.AgentSession{}, builder.WithPredicates(sessionChanged)).
		Owns(&batchv1.Job{}, builder.WithPredicates(jobStateChanged)).
		// By spec.sessionRef, not by owner: a ResumePlan made by hand has none, and its verdict is
		// mirrored as promptly as the one the session made.
		Watches(&v1alpha1.ResumePlan{}, handler.EnqueueRequestsFromMapFunc(sessionOfPlan), builder.WithPredicates(planVerdictChanged)).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(r.sharersOfRecording), builder.WithPredicates(jobStateChanged)).
		Named("agentsession").
		Complete(r)
}

// sessionChanged passes an AgentSession's creation and deletion, a new generation (a deletion bumps it
// too) and a lost finalizer; not the controller's own finalizer and status writes, nor another's status
// write (the garbage collector's reachability), none of which leaves it anything to do.
var sessionChanged = predicate.Or[client.Object](predicate.GenerationChangedPredicate{},
	predicate.NewPredicateFuncs(func(o client.Object) bool {
		return !o.GetDeletionTimestamp().IsZero() || !controllerutil.ContainsFinalizer(o, SessionFinalizer)
	}))

// sessionOfPlan maps a ResumePlan to the AgentSession it judges.
func sessionOfPlan(_ context.Context, o client.Object) []reconcile.Request {
	rp := o.(*v1alpha1.ResumePlan)
	if rp.Spec.SessionRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rp.Namespace, Name: rp.Spec.SessionRef.Name}}}
}

// planVerdictChanged passes a ResumePlan whose verdict or reachability changed, the two things the
// session mirrors, and one that is gone (the session makes it again); not its creation by the session
// nor its other status writes. A plan first seen with a verdict (a relist) passes too.
var planVerdictChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return e.Object.(*v1alpha1.ResumePlan).Status.Verdict != "" },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*v1alpha1.ResumePlan), e.ObjectNew.(*v1alpha1.ResumePlan)
		return o.Status.Verdict != n.Status.Verdict || o.Status.Reachability != n.Status.Reachability
	},
}

// AgentSession: recording and verify Jobs, its ResumePlan, the Checkpoints of its anchors, the finalizer. Pods are
// read (never watched) for Job termination messages; Secrets are read (never listed) only to open a
// tenant's own bucket (spec.storage.credentials) when the finalizer deletes a session: Jobs get every
// credential as a Secret key reference, so the manager never reads the values it hands them.
// +kubebuilder:rbac:groups=agentrewind.io,resources=agentsessions,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=agentrewind.io,resources=agentsessions/status,verbs=get;patch
// +kubebuilder:rbac:groups=agentrewind.io,resources=agentsessions/finalizers,verbs=update
// +kubebuilder:rbac:groups=agentrewind.io,resources=resumeplans,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=agentrewind.io,resources=checkpoints,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Reconcile is get → finalizer → deletion → the ResumePlan's verdict → recording → verify → the
// ResumePlan, with one status patch at the end.
func (r *AgentSessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var s v1alpha1.AgentSession
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		res, err := r.finalize(ctx, &s)
		return settle(ctx, res, err)
	}
	if !controllerutil.ContainsFinalizer(&s, SessionFinalizer) {
		base := s.DeepCopy()
		controllerutil.AddFinalizer(&s, SessionFinalizer)
		if err := r.Patch(ctx, &s, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return settle(ctx, ctrl.Result{}, err)
		}
	}

	base := s.DeepCopy()
	defer func() {
		s.Status.ObservedGeneration = s.Generation
		err = passError(err, patchStatus(ctx, r.Client, &s, base, func(o client.Object) any { return o.(*v1alpha1.AgentSession).Status }))
		res, err = settle(ctx, res, err)
	}()
	if err := r.mirrorResumePlan(ctx, &s); err != nil {
		return ctrl.Result{}, err
	}
	if proceed, again, err := r.record(ctx, &s); !proceed || err != nil {
		return ctrl.Result{RequeueAfter: again}, err
	}
	if res, err = r.verify(ctx, &s); err != nil || !verificationDone(&s) {
		return res, err
	}
	return res, r.ensureResumePlan(ctx, &s)
}

// verificationDone says whether this generation's verification came to an end: the session is
// verified, or found unusable for good. Only then is there something for a ResumePlan to judge or to
// refuse; made earlier, the plan would only write that it waits.
func verificationDone(s *v1alpha1.AgentSession) bool {
	v := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SessionConditionVerified)
	return v != nil && v.ObservedGeneration == s.Generation &&
		(v.Status == metav1.ConditionTrue || v.Reason != v1alpha1.ReasonSessionNotFound)
}

// ensureResumePlan creates the session's ResumePlan, of the same name and owned by it, when there is
// none. A ResumePlan of that name made by hand is left as it is. It runs once the verification is done,
// first in the pass that writes it, before the status patch: the plan's controller may see the plan
// before the session's new status, and then waits for it without a write (ResumePlanReconciler.Reconcile).
func (r *AgentSessionReconciler) ensureResumePlan(ctx context.Context, s *v1alpha1.AgentSession) error {
	var rp v1alpha1.ResumePlan
	err := r.Get(ctx, client.ObjectKeyFromObject(s), &rp)
	if !apierrors.IsNotFound(err) {
		return err
	}
	rp = v1alpha1.ResumePlan{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
		Spec:       v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: s.Name}},
	}
	if err := controllerutil.SetControllerReference(s, &rp, r.Scheme); err != nil {
		return err
	}
	if err := r.Create(ctx, &rp); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return errRequeue
		}
		return fmt.Errorf("creating ResumePlan %s: %w", rp.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Created ResumePlan", "resumePlan", rp.Name)
	r.Recorder.Eventf(s, &rp, corev1.EventTypeNormal, "ResumePlanCreated", "Create", "Created ResumePlan %s", rp.Name)
	return nil
}

// mirrorResumePlan copies the verdict of the session's ResumePlan into its status, and its reachability
// until the garbage collector has written one: the collector owns reachability, since pins, forks,
// readers and checkpoints keep a run reachable that its verdict alone would let go.
func (r *AgentSessionReconciler) mirrorResumePlan(ctx context.Context, s *v1alpha1.AgentSession) error {
	var rp v1alpha1.ResumePlan
	if err := r.Get(ctx, client.ObjectKeyFromObject(s), &rp); err != nil {
		return client.IgnoreNotFound(err)
	}
	if rp.Spec.SessionRef.Name != s.Name {
		return nil
	}
	s.Status.ResumeVerdict = rp.Status.Verdict
	if s.Status.Reachability.State == "" {
		s.Status.Reachability = rp.Status.Reachability
	}
	return nil
}

// finalize deletes the session's own objects from the store, then lets the AgentSession go. A store
// that cannot be reached keeps the finalizer: the next pass tries again.
//
// A recording still running is stopped first, and the objects deleted only once its Job is gone:
// its proxy commits the run when it is stopped, so objects deleted before would come back, a
// session in the store no AgentSession records (the store sync would even make it one again).
func (r *AgentSessionReconciler) finalize(ctx context.Context, s *v1alpha1.AgentSession) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s, SessionFinalizer) {
		return ctrl.Result{}, nil
	}
	if gone, err := r.stopRecording(ctx, s); err != nil || !gone {
		return ctrl.Result{RequeueAfter: recordingStopRequeue}, err
	}
	log := ctrl.LoggerFrom(ctx)
	loc := r.Stores.LocationOf(s)
	shared, err := r.sharedWith(ctx, s, loc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if shared != "" {
		log.Info("Kept the session's stored objects: another AgentSession records the same session", "other", shared)
	} else {
		store, err := r.Stores.Open(ctx, loc)
		if err != nil {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, v1alpha1.ReasonStorageUnavailable, "Delete", "Cannot delete the stored session yet: %v", err)
			return ctrl.Result{}, fmt.Errorf("opening %s to delete session %s: %w", loc, s.Spec.SessionID, err)
		}
		n, err := store.DeleteSession(ctx, s.Spec.SessionID)
		if err != nil {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, v1alpha1.ReasonStorageUnavailable, "Delete", "Cannot delete the stored session yet: %v", err)
			return ctrl.Result{}, err
		}
		log.Info("Deleted the session's stored objects", "store", loc.String(), "sessionID", s.Spec.SessionID, "objects", n)
	}
	base := s.DeepCopy()
	controllerutil.RemoveFinalizer(s, SessionFinalizer)
	return ctrl.Result{}, r.Patch(ctx, s, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// sharedWith names another live AgentSession recording the same session in the same store, if any:
// its objects are then not this one's to delete.
func (r *AgentSessionReconciler) sharedWith(ctx context.Context, s *v1alpha1.AgentSession, loc Location) (string, error) {
	var list v1alpha1.AgentSessionList
	if err := r.List(ctx, &list, client.MatchingFields{sessionIDField: s.Spec.SessionID}); err != nil {
		return "", err
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == s.UID || !o.DeletionTimestamp.IsZero() {
			continue
		}
		if l := r.Stores.LocationOf(o); l.String() == loc.String() {
			return o.Namespace + "/" + o.Name, nil
		}
	}
	return "", nil
}
