//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// The upgrade test's release: its own namespace and names, so it runs beside the suite's release.
const upgradeRelease = "arw-upgrade"

// TestHelmUpgradeFromThePreviousChartKeepsCRs installs the chart as it was at its previous version (the
// commit charts/agentrewind/ci/previous-version names) as a release of its own, creates a verified
// AgentSession (with the ResumePlan and Checkpoints the operator makes for it), upgrades the release
// to the working tree's chart, and checks that every one of those objects is still there, that the
// manager rolled to the new chart and reconciles them, and that helm uninstall keeps the CRDs and the
// objects.
//
// Two managers must not reconcile one namespace: the suite's manager (it watches every namespace) is
// scaled to zero for the test, and the suite's Checkpoint admission policy leaves the test's namespace
// (labelled otherOperatorLabel) to the other release's. The release takes over the CRDs (helm
// --take-ownership), so that its uninstall is what must keep them; they go back to the suite's release
// at the end.
func TestHelmUpgradeFromThePreviousChartKeepsCRs(t *testing.T) {
	prevDir, prevVersion := previousChart(t)
	curVersion := chartVersion(t, filepath.Join(repoRoot, "charts", "agentrewind"))
	if prevVersion == curVersion {
		t.Fatalf("ci/previous-version names %s, the working tree's chart version too: bump Chart.yaml's version", prevVersion)
	}
	ctx := t.Context()
	ns := upgradeNamespace(t)
	pauseSuiteManager(t)
	giveCRDsBack(t)

	// Only values the previous chart knows: its schema refuses any other.
	name, tag := splitImage(image)
	values, err := writeValues(map[string]any{
		"fullnameOverride": upgradeRelease,
		"image":            map[string]any{"repository": name, "tag": tag, "pullPolicy": "Never"},
		"store":            map[string]any{"endpoint": storeServiceURL(), "bucket": storeBucket},
		"watchNamespaces":  []string{ns},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(values) })
	t.Cleanup(func() { _, _ = helmCmd("uninstall", upgradeRelease, "--namespace", ns, "--ignore-not-found", "--wait") })
	if out, err := helmCmd("install", upgradeRelease, prevDir, "--namespace", ns, "-f", values, "--take-ownership", "--wait", "--timeout", "4m"); err != nil {
		t.Fatalf("helm install of chart %s: %v\n%s", prevVersion, err, out)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: upgradeRelease + "-manager"}}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
		t.Fatal(err)
	}
	if got := dep.Labels["helm.sh/chart"]; got != "agentrewind-"+prevVersion {
		t.Fatalf("the installed manager is labelled helm.sh/chart=%s, want agentrewind-%s", got, prevVersion)
	}
	oldPods := managerPodsIn(t, ns)

	// Objects of every kind the operator owns, made by the previous chart's installation.
	s := verifiedSession(t, ns, "triage", recordedSession(), v1alpha1.AgentSpec{})
	eventually(t, time.Minute, "the session's ResumePlan", func(ctx context.Context) (bool, string, error) {
		var plans v1alpha1.ResumePlanList
		err := k8s.List(ctx, &plans, client.InNamespace(ns))
		return err == nil && len(plans.Items) > 0, "no ResumePlan yet", err
	})
	before := operatorObjects(t, ns)
	t.Logf("before the upgrade: %v", slices.Sorted(maps.Keys(before)))

	if out, err := helmCmd("upgrade", upgradeRelease, filepath.Join(repoRoot, "charts", "agentrewind"), "--namespace", ns, "-f", values, "--take-ownership",
		"--wait", "--timeout", "4m"); err != nil {
		t.Fatalf("helm upgrade to chart %s: %v\n%s", curVersion, err, out)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
		t.Fatal(err)
	}
	if got := dep.Labels["helm.sh/chart"]; got != "agentrewind-"+curVersion {
		t.Errorf("after the upgrade the manager is labelled helm.sh/chart=%s, want agentrewind-%s", got, curVersion)
	}
	// The manager rolled: the pods of the previous chart are gone, a new one runs.
	eventually(t, 2*time.Minute, "the manager rolled to the new chart", func(ctx context.Context) (bool, string, error) {
		pods := managerPodsIn(t, ns)
		for _, p := range pods {
			if slices.Contains(oldPods, p) {
				return false, fmt.Sprintf("pod %s of the previous chart still runs", p), nil
			}
		}
		return len(pods) == 1, fmt.Sprintf("running manager pods %v", pods), nil
	})
	if diff := diffObjects(before, operatorObjects(t, ns)); diff != "" {
		t.Errorf("the upgrade changed the operator's objects:\n%s", diff)
	}
	// The new manager reconciles the objects it inherited: a spec change is observed and Ready again.
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
		t.Fatal(err)
	}
	gen := s.Generation
	patch := client.MergeFrom(s.DeepCopy())
	s.Spec.Retention.GracePeriodSeconds = ptr.To[int64](3600)
	if err := k8s.Patch(ctx, s, patch); err != nil {
		t.Fatal(err)
	}
	if s.Generation == gen {
		t.Fatalf("patching spec.retention left generation %d", gen)
	}
	waitReady(t, s, 2*time.Minute)

	// helm uninstall removes the manager and keeps the CRDs (helm.sh/resource-policy: keep), and so
	// every object.
	out, err := helmCmd("uninstall", upgradeRelease, "--namespace", ns, "--wait")
	if err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), dep); !apierrors.IsNotFound(err) {
		t.Errorf("the manager Deployment after helm uninstall: %v, want NotFound", err)
	}
	for _, plural := range []string{"agentsessions", "forkruns", "resumeplans", "checkpoints"} {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := k8s.Get(ctx, client.ObjectKey{Name: plural + ".agentrewind.io"}, crd); err != nil || crd.GetDeletionTimestamp() != nil {
			t.Errorf("CRD %s.agentrewind.io after helm uninstall: %v (deleting: %v), want it kept", plural, err, crd.GetDeletionTimestamp() != nil)
		}
		if !strings.Contains(out, plural+".agentrewind.io") {
			t.Errorf("helm uninstall did not report keeping CRD %s.agentrewind.io:\n%s", plural, out)
		}
	}
	if diff := diffObjects(before, operatorObjects(t, ns)); diff != "" {
		t.Errorf("helm uninstall changed the operator's objects:\n%s", diff)
	}
}

