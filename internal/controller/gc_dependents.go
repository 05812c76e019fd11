package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
)

// What a collected session leaves behind. The session's own ResumePlan goes with it (its owner
// reference); a ResumePlan made by hand and the ForkRuns that replayed or forked it, or whose child it
// was, stay and point at nothing. They are told so instead of waiting for a session that will never
// come: the GC, which knows what it deleted, writes it into their status and sends each an event as it
// deletes the session; their own controllers, which see a session deleted while collectible, say the
// same (a session a user deleted once it was collectible, say) and keep saying it once it is gone.

// ReasonSessionCollected: the AgentSession an object points at was collected (deleted as collectible,
// by the garbage collector in the ordinary course).
const ReasonSessionCollected = "SessionCollected"

// collected reports whether s is being deleted as collectible: the garbage collector writes the
// reachability before it deletes, so this holds for every session it collects.
func collected(s *v1alpha1.AgentSession) bool {
	return !s.DeletionTimestamp.IsZero() && s.Status.Reachability.State == v1alpha1.Collectible
}

// collectedMessage says what happened to s, naming the reason it was collectible.
func collectedMessage(s *v1alpha1.AgentSession) string {
	r := s.Status.Reachability
	return fmt.Sprintf("AgentSession %s (session %s) was collected as %s: %s", s.Name, s.Spec.SessionID, r.Reason,
		apimap.Message(strings.TrimPrefix(r.Message, "deleting: ")))
}

// planCollectedMessage is what a ResumePlan of a collected session says.
func planCollectedMessage(s *v1alpha1.AgentSession) string {
	return collectedMessage(s) + "; this ResumePlan has nothing left to judge: delete it, or create the AgentSession again to judge it anew"
}

// markPlanCollected stalls a ResumePlan whose session was collected; false when it says so already.
func markPlanCollected(rp *v1alpha1.ResumePlan, s *v1alpha1.AgentSession) bool {
	if sessionCollectedSaid(rp) {
		return false
	}
	conditions.MarkStalled(&rp.Status.Conditions, rp.Generation, ReasonSessionCollected, planCollectedMessage(s))
	return true
}

// sessionCollectedSaid reports whether the plan stalled already, for its generation, on its session
// being collected.
func sessionCollectedSaid(rp *v1alpha1.ResumePlan) bool {
	c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonSessionCollected && c.ObservedGeneration == rp.Generation
}

// noteRunCollected adds to a finished run's final condition (Ready or Stalled True) that s, which it
// ran from or recorded as its child, was collected since: the run's status stays as it left it, and
// says the session it names is gone. false when there is no final condition or it says so already.
func noteRunCollected(conds []metav1.Condition, s *v1alpha1.AgentSession) bool {
	said := "since then AgentSession " + s.Name + " "
	changed := false
	for _, typ := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionStalled} {
		c := meta.FindStatusCondition(conds, typ)
		if c == nil || c.Status != metav1.ConditionTrue || strings.Contains(c.Message, said) {
			continue
		}
		// The three conditions of a final state share its message (conditions.Mark*): each gets the
		// note, its status, reason and transition time untouched.
		old := c.Message
		msg := noted(old, "; since then "+collectedMessage(s))
		for i := range conds {
			if conds[i].Message == old {
				conds[i].Message = msg
			}
		}
		changed = true
	}
	return changed
}

// noted is msg with note added, within the 32768 bytes a condition's message holds; the start of msg,
// which names the run's Job (conditions.Settled), is what stays.
func noted(msg, note string) string {
	const max = 32 << 10
	if len(msg)+len(note) > max {
		cut := max - len(note) - len("...")
		for cut > 0 && msg[cut]&0xC0 == 0x80 {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return msg + note
}

// tellDependents writes into the status of every object left pointing at the session the GC just
// deleted that it was collected, and sends each an event. A write that fails is logged: the
// object's own controller says the same when it sees the session go.
func (g *GarbageCollector) tellDependents(ctx context.Context, objs gcObjects, s *v1alpha1.AgentSession) {
	log := ctrl.LoggerFrom(ctx)
	what := collectedMessage(s)
	for i := range objs.plans {
		rp := objs.plans[i].DeepCopy()
		if rp.Namespace != s.Namespace || rp.Spec.SessionRef.Name != s.Name || metav1.IsControlledBy(rp, s) {
			continue
		}
		if err := g.writeStatus(ctx, rp, func() bool { return markPlanCollected(rp, s) }); err != nil {
			log.Info("Could not write that the session of a ResumePlan was collected; its controller will", "resumePlan", rp.Name, "error", err.Error())
		}
		g.Recorder.Eventf(rp, s, corev1.EventTypeWarning, ReasonSessionCollected, "GarbageCollect", "%s", apimap.Message(planCollectedMessage(s)))
	}
	for i := range objs.forkRuns {
		fr := objs.forkRuns[i].DeepCopy()
		if fr.Namespace != s.Namespace || (fr.Spec.SessionRef.Name != s.Name && fr.Status.ChildSessionRef.Name != s.Name) {
			continue
		}
		role := "the session this ForkRun ran from"
		if fr.Spec.SessionRef.Name != s.Name {
			role = "the child session this fork recorded"
		}
		if err := g.writeStatus(ctx, fr, func() bool { return noteRunCollected(fr.Status.Conditions, s) }); err != nil {
			log.Info("Could not write that the session of a ForkRun was collected; its controller will", "forkRun", fr.Name, "error", err.Error())
		}
		g.Recorder.Eventf(fr, s, corev1.EventTypeWarning, ReasonSessionCollected, "GarbageCollect",
			"%s: %s is gone; the run's status stays as it left it", apimap.Message(what), role)
	}
}

// writeStatus patches obj's status after change, when it changed anything, as obj is at the API
// server: the listed copy may be behind its controller's latest write, so a conflict reads it again
// (without the cache) and tries once more. An object gone meanwhile is no error.
func (g *GarbageCollector) writeStatus(ctx context.Context, obj client.Object, change func() bool) error {
	for attempt := 0; ; attempt++ {
		base := obj.DeepCopyObject().(client.Object)
		if !change() {
			return nil
		}
		err := g.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if !apierrors.IsConflict(err) || attempt == 1 {
			return client.IgnoreNotFound(err)
		}
		if err := g.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
}
