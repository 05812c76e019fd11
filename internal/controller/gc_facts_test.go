package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/gc"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

func factSession(name string, mutate ...func(*v1alpha1.AgentSession)) v1alpha1.AgentSession {
	s := v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1alpha1.AgentSessionSpec{SessionID: name}}
	s.Status.Recording = v1alpha1.SessionRecording{EventsHash: fakeHash(name), LogState: v1alpha1.LogClosed}
	for _, m := range mutate {
		m(&s)
	}
	return s
}

func factPlan(session string, state v1alpha1.Reachability, reason string, evaluated time.Time, mutate ...func(*v1alpha1.ResumePlan)) v1alpha1.ResumePlan {
	rp := v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: session, Generation: 1},
		Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: session}}}
	rp.Status = v1alpha1.ResumePlanStatus{Reason: "AllStepsVerified", Reachability: v1alpha1.ReachabilityStatus{State: state, Reason: reason, Message: reason},
		Evidence: v1alpha1.PlanEvidence{EventsHash: fakeHash(session)}, EvaluatedAt: &metav1.Time{Time: evaluated},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 1}}}
	for _, m := range mutate {
		m(&rp)
	}
	return rp
}

// gather reads each fact from where the GC documents it; a test per root.
func TestGatherReadsEachRootFromItsObject(t *testing.T) {
	at := testNow.Add(-48 * time.Hour)
	objs := gcObjects{
		sessions: []v1alpha1.AgentSession{
			factSession("complete"),
			factSession("stale-plan", func(s *v1alpha1.AgentSession) { s.Status.Recording.EventsHash = fakeHash("a newer log") }),
			factSession("retain", func(s *v1alpha1.AgentSession) { s.Spec.Retention.Policy = v1alpha1.RetentionRetain }),
			factSession("keep-label", func(s *v1alpha1.AgentSession) { s.Labels = map[string]string{LabelKeep: "true"} }),
			factSession("open", func(s *v1alpha1.AgentSession) { s.Status.Recording.LogState = v1alpha1.LogOpen }),
			factSession("grace", func(s *v1alpha1.AgentSession) { s.Spec.Retention.GracePeriodSeconds = new(int64(60)) }),
			factSession("child", func(s *v1alpha1.AgentSession) { s.Spec.ParentRef.Name = "complete" }),
			factSession("unsound"),
			factSession("not-ready"),
		},
		plans: []v1alpha1.ResumePlan{
			factPlan("complete", v1alpha1.Collectible, "CompleteCollectible", at),
			factPlan("stale-plan", v1alpha1.Collectible, "CompleteCollectible", at),
			factPlan("retain", v1alpha1.Collectible, "CompleteCollectible", at),
			factPlan("grace", v1alpha1.Collectible, "CompleteCollectible", at),
			factPlan("unsound", v1alpha1.Reachable, "UnsoundLedgerRetained", at, func(rp *v1alpha1.ResumePlan) { rp.Status.Reason = "UnsoundFold" }),
			factPlan("not-ready", v1alpha1.Collectible, "CompleteCollectible", at, func(rp *v1alpha1.ResumePlan) { rp.Generation = 2 }),
		},
		forkRuns: []v1alpha1.ForkRun{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "running"}, Spec: v1alpha1.ForkRunSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "complete"},
				Fork: v1alpha1.ForkSpec{CheckpointRef: v1alpha1.LocalObjectReference{Name: "ck-forked"}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "done"}, Spec: v1alpha1.ForkRunSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "complete"}},
				Status: v1alpha1.ForkRunStatus{Outcome: v1alpha1.OutcomeCompleted}},
		},
		checkpoints: []v1alpha1.Checkpoint{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ck-forked"}, Spec: v1alpha1.CheckpointSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "complete"}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ck-kept", Labels: map[string]string{LabelKeep: "true"}}, Spec: v1alpha1.CheckpointSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "retain"}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ck-plain"}, Spec: v1alpha1.CheckpointSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "retain"}}},
		},
	}
	collectible := &resume.ReachabilityVerdict{Reachability: resume.Collectible, Reason: "CompleteCollectible", Message: "CompleteCollectible"}
	want := gc.Population{
		Sessions: []gc.Session{
			{ID: "ns/complete", Verdict: collectible, CollectibleSince: at, UnfinishedForkReaders: 1},
			{ID: "ns/stale-plan"}, // the verdict judged another log: none yet
			{ID: "ns/retain", Verdict: collectible, CollectibleSince: at, Pinned: true},
			{ID: "ns/keep-label", Pinned: true},
			{ID: "ns/open", Recording: true},
			{ID: "ns/grace", Verdict: collectible, CollectibleSince: at, Grace: new(time.Minute)},
			{ID: "ns/child", Parent: "ns/complete"},
			{ID: "ns/unsound", Verdict: &resume.ReachabilityVerdict{Reachability: resume.Reachable, Reason: "UnsoundLedgerRetained", Message: "UnsoundLedgerRetained"},
				Ledger: gc.LedgerUnsound},
			{ID: "ns/not-ready"}, // Ready for an older generation
		},
		Checkpoints: []gc.Checkpoint{
			{ID: "ns/ck-forked", Session: "ns/complete", Retained: true},
			{ID: "ns/ck-kept", Session: "ns/retain", Retained: true},
			{ID: "ns/ck-plain", Session: "ns/retain"},
		},
	}
	if d := cmp.Diff(want, gather(objs)); d != "" {
		t.Errorf("facts (-want +got):\n%s", d)
	}
}
