package controller

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
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

// TestAStallLostToAConflictIsWrittenAgain refuses with 409 Conflict the status write that says a plan's
// Job failed. The pass that lost it ends in a terminal error (running the Job again would not help),
// but the plan must not go on saying its Job runs: it is reconciled again and stalls. In
// TestGitOpsHealth/ResumePlan the Job failed before the pass that created it had written JobRunning;
// the next pass read a cache without that write, lost the 409, and the plan said JobRunning for good.
func TestAStallLostToAConflictIsWrittenAgain(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "run-1", strings.Repeat("result ", 40), false))
	var refused atomic.Int64
	e.startManager(&interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		if rp, ok := obj.(*v1alpha1.ResumePlan); ok && rp.Namespace == e.ns && rp.Name == "crashed" &&
			meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionStalled) && refused.Add(1) == 1 {
			return apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "resumeplans"}, rp.Name, fmt.Errorf("forced by the test"))
		}
		return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
	}})
	e.readySession("run-1")
	e.create(&v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: "crashed"}, Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "run-1"}}})
	job := e.waitJob("crashed", "resume-plan")
	e.waitPlan("crashed", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)

	e.finishJob(job, false, "") // the pod died: no result
	rp := e.waitPlan("crashed", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonJobFailed)
	if n := refused.Load(); n < 2 {
		t.Errorf("%d writes of Stalled, want the refused one and one after it", n)
	}
	if meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionReconciling) {
		t.Errorf("the plan still says it reconciles: %+v", rp.Status.Conditions)
	}
}

// A plan settles on the name of the Job that judged it, and the verdict rules are an input of that
// name: after an upgrade that changed the rules, every plan's Job is another one and the plan is judged
// again, once; under the same rules it is not.
func TestAPlanJudgedUnderOtherRulesIsJudgedAgain(t *testing.T) {
	d := Deps{Scheme: apiServer.Scheme, Stores: &Stores{Config: StoreConfig{Endpoint: "http://s3.example:9000", Bucket: testBucket}},
		Jobs: JobSettings{Image: "registry.example/agentrewind:test"}}
	s := newSession("run", "run")
	s.Namespace, s.UID, s.Status.Recording.EventsHash = "ns", "uid-1", strings.Repeat("ab", 32)
	rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "run", UID: "uid-2", Generation: 1},
		Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "run"}}}
	name := func(rules int) string {
		t.Helper()
		job, err := jobs.Build((&ResumePlanReconciler{Deps: d, RulesVersion: rules}).resumePlanJob(rp, s), d.Scheme)
		if err != nil {
			t.Fatal(err)
		}
		return job.Name
	}
	if name(0) != name(resume.RulesVersion) {
		t.Errorf("the default rules are not the engine's (%d)", resume.RulesVersion)
	}
	if name(resume.RulesVersion-1) == name(resume.RulesVersion) {
		t.Error("a plan judged under the previous rules would not be judged again")
	}
}
