package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
)

// TestARunsFinalConditionIsNotedOnceAndKeepsItsJob: the note goes on the final condition's three
// conditions once, whatever their status, and a message at the 32 KiB bound is cut at its end, so the
// Job name at its start (conditions.Settled) stays.
func TestARunsFinalConditionIsNotedOnceAndKeepsItsJob(t *testing.T) {
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "done"}, Spec: v1alpha1.AgentSessionSpec{SessionID: "id-1"},
		Status: v1alpha1.AgentSessionStatus{Reachability: v1alpha1.ReachabilityStatus{State: v1alpha1.Collectible, Reason: "CompleteCollectible",
			Message: "deleting: every step verified"}}}
	for _, long := range []bool{false, true} {
		msg := "replay Job r-replay-0123456789: Passed"
		if long {
			msg += strings.Repeat("é", 20<<10)
		}
		var conds []metav1.Condition
		conditions.MarkStalled(&conds, 1, "Diverged", msg)
		if !noteRunCollected(conds, s) {
			t.Fatal("nothing noted")
		}
		want := "; since then AgentSession done (session id-1) was collected as CompleteCollectible: every step verified"
		for _, c := range conds {
			if !strings.HasSuffix(c.Message, want) || !conditions.Settled(conds, 1, "r-replay-0123456789") || len(c.Message) > 32<<10 {
				t.Errorf("long %v: %s message (%d bytes) ends %q", long, c.Type, len(c.Message), c.Message[max(0, len(c.Message)-120):])
			}
		}
		if noteRunCollected(conds, s) {
			t.Errorf("long %v: noted twice", long)
		}
	}
	var running []metav1.Condition
	conditions.MarkReconciling(&running, 1, "JobRunning", "replay Job r is running")
	if noteRunCollected(running, s) {
		t.Error("a run that has not finished was noted")
	}
}