// previousChart extracts the chart at the commit ci/previous-version names into a temporary directory
// and returns it with its version. Without that commit in the git history (a shallow clone, an export),
// the test is skipped, saying so.
func previousChart(t *testing.T) (dir, version string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "charts", "agentrewind", "ci", "previous-version"))
	if err != nil {
		t.Fatal(err)
	}
	var prev struct {
		Version string `json:"version"`
		Commit  string `json:"commit"`
	}
	if err := yaml.UnmarshalStrict(b, &prev); err != nil || prev.Version == "" || prev.Commit == "" {
		t.Fatalf("charts/agentrewind/ci/previous-version: %v (%+v), want version: and commit:", err, prev)
	}
	if out, err := exec.Command("git", "-C", repoRoot, "cat-file", "-e", prev.Commit+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED, NOT TESTED: the upgrade from chart %s needs commit %s in the git history, which this checkout lacks (%v %s); "+
			"run the suite from a full clone", prev.Version, prev.Commit, err, bytes.TrimSpace(out))
	}
	archive, err := exec.Command("git", "-C", repoRoot, "archive", prev.Commit, "charts/agentrewind").Output()
	if err != nil {
		t.Fatalf("git archive %s charts/agentrewind: %v", prev.Commit, err)
	}
	root := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(h.Name) {
			continue
		}
		path := filepath.Join(root, h.Name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir = filepath.Join(root, "charts", "agentrewind")
	if got := chartVersion(t, dir); got != prev.Version {
		t.Fatalf("commit %s holds chart version %s, ci/previous-version says %s", prev.Commit, got, prev.Version)
	}
	return dir, prev.Version
}

func chartVersion(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.Version == "" {
		t.Fatalf("%s/Chart.yaml: no version (%v)", dir, err)
	}
	return c.Version
}

// upgradeNamespace is the test's namespace: restricted, with the store Secret its engine Jobs read and
// the other release's manager store Secret, and outside the suite's Checkpoint policy.
func upgradeNamespace(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("e2e-helm-upgrade-%d", time.Now().Unix()%100000)
	labels := restrictedLabels()
	labels[otherOperatorLabel] = "true"
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}},
		storeSecret(ns),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: upgradeRelease + "-manager-store", Namespace: ns},
			StringData: map[string]string{"accessKeyID": storeAccessKey, "secretAccessKey": storeSecretKey}},
	}
	for _, o := range objs {
		if err := k8s.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if os.Getenv("E2E_KEEP") != "" || t.Failed() {
			out, _ := kubectl("get", "all,agentrewind,events", "-n", ns, "-o", "wide")
			t.Logf("namespace %s:\n%s", ns, out)
		}
		if os.Getenv("E2E_KEEP") == "" {
			_ = k8s.Delete(context.Background(), objs[0])
		}
	})
	return ns
}

