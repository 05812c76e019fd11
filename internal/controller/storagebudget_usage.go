package controller

import (
	"fmt"
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// storageUsage is what the objects of one kind keep in the store.
type storageUsage struct {
	bytes, objects int64
}

// namespaceStorage is what a namespace keeps in the store, per kind.
type namespaceStorage struct {
	sessions, checkpoints storageUsage
}

// sumStorage adds up the bytes the sessions and checkpoints of a namespace report in their status,
// each counting what it adds to the store, so that what many share counts once: a checkpoint's
// snapshot.incrementalBytes (a file many checkpoints share counts once); a fork's
// recording.addedBytes while its parent is among the sessions (the blobs of the steps it inherited
// are its parent's), its recording.bytes otherwise (it alone keeps them then); any other session's
// recording.bytes. An object reporting none yet counts as an object of no bytes; a sum that would
// pass 2^63-1 stays there.
func sumStorage(sessions []v1alpha1.AgentSession, checkpoints []v1alpha1.Checkpoint) namespaceStorage {
	var out namespaceStorage
	present := make(map[string]bool, len(sessions))
	for i := range sessions {
		present[sessions[i].Name] = true
	}
	for i := range sessions {
		rec, parent := sessions[i].Status.Recording, sessions[i].Spec.ParentRef.Name
		if parent != "" && present[parent] && rec.AddedBytes != nil {
			out.sessions.add(rec.AddedBytes)
		} else {
			out.sessions.add(rec.Bytes)
		}
	}
	for i := range checkpoints {
		out.checkpoints.add(checkpoints[i].Status.Snapshot.IncrementalBytes)
	}
	return out
}

func (u *storageUsage) add(v *int64) {
	u.objects++
	if v == nil || *v <= 0 {
		return
	}
	if u.bytes > math.MaxInt64-*v {
		u.bytes = math.MaxInt64
		return
	}
	u.bytes += *v
}

// budgetStatus is a StorageBudget's status as usage against its limits decides it.
type budgetStatus struct {
	sessions, checkpoints v1alpha1.StorageUsage
	over                  bool
	reason, message       string
}

// evaluateBudget compares a namespace's usage with the budget's limits. A kind without a limit is
// reported and never over.
func evaluateBudget(spec v1alpha1.StorageBudgetSpec, u namespaceStorage) budgetStatus {
	sessionsLimit, checkpointsLimit := quantityBytes(spec.Sessions), quantityBytes(spec.Checkpoints)
	st := budgetStatus{
		sessions:    v1alpha1.StorageUsage{UsedBytes: ptrTo(u.sessions.bytes), Objects: ptrTo(u.sessions.objects), LimitBytes: sessionsLimit},
		checkpoints: v1alpha1.StorageUsage{UsedBytes: ptrTo(u.checkpoints.bytes), Objects: ptrTo(u.checkpoints.objects), LimitBytes: checkpointsLimit},
	}
	sessionsOver := sessionsLimit != nil && u.sessions.bytes > *sessionsLimit
	checkpointsOver := checkpointsLimit != nil && u.checkpoints.bytes > *checkpointsLimit
	var overs []string
	if sessionsOver {
		overs = append(overs, fmt.Sprintf("sessions keep %d bytes, over their limit of %d", u.sessions.bytes, *sessionsLimit))
	}
	if checkpointsOver {
		overs = append(overs, fmt.Sprintf("checkpoints added %d bytes, over their limit of %d", u.checkpoints.bytes, *checkpointsLimit))
	}
	st.over = sessionsOver || checkpointsOver
	switch {
	case sessionsOver && checkpointsOver:
		st.reason = v1alpha1.ReasonOverBudget
	case sessionsOver:
		st.reason = v1alpha1.ReasonSessionsOverBudget
	case checkpointsOver:
		st.reason = v1alpha1.ReasonCheckpointsOverBudget
	default:
		st.reason = v1alpha1.ReasonWithinBudget
		overs = []string{fmt.Sprintf("sessions keep %d bytes, checkpoints added %d", u.sessions.bytes, u.checkpoints.bytes)}
	}
	st.message = strings.Join(overs, "; ")
	return st
}

// quantityBytes is a limit in bytes, rounded up; nil for none. A limit past 2^63-1 bytes is that.
func quantityBytes(q *resource.Quantity) *int64 {
	if q == nil {
		return nil
	}
	return ptrTo(q.Value())
}

// applyBudgetStatus writes a decided status into a StorageBudget's.
func applyBudgetStatus(b *v1alpha1.StorageBudget, st budgetStatus) {
	b.Status.Sessions, b.Status.Checkpoints = st.sessions, st.checkpoints
	b.Status.ObservedGeneration = b.Generation
	over := metav1.ConditionFalse
	if st.over {
		over = metav1.ConditionTrue
	}
	setOverBudgetCondition(&b.Status.Conditions, b.Generation, over, st.reason, st.message)
	setBudgetReadyCondition(&b.Status.Conditions, b.Generation)
}

func ptrTo[T any](v T) *T { return &v }
