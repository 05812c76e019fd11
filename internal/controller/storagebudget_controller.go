package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// StorageBudgetReconciler reports, on each StorageBudget, the bytes its namespace's AgentSessions and
// Checkpoints keep in the store against the budget's limits: status, an OverBudget condition and an
// event when that changes. It counts from the objects' status in the cache and never deletes or
// refuses anything.
type StorageBudgetReconciler struct {
	Deps
}

// SetupWithManager registers the reconciler: a budget is counted again when a session's or a
// checkpoint of its namespace comes, goes or changes its stored bytes.
func (r *StorageBudgetReconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager) error {
	bytesChanged := builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return storedBytes(e.ObjectOld) != storedBytes(e.ObjectNew)
	}})
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.StorageBudget{}).
		Watches(&v1alpha1.AgentSession{}, handler.EnqueueRequestsFromMapFunc(r.budgetsOfNamespace), bytesChanged).
		Watches(&v1alpha1.Checkpoint{}, handler.EnqueueRequestsFromMapFunc(r.budgetsOfNamespace), bytesChanged).
		Named("storagebudget").
		Complete(r)
}

// storedBytes is what a session or checkpoint reports it keeps in the store; -1 for none.
func storedBytes(o client.Object) int64 {
	var v *int64
	switch o := o.(type) {
	case *v1alpha1.AgentSession:
		v = o.Status.Recording.Bytes
	case *v1alpha1.Checkpoint:
		v = o.Status.Snapshot.IncrementalBytes
	}
	if v == nil {
		return -1
	}
	return *v
}

// budgetsOfNamespace maps a session or checkpoint to the budgets of its namespace.
func (r *StorageBudgetReconciler) budgetsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return requestsFor(ctx, r, &v1alpha1.StorageBudgetList{}, o.GetNamespace(), "", "", "the StorageBudgets of a namespace")
}

// StorageBudget: usage counted from the cached sessions and checkpoints of its namespace.
// +kubebuilder:rbac:groups=agentrewind.io,resources=storagebudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentrewind.io,resources=storagebudgets/status,verbs=get;patch
// +kubebuilder:rbac:groups=agentrewind.io,resources=agentsessions,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentrewind.io,resources=checkpoints,verbs=get;list;watch

// Reconcile counts the namespace's usage and writes it into the budget's status.
func (r *StorageBudgetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b v1alpha1.StorageBudget
	if err := r.Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var sessions v1alpha1.AgentSessionList
	if err := r.List(ctx, &sessions, client.InNamespace(b.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	var checkpoints v1alpha1.CheckpointList
	if err := r.List(ctx, &checkpoints, client.InNamespace(b.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	base := b.DeepCopy()
	st := evaluateBudget(b.Spec, sumStorage(sessions.Items, checkpoints.Items))
	wasOver := meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ConditionOverBudget)
	applyBudgetStatus(&b, st)
	err := patchStatus(ctx, r.Client, &b, base, func(o client.Object) any { return o.(*v1alpha1.StorageBudget).Status })
	if err == nil && st.over != wasOver && r.Recorder != nil {
		// Only the pass whose write took the budget over (or back) tells: a conflicting pass wrote nothing.
		if st.over {
			r.Recorder.Eventf(&b, nil, corev1.EventTypeWarning, st.reason, "Count", "Over budget: %s", st.message)
		} else {
			r.Recorder.Eventf(&b, nil, corev1.EventTypeNormal, st.reason, "Count", "Within budget again: %s", st.message)
		}
	}
	return settle(ctx, ctrl.Result{}, err)
}

// setOverBudgetCondition sets OverBudget: True while a kind's bytes exceed its limit.
func setOverBudgetCondition(conds *[]metav1.Condition, generation int64, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: v1alpha1.ConditionOverBudget, Status: status, ObservedGeneration: generation, Reason: reason, Message: message})
}

// setBudgetReadyCondition sets Ready: the usage was counted (a budget over its limits is still Ready:
// it did what it is for, telling).
func setBudgetReadyCondition(conds *[]metav1.Condition, generation int64) {
	conditions.SetReady(conds, generation, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, "usage counted")
}
