package controller

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// TestAHandMadePlansVerdictIsMirroredPromptly: a ResumePlan made by hand (no owner reference) for a
// session is mirrored into the session's status as soon as its verdict is written, as the plan the
// session makes is; the session controller used to watch only the plans it owns, so the verdict
// reached the session only when something else (a manager restart) made it look again.
func TestAHandMadePlansVerdictIsMirroredPromptly(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "hand", strings.Repeat("hand ", 40), false))
	// The session controller alone: the plan's verdict is written here as its controller would.
	e.runManager(nil, cache.Options{}, func(mgr ctrl.Manager, deps *Deps, n int64) []setupper {
		r := &AgentSessionReconciler{Deps: *deps}
		r.Recorder = mgr.GetEventRecorder(fmt.Sprintf("agentsession-test-%d", n))
		return []setupper{r}
	})
	rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: "hand"}, Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "hand"}}}
	e.create(rp)
	e.create(newSession("hand", "hand"))
	e.runJob(e.waitJob("hand", "verify"))
	e.waitSession("hand", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
	if got := e.session("hand").Status.ResumeVerdict; got != "" {
		t.Fatalf("the session mirrors verdict %q before the plan has one", got)
	}

	for _, verdict := range []v1alpha1.ResumeVerdict{v1alpha1.VerdictResumable, v1alpha1.VerdictComplete} {
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(rp), rp); err != nil {
			t.Fatal(err)
		}
		rp.Status.Verdict = verdict
		rp.Status.Reason = "HandWritten"
		if err := e.c.Status().Update(e.ctx, rp); err != nil {
			t.Fatal(err)
		}
		e.eventually("the session mirrors verdict "+string(verdict), func() (bool, string) {
			got := e.session("hand").Status.ResumeVerdict
			return got == verdict, string(got)
		})
	}
	if owners := rp.GetOwnerReferences(); len(owners) != 0 {
		t.Errorf("the hand-made plan was given owners %v", owners)
	}
}
