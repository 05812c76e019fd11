//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// managerPod returns the manager's running pod (the Deployment has one replica).
func managerPod(ctx context.Context) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(systemNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "agentrewind", "app.kubernetes.io/component": "manager"}); err != nil {
		return nil, err
	}
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		return nil, fmt.Errorf("%d running manager pods, want 1", len(running))
	}
	return &running[0], nil
}

// The manager Deployment is Available, its pod runs the image under test under the manager's own
// ServiceAccount, restricted, and it holds the leader Lease.
func TestManagerAvailableAndLeader(t *testing.T) {
	var dep appsv1.Deployment
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: systemNamespace, Name: managerName}, &dep); err != nil {
		t.Fatal(err)
	}
	available := false
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			available = true
		}
	}
	if !available || dep.Status.ReadyReplicas != 1 {
		t.Fatalf("Deployment not Available with 1 ready replica: %+v", dep.Status)
	}

	var pod *corev1.Pod
	eventually(t, time.Minute, "one running manager pod", func(ctx context.Context) (bool, string, error) {
		p, err := managerPod(ctx)
		pod = p
		return err == nil, "", err
	})
	if pod.Spec.ServiceAccountName != managerName {
		t.Errorf("manager pod runs as ServiceAccount %q, want %q", pod.Spec.ServiceAccountName, managerName)
	}
	c := pod.Spec.Containers[0]
	if c.Image != image {
		t.Errorf("manager pod runs image %q, want the image under test %q", c.Image, image)
	}
	if want := "--engine-image=" + image; !contains(c.Args, want) {
		t.Errorf("manager args %v lack %s", c.Args, want)
	}
	if sc := c.SecurityContext; sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) {
		t.Errorf("manager container is not restricted: %+v", sc)
	}

	// controller-runtime's leader identity is <hostname>_<uuid>, and a pod's hostname is its name.
	eventually(t, 90*time.Second, "the manager holds its leader Lease", func(ctx context.Context) (bool, string, error) {
		var lease coordinationv1.Lease
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: leaseName}, &lease); err != nil {
			return false, "", err
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		if !strings.HasPrefix(holder, pod.Name+"_") {
			return false, fmt.Sprintf("Lease held by %q, not by %s", holder, pod.Name), nil
		}
		if lease.Spec.RenewTime == nil || time.Since(lease.Spec.RenewTime.Time) > 30*time.Second {
			return false, fmt.Sprintf("Lease held by %s but not renewed recently (%v)", holder, lease.Spec.RenewTime), nil
		}
		return true, "", nil
	})
}

// The manager's RBAC is really enforced: everything the generated ClusterRole (config/rbac/role.yaml)
// grants is allowed to the manager's ServiceAccount, and what a least-privilege operator must never do is
// denied — checked by the API server for the ServiceAccount's own token, not just asked about.
func TestManagerRBACEnforced(t *testing.T) {
	ns := testNamespace(t, "rbac")

	// Every grant of the generated role, checked with SubjectAccessReviews for the manager's identity.
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(raw, &role); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, rule := range role.Rules {
		for _, group := range rule.APIGroups {
			for _, res := range rule.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, verb := range rule.Verbs {
					attrs := authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource, Subresource: sub}
					if allowed, reason := managerCan(t, attrs); !allowed {
						t.Errorf("the manager may not %s %s/%s in %s, though role.yaml grants it: %s", verb, group, res, ns, reason)
					}
					checked++
				}
			}
		}
	}
	t.Logf("%d grants of role.yaml allowed", checked)
	if checked == 0 {
		t.Fatal("role.yaml grants nothing: run 'make manifests'")
	}

	// What it must never do, asked through kubectl as the ServiceAccount (the way an admin audits it).
	for _, args := range [][]string{
		{"list", "secrets", "--all-namespaces"},
		{"watch", "secrets", "--all-namespaces"},
		{"create", "secrets", "-n", ns},
		{"update", "secrets", "-n", ns},
		{"create", "pods", "-n", ns},
		{"create", "pods/exec", "-n", ns},
		{"delete", "namespaces"},
		{"create", "clusterrolebindings"},
		{"impersonate", "serviceaccounts"},
		{"*", "*", "--all-namespaces"},
	} {
		if out := canI(args...); out != "no" {
			t.Errorf("kubectl auth can-i --as %s %s: %q, want no", managerUser, strings.Join(args, " "), out)
		}
	}
	for _, args := range [][]string{
		{"create", "jobs.batch", "-n", ns},
		{"create", "leases.coordination.k8s.io", "-n", systemNamespace},
	} {
		if out := canI(args...); out != "yes" {
			t.Errorf("kubectl auth can-i --as %s %s: %q, want yes", managerUser, strings.Join(args, " "), out)
		}
	}

	// The ServiceAccount's own token, as its pod would present it: who the API server says it is, and
	// real requests, allowed and refused.
	tr, err := clientset.CoreV1().ServiceAccounts(systemNamespace).CreateToken(t.Context(), managerName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saConfig := rest.AnonymousClientConfig(restConfig)
	saConfig.BearerToken = tr.Status.Token
	sa, err := kubernetes.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	who, err := sa.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if who.Status.UserInfo.Username != managerUser {
		t.Fatalf("the token authenticates as %q, want %q", who.Status.UserInfo.Username, managerUser)
	}
	if _, err := sa.CoreV1().Secrets("").List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets cluster-wide as the manager: %v, want Forbidden", err)
	}
	if _, err := sa.CoreV1().Pods(ns).Create(t.Context(), restrictedPod("intruder"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("creating a Pod as the manager: %v, want Forbidden", err)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe", Namespace: ns},
		Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: restrictedPod("probe").Spec}},
	}
	if _, err := sa.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("creating a Job (dry run) as the manager: %v, want it allowed", err)
	}
	// The chart lets the manager create RoleBindings for the blob sweep. RBAC alone would let it hand any
	// right it holds to any account (its own ClusterRole here, to the namespace's default account); the
	// admission policy shipped with that right refuses every binding but the sweep's own.
	handOut := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "agentrewind-gc-sweep-hand-out", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: managerName},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}}}
	_, err = sa.RbacV1().RoleBindings(ns).Create(t.Context(), handOut, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "agentrewind manager may bind only") {
		t.Errorf("binding its own ClusterRole to another account as the manager: %v, want the sweep policy's refusal", err)
	}
}

// managerCan asks the API server whether the manager's ServiceAccount may do attrs.
func managerCan(t *testing.T, attrs authorizationv1.ResourceAttributes) (bool, string) {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               managerUser,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNamespace, "system:authenticated"},
		ResourceAttributes: &attrs,
	}}
	if err := k8s.Create(t.Context(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed, sar.Status.Reason + sar.Status.EvaluationError
}

// canI runs kubectl auth can-i as the manager's ServiceAccount and returns its answer, yes or no (the
// last word: kubectl may warn before it).
func canI(args ...string) string {
	out, _ := kubectl(append([]string{"auth", "can-i", "--as", managerUser}, args...)...)
	if f := strings.Fields(out); len(f) > 0 {
		return f[len(f)-1]
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
