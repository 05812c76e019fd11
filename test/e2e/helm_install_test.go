//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

const (
	// helmRelease is the suite's Helm release of the operator: named like the chart, its objects get
	// config/default's names (agentrewind-manager ...).
	helmRelease = "agentrewind"
	// otherOperatorLabel marks a namespace where another release of the operator mints Checkpoints
	// (the upgrade test's): the suite's release leaves the Checkpoint admission policy out of it.
	otherOperatorLabel = "agentrewind.io/e2e-other-operator"
)

// storeServiceURL is the in-cluster store as the manager reaches it (config/manager's --store-endpoint).
func storeServiceURL() string {
	return fmt.Sprintf("http://%s.%s.svc:%d", storeService, systemNamespace, storePort)
}

// helmBin is $HELM (make e2e exports it), else the newest bin/helm-*.
func helmBin() (string, error) {
	if h := os.Getenv("HELM"); h != "" {
		return h, nil
	}
	if m, _ := filepath.Glob(filepath.Join(repoRoot, "bin", "helm-v*")); len(m) > 0 {
		return m[len(m)-1], nil
	}
	return "", fmt.Errorf("no helm: run 'make helm' (or 'make e2e', which builds it) or set HELM")
}

// helmCmd runs helm against the suite's cluster, with no repository or cache outside bin/.
func helmCmd(args ...string) (string, error) {
	bin, err := helmBin()
	if err != nil {
		return "", err
	}
	home := filepath.Join(repoRoot, "bin", "e2e-helm-home")
	cmd := exec.Command(bin, append(args, "--kubeconfig", kubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// helmValues are the values the suite installs a release with: the image under test (loaded into the
// node, never pulled), the in-cluster store, and what managerArgs gives config/default's manager.
func helmValues(overrides map[string]any) map[string]any {
	name, tag := splitImage(image)
	v := map[string]any{
		"image": map[string]any{"repository": name, "tag": tag, "pullPolicy": "Never"},
		"store": map[string]any{
			"endpoint": storeServiceURL(),
			"bucket":   storeBucket,
			"sync":     map[string]any{"namespace": syncNamespace, "interval": "3s"},
		},
		// Every provider's live calls go to the counted fake model: none leaves the cluster.
		"upstreams": map[string]any{"anthropic": countedLLMURL(), "openai": countedLLMURL()},
		"engine":    map[string]any{"jobRetryAfter": "5s"},
		"gc":        map[string]any{"interval": "5s"},
		"checkpointPolicy": map[string]any{"namespaceSelector": map[string]any{
			"matchExpressions": []any{map[string]any{"key": otherOperatorLabel, "operator": "DoesNotExist"}}}},
	}
	for k, o := range overrides {
		v[k] = o
	}
	return v
}

// writeValues writes values to a file under bin/ for helm -f.
func writeValues(values map[string]any) (string, error) {
	b, err := yaml.Marshal(values)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Join(repoRoot, "bin"), "e2e-values-*.yaml")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.Write(b)
	return f.Name(), err
}

// helmInstallOperator installs (or upgrades) the suite's release of charts/agentrewind, then checks
// that its manager got every flag managerArgs gives config/default's, so the suite tests the same
// operator whichever way it was installed.
func helmInstallOperator() error {
	values, err := writeValues(helmValues(nil))
	if err != nil {
		return err
	}
	defer os.Remove(values)
	// A cluster the suite last ran on with E2E_INSTALL=kustomize holds config/default's manager, whose
	// Deployment selector (immutable) the chart's differs from: it goes, and the release takes over the
	// rest of that installation (--take-ownership).
	var old appsv1.Deployment
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: systemNamespace, Name: managerName}, &old); err == nil &&
		old.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		if out, err := kubectl("delete", "deployment", managerName, "-n", systemNamespace, "--wait", "--timeout", "120s"); err != nil {
			return fmt.Errorf("deleting config/default's manager before installing the chart: %w\n%s", err, out)
		}
	}
	if out, err := helmCmd("upgrade", "--install", helmRelease, filepath.Join(repoRoot, "charts", "agentrewind"),
		"--namespace", systemNamespace, "-f", values, "--take-ownership", "--wait", "--timeout", "4m"); err != nil {
		return fmt.Errorf("helm upgrade --install %s charts/agentrewind: %w\n%s", helmRelease, err, out)
	}
	var dep appsv1.Deployment
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: systemNamespace, Name: managerName}, &dep); err != nil {
		return fmt.Errorf("the release's manager Deployment: %w", err)
	}
	args := dep.Spec.Template.Spec.Containers[0].Args
	for _, want := range managerArgs() {
		if !slices.Contains(args, want) {
			return fmt.Errorf("the chart's manager lacks %s (helmValues and managerArgs disagree): %s", want, strings.Join(args, " "))
		}
	}
	return nil
}

// uninstallSuiteRelease removes the suite's Helm release, if a run with Helm left one, before
// config/default is applied (the chart's manager Deployment has another, immutable, selector). The
// CRDs and every object stay.
func uninstallSuiteRelease() error {
	var dep appsv1.Deployment
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: systemNamespace, Name: managerName}, &dep)
	if err != nil || dep.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		return nil
	}
	if out, err := helmCmd("uninstall", helmRelease, "--namespace", systemNamespace, "--wait"); err != nil {
		return fmt.Errorf("helm uninstall %s before applying config/default: %w\n%s", helmRelease, err, out)
	}
	return nil
}
