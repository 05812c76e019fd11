package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

// TestOnlyTheRecorderMintsCheckpoints applies config/policy and creates a Checkpoint, and writes its
// status, as each kind of caller. RBAC lets all of them, so the admission policy alone tells them apart.
func TestOnlyTheRecorderMintsCheckpoints(t *testing.T) {
	ctx := context.Background()
	applyPolicy(t, ctx)

	// Every ServiceAccount may create Checkpoints as far as RBAC is concerned.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-checkpoint-creators"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"agentrewind.io"}, Resources: []string{"checkpoints", "checkpoints/status"}, Verbs: []string{"create", "get", "update", "patch", "delete"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-checkpoint-creators"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:serviceaccounts"}}}
	for _, o := range []client.Object{role, binding} {
		if err := apiServer.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	as := func(user string) client.Client {
		cfg := rest.CopyConfig(apiServer.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
		c, err := client.New(cfg, client.Options{Scheme: apiServer.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const deniedMessage = "Checkpoints are minted by the recorder, not by agents or users"
	callers := []struct {
		name, user string
		allowed    bool
	}{
		{"the operator", "system:serviceaccount:agentrewind-system:agentrewind-manager", true},
		{"the agent's own ServiceAccount", "system:serviceaccount:default:triage-bot", false},
		{"the proxy, which shares the agent's Pod and token", "system:serviceaccount:default:agentrewind-proxy", false},
		{"an operator look-alike in another namespace", "system:serviceaccount:default:agentrewind-manager", false},
	}
	// A new policy takes a moment to reach the admission plugin: wait until it denies the agent.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		c := validCheckpoint("policy-probe-" + string(rune('a'+i%26)) + time.Now().Format("150405.000000"))
		c.Name = strings.ReplaceAll(c.Name, ".", "-")
		err := as(callers[1].user).Create(ctx, c)
		if err != nil && strings.Contains(err.Error(), deniedMessage) {
			break
		}
		if err == nil {
			_ = apiServer.Client.Delete(ctx, c)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admission policy never denied the agent: last result %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// One Checkpoint the operator minted, whose status each caller then tries to write.
	minted := validCheckpoint("minted-for-status")
	if err := as(callers[0].user).Create(ctx, minted); err != nil {
		t.Fatalf("the operator could not mint a Checkpoint: %v", err)
	}
	for _, caller := range callers {
		t.Run(caller.name, func(t *testing.T) {
			c := validCheckpoint("minted-by-" + strings.NewReplacer(":", "-").Replace(caller.user[len("system:serviceaccount:"):]))
			checkDecision(t, caller.user, "create a Checkpoint", caller.allowed, as(caller.user).Create(ctx, c), deniedMessage)

			forged := &v1.Checkpoint{}
			if err := apiServer.Client.Get(ctx, client.ObjectKeyFromObject(minted), forged); err != nil {
				t.Fatal(err)
			}
			forged.Status = v1.CheckpointStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{{Type: v1.ConditionReady,
				Status: metav1.ConditionTrue, Reason: v1.ReasonSnapshotStored, Message: "stored", LastTransitionTime: metav1.Now()}}}
			checkDecision(t, caller.user, "write a Checkpoint's status", caller.allowed, as(caller.user).Status().Update(ctx, forged), deniedMessage)
		})
	}
}

func applyPolicy(t *testing.T, ctx context.Context) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "policy", "checkpoint_minter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
	applied := 0
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := apiServer.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("applying %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		applied++
	}
	if applied != 2 {
		t.Fatalf("config/policy/checkpoint_minter.yaml holds %d objects, want the policy and its binding", applied)
	}
}

func checkDecision(t *testing.T, user, what string, allowed bool, err error, deniedMessage string) {
	t.Helper()
	switch {
	case allowed && err != nil:
		t.Fatalf("%s could not %s: %v", user, what, err)
	case !allowed && err == nil:
		t.Fatalf("%s could %s; the policy must deny it", user, what)
	case !allowed && !strings.Contains(err.Error(), deniedMessage):
		t.Fatalf("%s was refused to %s for another reason than the policy: %v", user, what, err)
	}
}
