package conditions

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

func TestTheThreeStatesAreExclusive(t *testing.T) {
	var conds []metav1.Condition
	MarkReconciling(&conds, 1, v1alpha1.ReasonJobRunning, "verify Job run-1-verify-0123456789 is running")
	MarkStalled(&conds, 2, v1alpha1.ReasonJobFailed, "verify Job run-1-verify-0123456789 failed")
	if !meta.IsStatusConditionTrue(conds, v1alpha1.ConditionStalled) || meta.IsStatusConditionTrue(conds, v1alpha1.ConditionReady) ||
		meta.IsStatusConditionTrue(conds, v1alpha1.ConditionReconciling) {
		t.Fatalf("stalled: %+v", conds)
	}
	for _, c := range conds {
		if c.ObservedGeneration != 2 {
			t.Errorf("%s observedGeneration %d, want 2", c.Type, c.ObservedGeneration)
		}
	}
	MarkReady(&conds, 2, v1alpha1.ReasonVerified, "verify Job run-1-verify-0123456789: ok")
	if !meta.IsStatusConditionTrue(conds, v1alpha1.ConditionReady) || meta.IsStatusConditionTrue(conds, v1alpha1.ConditionStalled) {
		t.Fatalf("ready: %+v", conds)
	}
}

func TestSettledIsTiedToTheGenerationAndTheJob(t *testing.T) {
	var conds []metav1.Condition
	MarkReady(&conds, 3, v1alpha1.ReasonVerified, "verify Job run-1-verify-0123456789: 4 events")
	for _, tc := range []struct {
		gen  int64
		job  string
		want bool
	}{
		{3, "run-1-verify-0123456789", true},
		{4, "run-1-verify-0123456789", false},
		{3, "run-1-verify-9999999999", false},
		{3, "run-1-verify-012345678", false}, // a prefix of the name is another Job
	} {
		if got := Settled(conds, tc.gen, tc.job); got != tc.want {
			t.Errorf("Settled(gen %d, %s) = %v, want %v", tc.gen, tc.job, got, tc.want)
		}
	}
	MarkReconciling(&conds, 3, v1alpha1.ReasonJobRunning, "verify Job run-1-verify-0123456789 is running")
	if Settled(conds, 3, "run-1-verify-0123456789") {
		t.Error("a running Job is not settled")
	}
}

// A status with a lastRun is settled on it and the generation's final state, whatever a message says;
// one written before lastRun existed is read by its message, as it was written.
func TestRunSettledReadsLastRunNotTheMessage(t *testing.T) {
	ready := func(gen int64, msg string) []metav1.Condition {
		var conds []metav1.Condition
		MarkReady(&conds, gen, "Verified", msg)
		return conds
	}
	run := v1alpha1.JobRun{Name: "s-verify-abc", Generation: 2}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		last  v1alpha1.JobRun
		gen   int64
		want  bool
	}{
		{"lastRun and a final state", ready(2, "verified"), run, 2, true},
		{"lastRun of another Job", ready(2, "verified by s-verify-abc"), v1alpha1.JobRun{Name: "s-verify-old", Generation: 2}, 2, false},
		{"lastRun of another generation", ready(2, "verified"), v1alpha1.JobRun{Name: "s-verify-abc", Generation: 1}, 2, false},
		{"lastRun without a final state", nil, run, 2, false},
		{"a final state of another generation", ready(1, "verified"), run, 2, false},
		{"no lastRun: the message names the Job", ready(2, "verify Job s-verify-abc found it intact"), v1alpha1.JobRun{}, 2, true},
		{"no lastRun: the message does not", ready(2, "verified"), v1alpha1.JobRun{}, 2, false},
	} {
		if got := RunSettled(tc.conds, tc.last, tc.gen, "s-verify-abc"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
