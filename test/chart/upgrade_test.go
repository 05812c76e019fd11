package chart

import (
	"context"
	appsv1 "k8s.io/api/apps/v1"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// apiServer starts a bare kube-apiserver and etcd (no CRDs: the chart installs them) from bin/k8s, and
// returns a client and an admin kubeconfig; both stop with the test.
func apiServer(t *testing.T) (client.Client, string) {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		m, _ := filepath.Glob(filepath.Join(repoRoot, "bin", "k8s", "*", "kube-apiserver"))
		if len(m) == 0 {
			t.Fatal("no kube-apiserver: run 'make envtest-assets' or set KUBEBUILDER_ASSETS")
		}
		assets = filepath.Dir(m[len(m)-1])
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	u, err := env.AddUser(envtest.User{Name: "chart-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := appsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, kubeconfig
}

// An upgrade that turns crds.install off while the release owns CRDs it would delete (crds.keep off) is
// refused before Helm deletes anything, and so every AgentSession, ForkRun, ResumePlan and Checkpoint
// survives; with crds.keep on first, it goes through and the CRDs stay. A second release (another name)
// with crds.install=false installs beside the first.
func TestChartUpgradeNeverDeletesTheCRDs(t *testing.T) {
	c, kubeconfig := apiServer(t)
	run := func(args ...string) error {
		t.Helper()
		_, err := helm(t, append(args, "--kubeconfig", kubeconfig, "-f", filepath.Join(chartDir(), "ci", "default-values.yaml"))...)
		return err
	}
	crdsLeft := func() int {
		var l apiextensionsv1.CustomResourceDefinitionList
		if err := c.List(context.Background(), &l); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, crd := range l.Items {
			if crd.Spec.Group == "agentrewind.io" {
				n++
			}
		}
		return n
	}
	if err := run("install", release, chartDir(), "-n", namespace, "--create-namespace", "--set", "crds.keep=false"); err != nil {
		t.Fatal(err)
	}
	if n := crdsLeft(); n != 5 {
		t.Fatalf("the release installed %d CRDs, want 5", n)
	}
	err := run("upgrade", release, chartDir(), "-n", namespace, "--set", "crds.install=false,crds.keep=false")
	if err == nil || !strings.Contains(err.Error(), "crds.install=false would make Helm delete the CRD") || !strings.Contains(err.Error(), "crds.keep=true first") {
		t.Fatalf("upgrade to crds.install=false with crds.keep=false: %v, want a refusal saying to set crds.keep first", err)
	}
	if n := crdsLeft(); n != 5 {
		t.Fatalf("after the refused upgrade %d CRDs are left, want 5", n)
	}
	if err := run("upgrade", release, chartDir(), "-n", namespace, "--set", "crds.keep=true"); err != nil {
		t.Fatal(err)
	}
	if err := run("upgrade", release, chartDir(), "-n", namespace, "--set", "crds.install=false"); err != nil {
		t.Fatalf("upgrade to crds.install=false once the CRDs are kept: %v", err)
	}
	if n := crdsLeft(); n != 5 {
		t.Fatalf("after crds.install=false with crds.keep %d CRDs are left, want 5", n)
	}
	// A release cannot be renamed: another name is a second manager, refused while it would watch a
	// namespace the first one does (here every namespace).
	err = run("install", "second", chartDir(), "-n", "second", "--create-namespace", "--set", "crds.install=false,watchNamespaces={team-b}")
	if err == nil || !strings.Contains(err.Error(), "another agentrewind manager, agentrewind-system/agentrewind-manager (release agentrewind), already watches every namespace") {
		t.Fatalf("a second release beside one watching every namespace: %v, want a refusal naming it", err)
	}
	if err := run("upgrade", release, chartDir(), "-n", namespace, "--set", "crds.install=false,watchNamespaces={team-a}"); err != nil {
		t.Fatalf("the release upgrading itself: %v", err)
	}
	for _, set := range []string{"crds.install=false", "crds.install=false,watchNamespaces={team-b,team-a}"} {
		err = run("install", "second", chartDir(), "-n", "second", "--create-namespace", "--set", set)
		if err == nil || !strings.Contains(err.Error(), "already watches team-a") {
			t.Fatalf("a second release with %s beside one watching team-a: %v, want a refusal", set, err)
		}
	}
	if err := run("install", "second", chartDir(), "-n", "second", "--create-namespace", "--set", "crds.install=false,crds.keep=false,watchNamespaces={team-b}"); err != nil {
		t.Fatalf("a second release without the CRDs, watching other namespaces: %v", err)
	}
	if err := run("upgrade", "second", chartDir(), "-n", "second", "--set", "crds.install=false,watchNamespaces={team-b,team-c}"); err != nil {
		t.Fatalf("the second release upgrading itself: %v", err)
	}
	// A manager scaled to zero reconciles nothing: a release beside it may watch what it watched (a
	// migration scales the old manager down first, as the end-to-end upgrade test does).
	var first appsv1.Deployment
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "agentrewind-manager"}, &first); err != nil {
		t.Fatal(err)
	}
	base := first.DeepCopy()
	first.Spec.Replicas = new(int32(0))
	if err := c.Patch(context.Background(), &first, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := run("install", "third", chartDir(), "-n", "third", "--create-namespace", "--set", "crds.install=false,crds.keep=false,watchNamespaces={team-a}"); err != nil {
		t.Fatalf("a release beside a manager scaled to zero that watched the same namespace: %v", err)
	}
}
