package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
)

// sessionRefField indexes ResumePlans by the session they judge.
const sessionRefField = "spec.sessionRef.name"

// ResumePlanReconciler judges a session in a resume-plan Job and writes the verdicts into status. It
// judges again when the session's event log changes (a new eventsHash) or the plan's spec does.
type ResumePlanReconciler struct {
	Deps
	// RulesVersion is the version of the verdict rules the engine applies (0: resume.RulesVersion,
	// the engine built with this manager). It is an input of the resume-plan Job, so a plan judged
	// under other rules is judged again once, after an upgrade that changed them.
	RulesVersion int
}

// SetupWithManager registers the reconciler: it owns its Jobs and watches the sessions it judges. Like
// the session's controller, it reacts only to changes it has work for: a new spec, a Job that
// finished, a session whose verification or event log changed; not to its own status writes.
func (r *ResumePlanReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ResumePlan{}, sessionRefField, func(o client.Object) []string {
		return []string{o.(*v1alpha1.ResumePlan).Spec.SessionRef.Name}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ResumePlan{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&batchv1.Job{}, builder.WithPredicates(jobStateChanged)).
		Watches(&v1alpha1.AgentSession{}, handler.EnqueueRequestsFromMapFunc(r.plansOfSession), builder.WithPredicates(sessionEvidenceChanged)).
		Named("resumeplan").
		Complete(r)
}

// sessionEvidenceChanged passes an AgentSession that appeared or went, and one whose generation,
// Verified condition or recorded event log (eventsHash) changed: what a plan judges or waits for. The
// rest of its status, the verdict mirrored from the plan among it, changes nothing for the plan.
var sessionEvidenceChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*v1alpha1.AgentSession), e.ObjectNew.(*v1alpha1.AgentSession)
		return o.Generation != n.Generation || o.Status.Recording.EventsHash != n.Status.Recording.EventsHash ||
			verifiedState(o) != verifiedState(n)
	},
}

// verifiedFacts are what a plan reads of a session's Verified condition.
type verifiedFacts struct {
	status     metav1.ConditionStatus
	reason     string
	generation int64
}

// verifiedState is the session's verifiedFacts; the zero value when it has no Verified condition.
func verifiedState(s *v1alpha1.AgentSession) verifiedFacts {
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SessionConditionVerified)
	if c == nil {
		return verifiedFacts{}
	}
	return verifiedFacts{status: c.Status, reason: c.Reason, generation: c.ObservedGeneration}
}

// plansOfSession maps an AgentSession to the ResumePlans that judge it.
func (r *ResumePlanReconciler) plansOfSession(ctx context.Context, o client.Object) []reconcile.Request {
	return requestsFor(ctx, r, &v1alpha1.ResumePlanList{}, o.GetNamespace(), sessionRefField, o.GetName(), "the ResumePlans of a session")
}

// ResumePlan: resume-plan Jobs over the sessions it judges.
// +kubebuilder:rbac:groups=agentrewind.io,resources=resumeplans,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentrewind.io,resources=resumeplans/status,verbs=get;patch
// +kubebuilder:rbac:groups=agentrewind.io,resources=resumeplans/finalizers,verbs=update
// +kubebuilder:rbac:groups=agentrewind.io,resources=agentsessions,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list

// Reconcile is get → the session's facts → the resume-plan Job → status, with one status patch; a
// plan its session made, seen before the session's verification is, waits without a write.
func (r *ResumePlanReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var rp v1alpha1.ResumePlan
	if err := r.Get(ctx, req.NamespacedName, &rp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rp.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // nothing of its own in the store: its Jobs go with it
	}
	var s v1alpha1.AgentSession
	serr := r.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: rp.Spec.SessionRef.Name}, &s)
	if serr == nil && len(rp.Status.Conditions) == 0 && metav1.IsControlledBy(&rp, &s) && !verificationDone(&s) {
		// The session made this plan in the pass that wrote its verification: a cache that does not show
		// that yet lags behind, and the session's update brings the plan back here. Nothing is written
		// meanwhile, not even the observed generation.
		return ctrl.Result{}, nil
	}
	base := rp.DeepCopy()
	defer func() {
		rp.Status.ObservedGeneration = rp.Generation
		err = passError(err, patchStatus(ctx, r.Client, &rp, base, func(o client.Object) any { return o.(*v1alpha1.ResumePlan).Status }))
		res, err = settle(ctx, res, err)
	}()

	if serr != nil {
		if client.IgnoreNotFound(serr) != nil {
			return ctrl.Result{}, serr
		}
		if sessionCollectedSaid(&rp) {
			return ctrl.Result{}, nil // said as the session went: it will not come back by itself
		}
		conditions.MarkReconciling(&rp.Status.Conditions, rp.Generation, conditions.ReasonWaitingForSession,
			fmt.Sprintf("AgentSession %s does not exist", rp.Spec.SessionRef.Name))
		return ctrl.Result{}, nil
	}
	if collected(&s) {
		markPlanCollected(&rp, &s)
		return ctrl.Result{}, nil
	}
	verified := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SessionConditionVerified)
	switch {
	case verified != nil && verified.Status == metav1.ConditionFalse && verified.Reason != v1alpha1.ReasonSessionNotFound:
		conditions.MarkStalled(&rp.Status.Conditions, rp.Generation, conditions.ReasonSessionNotVerified,
			fmt.Sprintf("AgentSession %s failed verification (%s), so it cannot be judged", s.Name, verified.Reason))
		return ctrl.Result{}, nil
	case verified == nil || verified.Status != metav1.ConditionTrue || s.Status.Recording.EventsHash == "":
		conditions.MarkReconciling(&rp.Status.Conditions, rp.Generation, conditions.ReasonWaitingForSession,
			fmt.Sprintf("waiting for AgentSession %s to be verified", s.Name))
		return ctrl.Result{}, nil
	}
	return r.judge(ctx, &rp, &s)
}
