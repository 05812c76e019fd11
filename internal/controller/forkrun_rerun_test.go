package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// TestEditsWhileAForkRunsLeaveOneRunningJob: a ForkRun edited while its Job runs, once or several
// times in quick succession, deletes the Jobs of the generations it moved past, so one Job runs, the
// latest generation's: the earlier ones went on spending live tokens beside it, one fork per edit. A
// Job that finished stays for its logs.
func TestEditsWhileAForkRunsLeaveOneRunningJob(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "parent", strings.Repeat("parent ", 40), false))
	e.forkSecrets()
	e.startForkManager(nil)
	e.readySession("parent")
	fr := newFork("edited", "parent", 1)
	e.create(fr)
	first := e.waitJob("edited", "fork")

	edit := func(goal string) {
		editObject(e, fr.DeepCopy(), func(fr *v1alpha1.ForkRun) { fr.Spec.Goal = v1alpha1.Goal{Tool: goal} })
	}
	running := func() []string {
		var names []string
		for _, j := range e.jobsOf("edited", "fork") {
			if j.DeletionTimestamp.IsZero() {
				names = append(names, j.Name)
			}
		}
		return names
	}
	edit("submit")
	e.eventually("generation 2's Job alone", func() (bool, string) {
		l := running()
		return len(l) == 1 && l[0] != first.Name, fmt.Sprint(l)
	})
	for _, goal := range []string{"a", "b", "c"} {
		edit(goal)
	}
	var cur v1alpha1.ForkRun
	e.eventually("the last generation's Job alone", func() (bool, string) {
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(fr), &cur); err != nil {
			return false, err.Error()
		}
		l := running()
		return len(l) == 1 && l[0] == forkJobName(&cur) && cur.Status.JobRef.Name == l[0], fmt.Sprintf("%v, status job %s", l, cur.Status.JobRef.Name)
	})
	time.Sleep(time.Second)
	if l := running(); len(l) != 1 {
		t.Fatalf("Jobs %v, want only generation %d's", l, cur.Generation)
	}

	// A finished Job is not deleted by the next edit.
	var last batchv1.Job
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: forkJobName(&cur)}, &last); err != nil {
		t.Fatal(err)
	}
	e.finishForkPod(&last, 1, 1, "")
	e.eventually("the last generation settled", func() (bool, string) {
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(fr), &cur); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionStalled)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", cur.Status.Conditions)
	})
	edit("d")
	e.eventually("the next generation's Job", func() (bool, string) {
		return len(running()) == 2, fmt.Sprint(running())
	})
}