// pauseSuiteManager scales the suite's manager to zero until the test ends, then back.
func pauseSuiteManager(t *testing.T) {
	t.Helper()
	scale := func(n string) error {
		out, err := kubectl("scale", "-n", systemNamespace, "deployment/"+managerName, "--replicas="+n)
		if err != nil {
			return fmt.Errorf("kubectl scale --replicas=%s: %w\n%s", n, err, out)
		}
		return nil
	}
	t.Cleanup(func() {
		if err := scale("1"); err != nil {
			t.Error(err)
			return
		}
		if out, err := kubectl("rollout", "status", "-n", systemNamespace, "deployment/"+managerName, "--timeout", "180s"); err != nil {
			t.Errorf("the suite's manager did not come back: %v\n%s", err, out)
		}
	})
	if err := scale("0"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the suite's manager stopped", func(ctx context.Context) (bool, string, error) {
		pods := managerPodsIn(t, systemNamespace)
		return len(pods) == 0, fmt.Sprintf("manager pods %v", pods), nil
	})
}

// giveCRDsBack returns the CRDs to the suite's release when the test ends (or, installed with
// kustomize, to no release).
func giveCRDsBack(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		for _, plural := range []string{"agentsessions", "forkruns", "resumeplans", "checkpoints", "storagebudgets"} {
			args := []string{"annotate", "crd", plural + ".agentrewind.io", "--overwrite"}
			if envOr("E2E_INSTALL", "helm") == "helm" {
				args = append(args, "meta.helm.sh/release-name="+helmRelease, "meta.helm.sh/release-namespace="+systemNamespace)
			} else {
				args = append(args, "meta.helm.sh/release-name-", "meta.helm.sh/release-namespace-", "helm.sh/resource-policy-")
			}
			if out, err := kubectl(args...); err != nil {
				t.Errorf("giving CRD %s back: %v\n%s", plural, err, out)
			}
		}
	})
}

// managerPodsIn are the names of the running manager pods in ns.
func managerPodsIn(t *testing.T, ns string) []string {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(t.Context(), &pods, client.InNamespace(ns),
		client.MatchingLabels{"app.kubernetes.io/name": "agentrewind", "app.kubernetes.io/component": "manager"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			names = append(names, p.Name)
		}
	}
	return names
}

// operatorObjects are the UIDs of the AgentSessions, ForkRuns, ResumePlans and Checkpoints in ns, by
// kind/name.
func operatorObjects(t *testing.T, ns string) map[string]types.UID {
	t.Helper()
	objs := map[string]types.UID{}
	lists := map[string]client.ObjectList{
		"AgentSession": &v1alpha1.AgentSessionList{}, "ForkRun": &v1alpha1.ForkRunList{},
		"ResumePlan": &v1alpha1.ResumePlanList{}, "Checkpoint": &v1alpha1.CheckpointList{},
	}
	for kind, list := range lists {
		if err := k8s.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			t.Fatalf("listing %ss: %v", kind, err)
		}
		items, err := metaItems(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			objs[kind+"/"+o.GetName()] = o.GetUID()
		}
	}
	return objs
}

func metaItems(list client.ObjectList) ([]metav1.Object, error) {
	var out []metav1.Object
	switch l := list.(type) {
	case *v1alpha1.AgentSessionList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *v1alpha1.ForkRunList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *v1alpha1.ResumePlanList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *v1alpha1.CheckpointList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		return nil, fmt.Errorf("unexpected list %T", list)
	}
	return out, nil
}

// diffObjects says which objects went missing or were replaced (a new UID) between before and after.
func diffObjects(before, after map[string]types.UID) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(before)) {
		switch uid, ok := after[k]; {
		case !ok:
			fmt.Fprintf(&b, "  %s is gone\n", k)
		case uid != before[k]:
			fmt.Fprintf(&b, "  %s was replaced (uid %s, was %s)\n", k, uid, before[k])
		}
	}
	return b.String()
}
