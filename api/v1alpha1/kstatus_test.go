package v1alpha1_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentrewind/agentrewind/api/v1alpha1"
)

// TestKstatusReadsEveryKindsHealth writes each kind's Ready, Reconciling and Stalled states through
// the API server and computes their health the way Argo CD and Flux do (kstatus): a corrupt session, a
// diverged run or a plan without evidence must not read as healthy.
func TestKstatusReadsEveryKindsHealth(t *testing.T) {
	ctx := context.Background()
	now := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	cond := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: reason, LastTransitionTime: now, ObservedGeneration: 1}
	}
	states := []struct {
		name       string
		conditions []metav1.Condition
		observed   int64
		want       status.Status
	}{
		{"ready", []metav1.Condition{cond(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonSucceeded),
			cond(v1.ConditionReconciling, metav1.ConditionFalse, v1.ReasonSucceeded), cond(v1.ConditionStalled, metav1.ConditionFalse, v1.ReasonSucceeded)},
			1, status.CurrentStatus},
		{"reconciling", []metav1.Condition{cond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonJobRunning),
			cond(v1.ConditionReconciling, metav1.ConditionTrue, v1.ReasonJobRunning)}, 1, status.InProgressStatus},
		{"stalled", []metav1.Condition{cond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonDiverged),
			cond(v1.ConditionStalled, metav1.ConditionTrue, v1.ReasonDiverged)}, 1, status.FailedStatus},
	}
	kinds := []struct {
		name string
		new  func(name string) client.Object
		set  func(o client.Object, c []metav1.Condition, observed int64)
	}{
		{"AgentSession", func(n string) client.Object { return validSession(n) }, func(o client.Object, c []metav1.Condition, g int64) {
			o.(*v1.AgentSession).Status = v1.AgentSessionStatus{Conditions: c, ObservedGeneration: g}
		}},
		{"Checkpoint", func(n string) client.Object { return validCheckpoint(n) }, func(o client.Object, c []metav1.Condition, g int64) {
			o.(*v1.Checkpoint).Status = v1.CheckpointStatus{Conditions: c, ObservedGeneration: g}
		}},
		{"ForkRun", func(n string) client.Object { return validFork(n) }, func(o client.Object, c []metav1.Condition, g int64) {
			o.(*v1.ForkRun).Status = v1.ForkRunStatus{Conditions: c, ObservedGeneration: g}
		}},
		{"ResumePlan", func(n string) client.Object { return validPlan(n) }, func(o client.Object, c []metav1.Condition, g int64) {
			o.(*v1.ResumePlan).Status = v1.ResumePlanStatus{Conditions: c, ObservedGeneration: g}
		}},
	}
	for _, k := range kinds {
		for _, s := range states {
			t.Run(k.name+"/"+s.name, func(t *testing.T) {
				obj := k.new("kstatus-" + s.name)
				obj.SetName("kstatus-" + map[string]string{"AgentSession": "ags", "Checkpoint": "ckpt", "ForkRun": "fork", "ResumePlan": "rp"}[k.name] + "-" + s.name[:4])
				if err := apiServer.Client.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
				k.set(obj, s.conditions, s.observed)
				if err := apiServer.Client.Status().Update(ctx, obj); err != nil {
					t.Fatalf("the API server refused the %s status: %v", s.name, err)
				}
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(v1.GroupVersion.WithKind(k.name))
				if err := apiServer.Client.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
					t.Fatal(err)
				}
				res, err := status.Compute(u)
				if err != nil {
					t.Fatal(err)
				}
				if res.Status != s.want {
					raw, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
					t.Fatalf("kstatus reads %s (%s), want %s\nstatus: %v", res.Status, res.Message, s.want, raw["status"])
				}
			})
		}
	}
}
