//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// providerKeySecret is the Secret holding the provider key a fork's proxy spends (the fake model
// takes any).
const providerKeySecret = "llm-provider-keys"

// sessionNamespace is a test namespace ready for the operator's sessions: the store Secret its engine
// Jobs read and the provider key Secret its forks name.
func sessionNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := testNamespace(t, prefix)
	for _, s := range []*corev1.Secret{storeSecret(ns), {
		ObjectMeta: metav1.ObjectMeta{Name: providerKeySecret, Namespace: ns},
		StringData: map[string]string{"ANTHROPIC_API_KEY": providerKeyValue},
	}} {
		if err := k8s.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// verifiedSession pushes the session in dir under ns's prefix, creates its AgentSession (name, the
// agent given) and waits until the operator verified it.
func verifiedSession(t *testing.T, ns, name, dir string, agent v1alpha1.AgentSpec) *v1alpha1.AgentSession {
	t.Helper()
	pushSession(t, dir, ns)
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.AgentSessionSpec{SessionID: recordedID, Agent: agent}}
	if err := k8s.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	waitReady(t, s, 3*time.Minute)
	return s
}

// waitReady waits until obj's Ready condition is True for its current generation. Stalled (the
// kstatus terminal condition) fails the test at once.
func waitReady(t *testing.T, obj client.Object, timeout time.Duration) {
	t.Helper()
	waitFor(t, obj, timeout, "Ready", func(o client.Object) (bool, string) {
		c := meta.FindStatusCondition(conditionsOf(o), v1alpha1.ConditionReady)
		if st := meta.FindStatusCondition(conditionsOf(o), "Stalled"); st != nil && st.Status == metav1.ConditionTrue && st.ObservedGeneration >= o.GetGeneration() {
			t.Fatalf("%T %s/%s is Stalled (%s), never Ready: %s", o, o.GetNamespace(), o.GetName(), st.Reason, st.Message)
		}
		switch {
		case c == nil:
			return false, "no Ready condition yet"
		case c.Status != metav1.ConditionTrue || c.ObservedGeneration < o.GetGeneration():
			return false, fmt.Sprintf("Ready=%s %s (generation %d observed %d): %s", c.Status, c.Reason, o.GetGeneration(), c.ObservedGeneration, c.Message)
		}
		return true, ""
	})
}

// conditionsOf are the status conditions of one of the operator's kinds.
func conditionsOf(o client.Object) []metav1.Condition {
	switch o := o.(type) {
	case *v1alpha1.AgentSession:
		return o.Status.Conditions
	case *v1alpha1.ForkRun:
		return o.Status.Conditions
	case *v1alpha1.Checkpoint:
		return o.Status.Conditions
	case *v1alpha1.ResumePlan:
		return o.Status.Conditions
	}
	panic(fmt.Sprintf("conditionsOf %T", o))
}

// waitFor polls obj until done says so, failing the test with done's last reason and the events about
// obj after timeout.
func waitFor[T client.Object](t *testing.T, obj T, timeout time.Duration, what string, done func(T) (bool, string)) {
	t.Helper()
	desc := fmt.Sprintf("%T %s/%s: %s", obj, obj.GetNamespace(), obj.GetName(), what)
	defer func() {
		if t.Failed() {
			events, _ := kubectl("get", "events", "-n", obj.GetNamespace(), "--field-selector", "involvedObject.name="+obj.GetName())
			t.Logf("%s at failure: %+v\nevents:\n%s", desc, obj, events)
		}
	}()
	eventually(t, timeout, desc, func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, "", err
		}
		ok, reason := done(obj)
		return ok, reason, nil
	})
}

// finished waits until a ForkRun has an outcome and returns it.
func finished(t *testing.T, fr *v1alpha1.ForkRun, timeout time.Duration) v1alpha1.ForkOutcome {
	t.Helper()
	waitFor(t, fr, timeout, "an outcome", func(f *v1alpha1.ForkRun) (bool, string) {
		if f.Status.Outcome == "" {
			c := meta.FindStatusCondition(f.Status.Conditions, "Reconciling")
			if c != nil {
				return false, fmt.Sprintf("no outcome yet; Reconciling %s: %s", c.Reason, c.Message)
			}
			return false, "no outcome yet"
		}
		return true, ""
	})
	return fr.Status.Outcome
}

// fixForkRun is the prompt-fix ForkRun of session: fork at the labelling decision with the one-line
// fix, new tool calls stubbed, the goal the fixed agent's label.
func fixForkRun(ns, name, session string) *v1alpha1.ForkRun {
	return &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ForkRunSpec{
			SessionRef: v1alpha1.LocalObjectReference{Name: session},
			Mode:       v1alpha1.ModeFork,
			Fork: v1alpha1.ForkSpec{
				AtStep:       ptr.To[int64](decisionStep),
				Overrides:    v1alpha1.ForkOverrides{System: fixedPrompt},
				Tools:        v1alpha1.ToolPolicy{OnMiss: v1alpha1.ToolMissStub},
				ProviderKeys: v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: providerKeySecret, Key: "ANTHROPIC_API_KEY"}},
			},
			Goal:  v1alpha1.Goal{Tool: "add_label", ArgsMatch: &apiextensionsv1.JSON{Raw: []byte(`{"label":"needs-owner-review"}`)}},
			Agent: v1alpha1.AgentSpec{Image: agentImage},
		}}
}

// hostPathClaim makes a workspace claim for ns: a directory under bin/cluster/pv holding files (the
// cluster runs on this machine and has no provisioner), a hostPath PersistentVolume of it and a claim
// bound to that volume by name. It returns the directory, which the test reads and writes directly.
// The agent and the engine Jobs run as a non-root user, so the directory is writable by all.
func hostPathClaim(t *testing.T, ns, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(repoRoot, "bin", "cluster", "pv", ns, name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	size := resource.MustParse("1Gi")
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: dir, Type: ptr.To(corev1.HostPathDirectory)}},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(""),
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	for _, o := range []client.Object{pv, pvc} {
		if err := k8s.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if os.Getenv("E2E_KEEP") != "" {
			return
		}
		_ = k8s.Delete(context.Background(), pv)
		_ = os.RemoveAll(filepath.Dir(dir))
	})
	return dir
}

// deployTracker runs the proxy-agent's stand-in issue tracker (`proxy-agent tracker`) in ns as the
// Deployment and Service tracker, restricted like every pod there, and returns the agent's tool
// backend (add_label) and MCP server (tracker, whose search_issues the agent calls) on it, for a
// proxy in the cluster to call live.
func deployTracker(t *testing.T, ns string) ([]v1alpha1.ToolBackend, []v1alpha1.MCPServer) {
	t.Helper()
	labels := map[string]string{"app": "tracker"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "tracker", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				AutomountServiceAccountToken: ptr.To(false),
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{Name: "tracker", Image: agentImage, ImagePullPolicy: corev1.PullNever, Args: []string{"tracker", ":8090"},
					Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8090}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}, PeriodSeconds: 1},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
			}}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "tracker", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 8090, TargetPort: intstr.FromString("http")}}}}
	for _, o := range []client.Object{dep, svc} {
		if err := k8s.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := kubectl("rollout", "status", "-n", ns, "deployment/tracker", "--timeout", "120s"); err != nil {
		t.Fatalf("the tracker did not roll out: %v\n%s", err, out)
	}
	base := fmt.Sprintf("http://tracker.%s.svc:8090", ns)
	return []v1alpha1.ToolBackend{{Name: "add_label", URL: base + "/label"}}, []v1alpha1.MCPServer{{Name: "tracker", URL: base + "/mcp"}}
}
