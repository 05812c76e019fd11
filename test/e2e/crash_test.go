//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// An agent killed mid-run in the cluster (SIGKILL after its search step, as an OOM kill would end
// it): the proxy beside it commits what it did, the session is verified rather than stalled, its
// status says the kubelet saw the agent killed, and its ResumePlan is RESUMABLE with the label step
// as its residual, stopped Killed, and kept by the collector whatever its age.
func TestAnAgentKilledInTheClusterIsResumableWithItsResidual(t *testing.T) {
	t.Parallel()
	ns := sessionNamespace(t, "crash")
	tools, mcpServers := deployTracker(t, ns)
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "crashed", Namespace: ns},
		Spec: v1alpha1.AgentSessionSpec{SessionID: "crashed-" + ns,
			Agent: v1alpha1.AgentSpec{Image: agentImage, Tools: tools, MCPServers: mcpServers,
				Env: []corev1.EnvVar{{Name: "AGENT_CRASH_AFTER_STEP", Value: "search"}}},
			ProviderKeys: v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: providerKeySecret, Key: "ANTHROPIC_API_KEY"}}}}
	if err := k8s.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, 4*time.Minute, "verified after its agent was killed", func(s *v1alpha1.AgentSession) (bool, string) {
		if st := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled); st != nil && st.Status == metav1.ConditionTrue {
			t.Fatalf("the recording of a killed agent stalled (%s): %s", st.Reason, st.Message)
		}
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("Ready: %+v, agentEnd %+v", c, s.Status.AgentEnd)
	})
	if end := s.Status.AgentEnd; end.How != v1alpha1.AgentKilled || end.Signal != "SIGKILL" {
		t.Errorf("status.agentEnd %+v, want Killed by SIGKILL", end)
	}

	rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: "crashed", Namespace: ns}}
	waitFor(t, rp, 3*time.Minute, "judged with the agent's end", func(rp *v1alpha1.ResumePlan) (bool, string) {
		return rp.Status.Stop == v1alpha1.RunKilled && rp.Status.Verdict != "", fmt.Sprintf("verdict %q stop %q", rp.Status.Verdict, rp.Status.Stop)
	})
	var residual []string
	for _, st := range rp.Status.Residual {
		residual = append(residual, st.ID)
	}
	if rp.Status.Verdict != v1alpha1.VerdictResumable || !slices.Equal(residual, []string{"label"}) || ptr.Deref(rp.Status.ResidualSteps, -1) != 1 {
		t.Errorf("the killed run's plan: %s, residual %v (%d); want Resumable with [label]: %s", rp.Status.Verdict, residual, ptr.Deref(rp.Status.ResidualSteps, -1), rp.Status.Message)
	}
	if rp.Status.ResumeAfterStep == nil {
		t.Errorf("the killed run's plan names no step of the recording to re-enter after")
	}
	if r := rp.Status.Reachability; r.State != v1alpha1.Reachable {
		t.Errorf("the killed run's reachability %+v, want Reachable", r)
	}
	out, _ := kubectl("get", "resumeplans", "-n", ns, "-o", "wide")
	t.Logf("kubectl get resumeplans -o wide:\n%s", out)
}
