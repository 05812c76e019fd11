//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// restrictedPod is a pod of the image under test that meets the restricted Pod Security Standard, as
// the operator's engine Jobs do: non-root, read-only root filesystem, no privilege escalation, all
// capabilities dropped, RuntimeDefault seccomp.
func restrictedPod(name string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "agentrewind",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Args:            args,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// A Job of the agentrewind image (`agentrewind version`) completes in a namespace that enforces the
// restricted Pod Security Standard, and its logs come back through the API server from the kubelet.
func TestRestrictedJobCompletes(t *testing.T) {
	ns := testNamespace(t, "job")
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "agentrewind-version", Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			TTLSecondsAfterFinished: ptr.To[int32](600),
			Template:                corev1.PodTemplateSpec{Spec: restrictedPod("", "version").Spec},
		},
	}
	if err := k8s.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the Job completes", func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, "", err
		}
		for _, c := range job.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				return true, "", nil
			case batchv1.JobFailed:
				t.Fatalf("the Job failed: %s: %s", c.Reason, c.Message)
			}
		}
		return false, fmt.Sprintf("active %d, succeeded %d", job.Status.Active, job.Status.Succeeded), nil
	})

	var pods corev1.PodList
	if err := k8s.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": job.Name}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d pods for the Job, want 1 (backoffLimit 0)", len(pods.Items))
	}
	logs, err := clientset.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("reading the Job's logs: %v", err)
	}
	if !strings.HasPrefix(string(logs), "agentrewind ") {
		t.Errorf("`agentrewind version` printed %q", logs)
	}
}
