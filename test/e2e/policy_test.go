//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The Checkpoint admission policy (config/policy) denies a ServiceAccount that is not the operator's,
// even one RBAC allows to create Checkpoints: the denial is the policy's, not RBAC's.
func TestCheckpointPolicyDeniesOtherServiceAccounts(t *testing.T) {
	ns := testNamespace(t, "policy")
	const intruder = "agent"
	ctx := t.Context()
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: intruder, Namespace: ns}},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "checkpoint-writer", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"agentrewind.io"}, Resources: []string{"checkpoints", "checkpoints/status"},
				Verbs: []string{"create", "update", "patch", "get"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "checkpoint-writer", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "checkpoint-writer"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: intruder, Namespace: ns}},
		},
	}
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	user := "system:serviceaccount:" + ns + ":" + intruder
	asIntruder := rest.CopyConfig(restConfig)
	asIntruder.Impersonate = rest.ImpersonationConfig{UserName: user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	intruderClient, err := client.New(asIntruder, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	sample, err := os.ReadFile(filepath.Join(repoRoot, "config", "samples", "agentrewind_v1alpha1_checkpoint.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// RBAC lets the intruder create the Checkpoint (dry run, so nothing is stored either way) until the
	// policy denies it; a freshly applied policy takes a moment to be enforced.
	eventually(t, time.Minute, "the admission policy denies "+user, func(ctx context.Context) (bool, string, error) {
		cp := fromYAML(t, string(sample), ns)
		err := intruderClient.Create(ctx, cp, client.DryRunAll)
		switch {
		case err == nil:
			return false, "the Checkpoint was admitted", nil
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "Checkpoints are minted by the recorder") &&
			strings.Contains(err.Error(), user):
			return true, "", nil
		default:
			return false, "", err
		}
	})
}
