package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// managerUser is the user the manager runs as in config/default, which the policy names.
const managerUser = "system:serviceaccount:agentrewind-system:agentrewind-manager"

// installSweepPolicy creates the admission policy of config/rbac/gc_sweep_rbac.yaml and returns a client
// that acts as the manager: a member of system:masters, so RBAC allows it everything and only the policy
// stands between it and any RoleBinding.
func installSweepPolicy(e *env) client.Client {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "gc_sweep_rbac.yaml"))
	if err != nil {
		e.t.Fatal(err)
	}
	var policy admissionv1.ValidatingAdmissionPolicy
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := utilyaml.Unmarshal([]byte(doc), &meta); err != nil {
			e.t.Fatal(err)
		}
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			err = utilyaml.Unmarshal([]byte(doc), &policy)
		case "ValidatingAdmissionPolicyBinding":
			err = utilyaml.Unmarshal([]byte(doc), &binding)
		}
		if err != nil {
			e.t.Fatal(err)
		}
	}
	if policy.Name == "" || binding.Name == "" {
		e.t.Fatal("config/rbac/gc_sweep_rbac.yaml holds no admission policy and binding")
	}
	for _, o := range []client.Object{&policy, &binding} {
		if err := e.c.Create(e.ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			e.t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(apiServer.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: managerUser, Groups: []string{"system:masters", "system:authenticated"}}
	asManager, err := client.New(cfg, client.Options{Scheme: apiServer.Scheme})
	if err != nil {
		e.t.Fatal(err)
	}
	return asManager
}

// The manager may create RBAC for the blob sweep, which the chart lets it do by default; the admission
// policy shipped with that right lets it create exactly what the sweep needs (what sweepServiceAccount
// creates) and refuses it any other Role or RoleBinding, so it cannot hand a right it holds to anyone.
func TestTheSweepsRBACPolicyAdmitsTheSweepsRolesAndNothingElse(t *testing.T) {
	e := newEnv(t)
	asManager := installSweepPolicy(e)
	lease := sweepLeasePrefix + "0123456789ab"
	sweepRole := func(name string, rule rbacv1.PolicyRule) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Rules: []rbacv1.PolicyRule{rule}}
	}
	binding := func(name string, ref rbacv1.RoleRef, subject rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, RoleRef: ref, Subjects: []rbacv1.Subject{subject}}
	}
	sweepSA := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: SweepServiceAccount, Namespace: e.ns}
	refused := map[string]client.Object{
		"cluster-admin for the sweep's account": binding(lease+"-x", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}, sweepSA),
		"the sweep's Role for another account": binding(lease+"-y", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: lease},
			rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: e.ns}),
		"the sweep's Role for an account elsewhere": binding(lease+"-z", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: lease},
			rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: SweepServiceAccount, Namespace: "kube-system"}),
		"a Role on Secrets": sweepRole(lease+"-s", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}),
		"a Role on another Lease": sweepRole(lease+"-o", rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"},
			ResourceNames: []string{"kube-controller-manager"}, Verbs: []string{"get", "update"}}),
		"a Role deleting its Lease": sweepRole(lease+"-d", rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"},
			ResourceNames: []string{lease + "-d"}, Verbs: []string{"get", "update", "delete"}}),
		"a Role under another name": sweepRole("editor", rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"},
			ResourceNames: []string{"editor"}, Verbs: []string{"get"}}),
	}
	// A new policy takes a moment to be enforced: wait for the first refusal.
	first := refused["cluster-admin for the sweep's account"]
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := asManager.Create(e.ctx, first.DeepCopyObject().(client.Object))
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			if !strings.Contains(err.Error(), "may bind only a blob sweep Role") {
				t.Fatalf("refused, but not by the policy: %v", err)
			}
			break
		}
		if err == nil {
			_ = e.c.Delete(e.ctx, first.DeepCopyObject().(client.Object))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the manager could still bind cluster-admin after 30s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for what, o := range refused {
		if err := asManager.Create(e.ctx, o); err == nil || !strings.Contains(err.Error(), "agentrewind manager may") {
			t.Errorf("%s: %v, want the policy's refusal", what, err)
		}
	}

	// What the manager creates for a sweep passes.
	g := &GarbageCollector{Deps: Deps{Client: asManager, APIReader: asManager, Scheme: apiServer.Scheme},
		Options: GCOptions{SweepCreateRBAC: true}}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease, Namespace: e.ns}}
	if err := asManager.Create(e.ctx, l); err != nil {
		t.Fatal(err)
	}
	sa, err := g.sweepServiceAccount(e.ctx, e.ns, l)
	if err != nil || sa != SweepServiceAccount {
		t.Fatalf("the manager creating the sweep's account and Role under the policy: %q, %v", sa, err)
	}
	var rb rbacv1.RoleBinding
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: lease}, &rb); err != nil || rb.RoleRef.Name != lease {
		t.Fatalf("the sweep's RoleBinding: %+v, %v", rb.RoleRef, err)
	}
}
