package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// SessionFinalizer keeps an AgentSession until its own objects in the store are deleted.
const SessionFinalizer = "agentrewind.io/session-data"

// sessionIDField indexes AgentSessions by spec.sessionID, to find the sessions sharing a recording.
const sessionIDField = "spec.sessionID"

// AgentSessionReconciler records a session whose spec asks for it in a Job, verifies the recorded
// session in a Job, writes what it found into status, creates the session's ResumePlan, and deletes
// the session's stored objects when it is deleted.
type AgentSessionReconciler struct {
	Deps
}

// SetupWithManager registers the reconciler: it owns its recording and verify Jobs and its ResumePlan.
func (r *AgentSessionReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.AgentSession{}, sessionIDField, func(o client.Object) []string {
		return []string{o.(*v1alpha1.AgentSession).Spec.SessionID}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.AgentSession{}).
		Owns(&batchv1.Job{}).
		Owns(&v1alpha1.ResumePlan{}).
		Named("agentsession").
		Complete(r)
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

// Reconcile is get → finalizer → deletion → ResumePlan → recording → verify, with one status patch
// at the end.
func (r *AgentSessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var s v1alpha1.AgentSession
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return settle(ctx, ctrl.Result{}, r.finalize(ctx, &s))
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
		if perr := patchStatus(ctx, r.Client, &s, base, func(o client.Object) any { return o.(*v1alpha1.AgentSession).Status }); perr != nil && err == nil {
			err = perr
		}
		res, err = settle(ctx, res, err)
	}()
	if err := r.ensureResumePlan(ctx, &s); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.mirrorResumePlan(ctx, &s); err != nil {
		return ctrl.Result{}, err
	}
	if proceed, err := r.record(ctx, &s); !proceed || err != nil {
		return ctrl.Result{}, err
	}
	return r.verify(ctx, &s)
}

// ensureResumePlan creates the session's ResumePlan, of the same name and owned by it, when there is
// none. A ResumePlan of that name made by hand is left as it is.
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
func (r *AgentSessionReconciler) finalize(ctx context.Context, s *v1alpha1.AgentSession) error {
	if !controllerutil.ContainsFinalizer(s, SessionFinalizer) {
		return nil
	}
	log := ctrl.LoggerFrom(ctx)
	loc := r.Stores.LocationOf(s)
	shared, err := r.sharedWith(ctx, s, loc)
	if err != nil {
		return err
	}
	if shared != "" {
		log.Info("Kept the session's stored objects: another AgentSession records the same session", "other", shared)
	} else {
		store, err := r.Stores.Open(ctx, loc)
		if err != nil {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, v1alpha1.ReasonStorageUnavailable, "Delete", "Cannot delete the stored session yet: %v", err)
			return fmt.Errorf("opening %s to delete session %s: %w", loc, s.Spec.SessionID, err)
		}
		n, err := store.DeleteSession(ctx, s.Spec.SessionID)
		if err != nil {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, v1alpha1.ReasonStorageUnavailable, "Delete", "Cannot delete the stored session yet: %v", err)
			return err
		}
		log.Info("Deleted the session's stored objects", "store", loc.String(), "sessionID", s.Spec.SessionID, "objects", n)
	}
	base := s.DeepCopy()
	controllerutil.RemoveFinalizer(s, SessionFinalizer)
	return r.Patch(ctx, s, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
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
