package controller

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// TestAForkPastTheEndOfItsSessionIsRefused: forks of a 4-step session at step 4 and at step 500
// stall with InvalidSpec, the message naming the field and the session's step count, and start no
// Job and no child; they used to run and report Completed with a child forked at step 500. A fork at
// the last step starts.
func TestAForkPastTheEndOfItsSessionIsRefused(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "short", strings.Repeat("short ", 40), false))
	e.forkSecrets()
	e.startForkManager(nil)
	e.readySession("short")
	for _, at := range []int64{4, 500} {
		name := map[int64]string{4: "at-end", 500: "far-past"}[at]
		e.create(newFork(name, "short", at))
		fr := e.waitForkRun(name, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec)
		msg := meta.FindStatusCondition(fr.Status.Conditions, v1alpha1.ConditionStalled).Message
		want := "spec.fork.atStep: step " + map[int64]string{4: "4", 500: "500"}[at] + " is past the end of session short, which has 4 steps (0 to 3) (AgentSession short)"
		if msg != want {
			t.Errorf("fork at %d: Stalled message\n got %s\nwant %s", at, msg, want)
		}
	}
	e.create(newFork("last", "short", 3))
	e.waitJob("last", "fork")
	time.Sleep(time.Second)
	for _, name := range []string{"at-end", "far-past"} {
		if n := len(e.jobsOf(name, "fork")); n != 0 {
			t.Errorf("%s: %d fork Jobs, want none", name, n)
		}
		if fr := e.forkRun(name); fr.Status.ChildSessionRef.Name != "" {
			t.Errorf("%s: child session %s", name, fr.Status.ChildSessionRef.Name)
		}
	}
}
