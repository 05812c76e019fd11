package controller

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
)

// TestTheSessionMakesItsPlanOnceVerified: the session's ResumePlan is made with the verification, not
// before (made earlier, it would only write that it waits: a write per session for nothing); a plan the
// session controls, seen before the session's verification, waits without writing anything, while one
// made by hand says it waits for the session; once the session is verified, both run their Jobs.
func TestTheSessionMakesItsPlanOnceVerified(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "run-1", strings.Repeat("result ", 40), false))
	e.startManager(nil)
	e.create(newSession("run-1", "run-1"))
	verify := e.waitJob("run-1", "verify")
	s := e.waitSession("run-1", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)
	var rp v1alpha1.ResumePlan
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "run-1"}, &rp); !apierrors.IsNotFound(err) {
		t.Errorf("the session's ResumePlan exists while its verify Job runs (%v): %+v", err, rp.Status)
	}

	// A plan as the session makes it, as a cache that has not seen the verification yet shows it, and
	// one made by hand for the same session, after it.
	owned := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: "run-1", Namespace: e.ns},
		Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "run-1"}}}
	if err := controllerutil.SetControllerReference(s, owned, apiServer.Scheme); err != nil {
		t.Fatal(err)
	}
	e.create(owned)
	byHand := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: e.ns},
		Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "run-1"}}}
	e.create(byHand)
	e.waitCondition(byHand, func() []metav1.Condition { return byHand.Status.Conditions },
		v1alpha1.ConditionReconciling, metav1.ConditionTrue, conditions.ReasonWaitingForSession)
	// One worker takes the plans in the order they came: the session's own was reconciled first.
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(owned), owned); err != nil {
		t.Fatal(err)
	}
	if d := diff(v1alpha1.ResumePlanStatus{}, owned.Status); d != "" {
		t.Errorf("the session's own plan wrote status before the session was verified (-want +got):\n%s", d)
	}

	e.runJob(verify)
	e.waitSession("run-1", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
	for _, p := range []*v1alpha1.ResumePlan{owned, byHand} {
		e.waitCondition(p, func() []metav1.Condition { return p.Status.Conditions },
			v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)
		if n := len(e.jobsOf(p.Name, "resume-plan")); n != 1 {
			t.Errorf("%d resume-plan Jobs for plan %s, want 1", n, p.Name)
		}
	}
}
