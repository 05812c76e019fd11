package controller

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/gc"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// LabelKeep, set to "true" on an AgentSession or a Checkpoint, keeps it from the garbage collector:
// a session so labelled is pinned like one with retention.policy Retain, a Checkpoint so labelled is
// retained for its own sake (and keeps the session it is anchored in).
const LabelKeep = "agentrewind.io/keep"

// gcObjects are the objects one GC pass reads.
type gcObjects struct {
	sessions    []v1alpha1.AgentSession
	plans       []v1alpha1.ResumePlan
	forkRuns    []v1alpha1.ForkRun
	checkpoints []v1alpha1.Checkpoint
}

// gcKey is how the GC names an object of a namespace: namespace/name.
func gcKey(namespace, name string) string { return namespace + "/" + name }

// gather turns the cluster's objects into the facts gc.Collect decides on; it decides nothing. The
// sessions keep the order of objs.sessions.
//
//   - Verdict: the reachability of the session's ResumePlans whose verdict is current: Ready for their
//     generation, over the event log the session holds now (evidence.eventsHash). Any reachable one
//     wins; none current is a verdict not yet computed.
//   - CollectibleSince: the evaluatedAt of the latest current ResumePlan, when every current one is
//     collectible: the time the verdict in force for this log was computed. A re-evaluation restarts
//     the grace; it never shortens it.
//   - Pinned: retention.policy Retain, or the label agentrewind.io/keep=true.
//   - Recording: the log is Open and no verdict is current.
//   - UnfinishedForkReaders: ForkRuns naming the session that have no outcome yet.
//   - Parent: parentRef. Ledger: Unreadable or Unsound from the plan reason UnreadableNewerSchema or
//     UnsoundFold of a current ResumePlan.
//   - A Checkpoint is retained for its own sake when it carries agentrewind.io/keep=true or an
//     unfinished ForkRun forks from it (fork.checkpointRef).
func gather(objs gcObjects) gc.Population {
	plansOf := map[string][]*v1alpha1.ResumePlan{}
	for i := range objs.plans {
		rp := &objs.plans[i]
		k := gcKey(rp.Namespace, rp.Spec.SessionRef.Name)
		plansOf[k] = append(plansOf[k], rp)
	}
	readers := map[string]int{}
	forkedFrom := map[string]bool{}
	for i := range objs.forkRuns {
		fr := &objs.forkRuns[i]
		if fr.Status.Outcome != "" {
			continue
		}
		readers[gcKey(fr.Namespace, fr.Spec.SessionRef.Name)]++
		if ref := fr.Spec.Fork.CheckpointRef.Name; ref != "" {
			forkedFrom[gcKey(fr.Namespace, ref)] = true
		}
	}
	var pop gc.Population
	for i := range objs.sessions {
		s := &objs.sessions[i]
		k := gcKey(s.Namespace, s.Name)
		gs := gc.Session{
			ID:                    k,
			Pinned:                s.Spec.Retention.Policy == v1alpha1.RetentionRetain || s.Labels[LabelKeep] == "true",
			UnfinishedForkReaders: readers[k],
		}
		if g := s.Spec.Retention.GracePeriodSeconds; g != nil {
			gs.Grace = new(time.Duration(*g) * time.Second)
		}
		if p := s.Spec.ParentRef.Name; p != "" {
			gs.Parent = gcKey(s.Namespace, p)
		}
		gs.Verdict, gs.CollectibleSince, gs.Ledger = verdictOf(s, plansOf[k])
		gs.Recording = s.Status.Recording.LogState == v1alpha1.LogOpen && gs.Verdict == nil
		pop.Sessions = append(pop.Sessions, gs)
	}
	for i := range objs.checkpoints {
		ck := &objs.checkpoints[i]
		k := gcKey(ck.Namespace, ck.Name)
		pop.Checkpoints = append(pop.Checkpoints, gc.Checkpoint{ID: k, Session: gcKey(ck.Namespace, ck.Spec.SessionRef.Name),
			Retained: ck.Labels[LabelKeep] == "true" || forkedFrom[k]})
	}
	return pop
}

// verdictOf is the reachability of the session's current ResumePlans (see gather).
func verdictOf(s *v1alpha1.AgentSession, plans []*v1alpha1.ResumePlan) (*resume.ReachabilityVerdict, time.Time, gc.Ledger) {
	var current []*v1alpha1.ResumePlan
	for _, rp := range plans {
		ready := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != rp.Generation ||
			rp.Status.Reachability.State == "" || rp.Status.Evidence.EventsHash == "" ||
			rp.Status.Evidence.EventsHash != s.Status.Recording.EventsHash {
			continue
		}
		current = append(current, rp)
	}
	if len(current) == 0 {
		return nil, time.Time{}, gc.LedgerOK
	}
	slices.SortFunc(current, func(a, b *v1alpha1.ResumePlan) int { return strings.Compare(a.Name, b.Name) })
	ledger := gc.LedgerOK
	var since time.Time
	var reachable *v1alpha1.ResumePlan
	for _, rp := range current {
		switch resume.Reason(rp.Status.Reason) {
		case resume.ReasonUnreadableNewer:
			ledger = gc.LedgerUnreadable
		case resume.ReasonUnsoundFold:
			if ledger == gc.LedgerOK {
				ledger = gc.LedgerUnsound
			}
		}
		if rp.Status.Reachability.State != v1alpha1.Collectible && reachable == nil {
			reachable = rp
		}
		if rp.Status.EvaluatedAt != nil && rp.Status.EvaluatedAt.After(since) {
			since = rp.Status.EvaluatedAt.Time
		}
	}
	pick := current[len(current)-1]
	if reachable != nil {
		pick, since = reachable, time.Time{}
	}
	r := pick.Status.Reachability
	v := &resume.ReachabilityVerdict{Reachability: resume.Reachable, Reason: resume.ReachabilityReason(r.Reason), Message: r.Message}
	if r.State == v1alpha1.Collectible {
		v.Reachability = resume.Collectible
	}
	if v.Reason == "" {
		v.Reason = resume.ReasonUnknownVerdictRetained
		v.Reachability = resume.Reachable
	}
	if v.Message == "" {
		v.Message = string(v.Reason)
	}
	return v, since, ledger
}
