package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestGCReportSessionsForAUserWhoMayListOnlyOneNamespace: a user allowed to list the report's kinds in
// one namespace only is told, when reporting the whole cluster is forbidden, to name namespaces with
// -n (the bare "forbidden" said nothing of it), and with -n gets the report.
func TestGCReportSessionsForAUserWhoMayListOnlyOneNamespace(t *testing.T) {
	api := startAPIServer(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-limited-"}}
	if err := api.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "gc-reader", Namespace: ns.Name}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"agentrewind.io"},
		Resources: []string{"agentsessions", "resumeplans", "forkruns", "checkpoints"}, Verbs: []string{"list"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gc-reader", Namespace: ns.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "gc-reader"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "limited"}}}
	if err := api.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := api.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	kubeconfig := kubeconfigOf(t, api, envtest.User{Name: "limited"})
	_, err := runCLI(t, "gc", "report", "--sessions", "--kubeconfig", kubeconfig)
	if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "name those with -n") {
		t.Errorf("the whole cluster, forbidden: %v, want it to say to name namespaces with -n", err)
	}
	out, err := runCLI(t, "gc", "report", "--sessions", "--kubeconfig", kubeconfig, "-n", ns.Name)
	if err != nil || !strings.Contains(out, "No AgentSessions.") {
		t.Errorf("-n %s: %v\n%s", ns.Name, err, out)
	}
}
