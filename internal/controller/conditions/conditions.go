package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// Reasons the controllers set beside those of api/v1alpha1.
const (
	// ReasonResultMissing: the engine Job finished but left no result in the store nor a usable
	// termination message, so there is nothing to read a status from.
	ReasonResultMissing = "ResultMissing"
	// ReasonResultCorrupt: the Job's result could not be decoded, or said something this operator cannot
	// map into the API.
	ReasonResultCorrupt = "ResultCorrupt"
	// ReasonWaitingForSession: a ResumePlan waits for its AgentSession to be verified.
	ReasonWaitingForSession = "WaitingForSession"
	// ReasonSessionNotVerified: a ResumePlan's session failed verification, so it cannot be judged.
	ReasonSessionNotVerified = "SessionNotVerified"
	// ReasonDeleting: the object is being deleted and its stored data is being removed.
	ReasonDeleting = "Deleting"
	// ReasonContainerCrashLooping: a container of the run's pod keeps failing and being started again
	// (the rewind proxy could not serve), so the run was stopped instead of waiting for its deadline.
	ReasonContainerCrashLooping = "ContainerCrashLooping"
)

// SetReady sets the Ready condition: True when the object's purpose is met.
func SetReady(conds *[]metav1.Condition, generation int64, status metav1.ConditionStatus, reason, message string) {
	set(conds, v1alpha1.ConditionReady, generation, status, reason, message)
}

// SetReconciling sets the Reconciling condition: True while the operator works towards the spec.
func SetReconciling(conds *[]metav1.Condition, generation int64, status metav1.ConditionStatus, reason, message string) {
	set(conds, v1alpha1.ConditionReconciling, generation, status, reason, message)
}

// SetStalled sets the Stalled condition: True when no progress is possible without a change.
func SetStalled(conds *[]metav1.Condition, generation int64, status metav1.ConditionStatus, reason, message string) {
	set(conds, v1alpha1.ConditionStalled, generation, status, reason, message)
}

// MarkReady says the purpose is met: Ready True, neither Reconciling nor Stalled.
func MarkReady(conds *[]metav1.Condition, generation int64, reason, message string) {
	SetReady(conds, generation, metav1.ConditionTrue, reason, message)
	SetReconciling(conds, generation, metav1.ConditionFalse, reason, message)
	SetStalled(conds, generation, metav1.ConditionFalse, reason, message)
}

// MarkReconciling says work is in progress: Reconciling True, Ready False for the same reason.
func MarkReconciling(conds *[]metav1.Condition, generation int64, reason, message string) {
	SetReady(conds, generation, metav1.ConditionFalse, reason, message)
	SetReconciling(conds, generation, metav1.ConditionTrue, reason, message)
	SetStalled(conds, generation, metav1.ConditionFalse, reason, message)
}

// MarkStalled says the operator cannot make progress: Stalled True with the reason, Ready False.
func MarkStalled(conds *[]metav1.Condition, generation int64, reason, message string) {
	SetReady(conds, generation, metav1.ConditionFalse, reason, message)
	SetReconciling(conds, generation, metav1.ConditionFalse, reason, message)
	SetStalled(conds, generation, metav1.ConditionTrue, reason, message)
}

// RunSettled reports whether the Job named job was read for generation already: status's lastRun names
// it and generation, and a final state (Ready or Stalled True) holds for that generation. A status
// written before lastRun existed has none; it is read the way it was written (Settled).
func RunSettled(conds []metav1.Condition, last v1alpha1.JobRun, generation int64, job string) bool {
	if last.Name == "" {
		return Settled(conds, generation, job)
	}
	return last.Name == job && last.Generation == generation && final(conds, generation, func(*metav1.Condition) bool { return true })
}

// final reports whether Ready or Stalled is True for generation and holds for it.
func final(conds []metav1.Condition, generation int64, holds func(*metav1.Condition) bool) bool {
	for _, t := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionStalled} {
		c := meta.FindStatusCondition(conds, t)
		if c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation && holds(c) {
			return true
		}
	}
	return false
}

// Settled reports whether the object reached a final state (Ready or Stalled True) for generation
// with a message naming mark: the controllers put the name of the Job whose result they read in that
// message, so a final state is tied to the inputs that Job was named after. Kinds whose status has a
// lastRun read RunSettled instead.
func Settled(conds []metav1.Condition, generation int64, mark string) bool {
	return final(conds, generation, func(c *metav1.Condition) bool { return containsWord(c.Message, mark) })
}

func containsWord(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if s[i:i+len(word)] != word {
			continue
		}
		before := i == 0 || !nameChar(s[i-1])
		after := i+len(word) == len(s) || !nameChar(s[i+len(word)])
		if before && after {
			return true
		}
	}
	return false
}

// nameChar is a character of a Kubernetes name, so "a-1" is not found inside "a-10".
func nameChar(b byte) bool {
	return b == '-' || b == '.' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9'
}

func set(conds *[]metav1.Condition, typ string, generation int64, status metav1.ConditionStatus, reason, message string) {
	if message == "" {
		message = reason
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: cut(message), ObservedGeneration: generation})
}

// cut keeps a message within the 32768 bytes metav1.Condition admits.
func cut(s string) string {
	const max = 32 << 10
	if len(s) <= max {
		return s
	}
	return s[:max-3] + "..."
}
