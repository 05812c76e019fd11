package controller

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// TestAnEditAsTheTTLRunsOutRunsAgain: a finished ForkRun whose spec is edited just as its TTL runs out
// (the edit lands after the pass read the finished run, before its deletion) runs the new generation
// instead of being deleted with it: the deletion was preconditioned on the UID only, so the user's
// new run was lost.
func TestAnEditAsTheTTLRunsOutRunsAgain(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "ttl", strings.Repeat("ttl ", 40), false))
	var edited atomic.Bool
	var editErr atomic.Value
	e.startForkManager(&interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if fr, ok := obj.(*v1alpha1.ForkRun); ok && !edited.Swap(true) {
			// The user's edit, landing between the pass's read and its delete.
			var cur v1alpha1.ForkRun
			err := c.Get(ctx, client.ObjectKeyFromObject(fr), &cur)
			if err == nil {
				cur.Spec.Agent.Image = agentImage + "-fixed"
				err = c.Update(ctx, &cur)
			}
			if err != nil {
				editErr.Store(err.Error())
			}
		}
		return c.Delete(ctx, obj, opts...)
	}})
	e.readySession("ttl")
	fr := newReplay("edited-late", "ttl")
	fr.Spec.TTLSecondsAfterFinished = new(int32(60))
	e.create(fr)
	job := e.waitJob("edited-late", "replay")
	e.writeResult(job, &task.Result{Task: task.Replay, Outcome: task.Succeeded, Replay: &task.ReplayResult{SessionID: "ttl", Passed: true}})
	e.finishJob(job, true, "")
	got := e.waitForkRun("edited-late", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPassed)
	e.clock.SetTime(got.Status.CompletionTime.Add(61 * time.Second))
	patch := client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{"test": "tick"}
	if err := e.c.Patch(e.ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	e.eventually("the edited ForkRun's second Job", func() (bool, string) {
		if msg, _ := editErr.Load().(string); msg != "" {
			t.Fatalf("the edit: %s", msg)
		}
		var cur v1alpha1.ForkRun
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(got), &cur); err != nil {
			return false, "the ForkRun is gone with its edit: " + err.Error()
		}
		return len(e.jobsOf("edited-late", "replay")) == 2 && cur.Generation == 2, fmt.Sprintf("generation %d, %d Jobs", cur.Generation, len(e.jobsOf("edited-late", "replay")))
	})
}
