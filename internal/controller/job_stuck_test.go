package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// TestAnEngineJobWhosePodCannotStartSaysWhy: a verify Job whose pod cannot pull its image says so, with
// the kubelet's reason, in the session's Reconciling condition while it waits (markRunning, looked at
// every Jobs.StuckCheck): it used to say "verify Job ... is running" until the Job's deadline an hour
// later. The same path serves the resume-plan, checkpoint and fork Jobs.
func TestAnEngineJobWhosePodCannotStartSaysWhy(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "pull", "result", false))
	e.runManager(nil, cache.Options{}, func(mgr ctrl.Manager, deps *Deps, n int64) []setupper {
		deps.Jobs.StuckCheck = time.Second
		r := &AgentSessionReconciler{Deps: *deps}
		r.Recorder = mgr.GetEventRecorder(fmt.Sprintf("agentsession-test-%d", n))
		return []setupper{r}
	})
	e.create(newSession("pull", "pull"))
	job := e.waitJob("pull", "verify")
	e.waitSession("pull", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)
	// The kubelet: the engine image cannot be pulled.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-pod", Namespace: e.ns, Labels: map[string]string{jobs.LabelJobUID: string(job.UID)}},
		Spec: *job.Spec.Template.Spec.DeepCopy()}
	e.create(pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "engine", Image: job.Spec.Template.Spec.Containers[0].Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "registry.example/agentrewind:typo"`}}}}}
	if err := e.c.Status().Update(e.ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.eventually("the session says why its verify Job waits", func() (bool, string) {
		msg := conditionMessage(e.session("pull").Status.Conditions, v1alpha1.ConditionReconciling)
		return strings.Contains(msg, "verify Job "+job.Name+" waits: container engine of pod "+pod.Name+` cannot start: ImagePullBackOff: Back-off pulling image "registry.example/agentrewind:typo"`), msg
	})
}
