package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// TestARecordingWhosePodCannotStartSaysWhy: a recording Job whose pod waits on something only a user
// can fix (the provider key Secret does not exist, the agent image cannot be pulled) says so in the
// session's Reconciling message, with the kubelet's reason, while it waits: it used to say "running
// agent ..." until the Job's deadline an hour later, and then only that the deadline passed.
func TestARecordingWhosePodCannotStartSaysWhy(t *testing.T) {
	e := newEnv(t)
	_, job := e.startRecording("nokey")
	// The kubelet: the proxy sidecar cannot start, its provider key Secret is missing.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-pod", Namespace: e.ns, Labels: map[string]string{jobs.LabelJobUID: string(job.UID)}},
		Spec: *job.Spec.Template.Spec.DeepCopy()}
	e.create(pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: ProxyContainer, Image: job.Spec.Template.Spec.InitContainers[0].Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "llm-keys-typo" not found`}}}}}
	if err := e.c.Status().Update(e.ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.eventually("the session says why its recording waits", func() (bool, string) {
		msg := conditionMessage(e.session("nokey").Status.Conditions, v1alpha1.ConditionReconciling)
		return strings.Contains(msg, `CreateContainerConfigError: secret "llm-keys-typo" not found`) && strings.Contains(msg, ProxyContainer), msg
	})
	s := e.session("nokey")
	if c := conditionMessage(s.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c, "llm-keys-typo") {
		t.Errorf("Ready does not say why: %q", c)
	}
}
