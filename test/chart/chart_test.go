package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	release   = "agentrewind"
	namespace = "agentrewind-system"
)

var repoRoot = filepath.Join("..", "..")

func chartDir() string { return filepath.Join(repoRoot, "charts", "agentrewind") }

// helmBin is $HELM (the Makefile exports it), else the newest bin/helm-*.
func helmBin(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		if _, err := os.Stat(h); err == nil {
			return h
		}
	}
	if m, _ := filepath.Glob(filepath.Join(repoRoot, "bin", "helm-v*")); len(m) > 0 {
		return m[len(m)-1]
	}
	t.Fatal("no helm: run 'make helm' (it builds bin/helm-<version> from the Go module proxy) or set HELM")
	return ""
}

// helm runs bin/helm with args and returns its stdout, or its stderr as the error.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helmBin(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No repositories, no cache outside the test.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// rendered is `helm template` output, one object per document.
type rendered struct {
	text string
	objs []*unstructured.Unstructured
}

// render runs helm template over the chart with ci/default-values.yaml and args (more -f / --set).
func render(t *testing.T, args ...string) rendered {
	t.Helper()
	base := []string{"template", release, chartDir(), "--namespace", namespace, "-f", filepath.Join(chartDir(), "ci", "default-values.yaml")}
	out, err := helm(t, append(base, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return rendered{text: out, objs: decodeAll(t, out)}
}

func decodeAll(t *testing.T, text string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		var o map[string]any
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("decoding the rendered chart: %v", err)
		}
		if len(o) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: o})
		}
	}
}

func (r rendered) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func (r rendered) kinds(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// get decodes the rendered object kind/name into into, failing when it is missing.
func get(t *testing.T, r rendered, kind, name string, into any) {
	t.Helper()
	o := r.find(kind, name)
	if o == nil {
		t.Fatalf("the chart renders no %s %s", kind, name)
	}
	convert(t, o.Object, into)
}

func convert(t *testing.T, from, into any) {
	t.Helper()
	b, err := yaml.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatal(err)
	}
}

// fromFile decodes the document of file (config/...) that has kind into into.
func fromFile(t *testing.T, file, kind string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range decodeAll(t, string(b)) {
		if o.GetKind() == kind {
			convert(t, o.Object, into)
			return
		}
	}
	t.Fatalf("%s holds no %s", file, kind)
}

func manager(t *testing.T, r rendered) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	get(t, r, "Deployment", "agentrewind-manager", &d)
	return &d
}

func managerContainer(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			return c
		}
	}
	t.Fatal("the manager Deployment has no container named manager")
	return corev1.Container{}
}

// flags are the manager container's --name=value arguments (a repeated flag keeps the last value).
func flags(t *testing.T, d *appsv1.Deployment) map[string]string {
	t.Helper()
	c := managerContainer(t, d)
	if len(c.Args) == 0 || c.Args[0] != "manager" {
		t.Fatalf("manager args %q do not start with the manager subcommand", c.Args)
	}
	m := map[string]string{}
	for _, a := range c.Args[1:] {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		m[name] = value
	}
	return m
}

func TestChartClusterRoleHasTheRulesOfConfigRBAC(t *testing.T) {
	r := render(t, "--set", "gc.sweep.createRBAC=true")
	for _, tc := range []struct{ kind, chartName, file string }{
		{"ClusterRole", "agentrewind-manager", "config/rbac/role.yaml"},
		{"Role", "agentrewind-leader-election", "config/rbac/leader_election_role.yaml"},
		{"ClusterRole", "agentrewind-gc-sweep-rbac", "config/rbac/gc_sweep_rbac.yaml"},
	} {
		t.Run(tc.chartName, func(t *testing.T) {
			var want, got rbacv1.ClusterRole // a Role's rules decode the same way
			fromFile(t, tc.file, tc.kind, &want)
			get(t, r, tc.kind, tc.chartName, &got)
			if diff := cmp.Diff(want.Rules, got.Rules); diff != "" {
				t.Errorf("the chart's %s %s rules differ from %s (run make manifests) (-config +chart):\n%s", tc.kind, tc.chartName, tc.file, diff)
			}
		})
	}
	// The bindings name the manager's ServiceAccount in the release's namespace.
	var crb rbacv1.ClusterRoleBinding
	get(t, r, "ClusterRoleBinding", "agentrewind-manager", &crb)
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "agentrewind-manager", Namespace: namespace}}
	if diff := cmp.Diff(want, crb.Subjects); diff != "" || crb.RoleRef.Name != "agentrewind-manager" {
		t.Errorf("ClusterRoleBinding binds %s to (-want +got):\n%s", crb.RoleRef.Name, diff)
	}
	if r := render(t, "--set", "gc.sweep.createRBAC=false"); r.find("ClusterRole", "agentrewind-gc-sweep-rbac") != nil ||
		r.find("ClusterRoleBinding", "agentrewind-gc-sweep-rbac") != nil || r.find("ValidatingAdmissionPolicy", "agentrewind-gc-sweep-rbac") != nil {
		t.Error("the sweep's RBAC-creating ClusterRole or its policy is rendered with gc.sweep.createRBAC=false")
	}
}

// The blob sweep runs with the chart's defaults: the manager may create the sweep's RBAC, under the
// admission policy of config/rbac/gc_sweep_rbac.yaml (internal/controller tests it on an API server),
// which names the release's manager.
func TestChartSweepsByDefaultUnderThePolicyOfConfigRBAC(t *testing.T) {
	r := render(t, "--namespace", "ops", "--set", "serviceAccount.name=rewinder")
	if f := flags(t, manager(t, r)); f["gc-sweep-create-rbac"] != "true" || f["gc-sweep-interval"] == "0s" {
		t.Fatalf("the manager's sweep flags by default: create-rbac=%q interval=%q", f["gc-sweep-create-rbac"], f["gc-sweep-interval"])
	}
	if r.find("ClusterRoleBinding", "agentrewind-gc-sweep-rbac") == nil {
		t.Fatal("the sweep's RBAC-creating ClusterRole is not bound by default")
	}
	var want, got admissionv1.ValidatingAdmissionPolicy
	fromFile(t, "config/rbac/gc_sweep_rbac.yaml", "ValidatingAdmissionPolicy", &want)
	get(t, r, "ValidatingAdmissionPolicy", "agentrewind-gc-sweep-rbac", &got)
	if len(got.Spec.MatchConditions) != 1 || got.Spec.MatchConditions[0].Expression != "request.userInfo.username == 'system:serviceaccount:ops:rewinder'" {
		t.Fatalf("the chart's policy applies to %+v, want the release's manager", got.Spec.MatchConditions)
	}
	got.Spec.MatchConditions = want.Spec.MatchConditions
	if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
		t.Errorf("the chart's sweep policy differs from config/rbac/gc_sweep_rbac.yaml (-config +chart):\n%s", diff)
	}
	var b admissionv1.ValidatingAdmissionPolicyBinding
	get(t, r, "ValidatingAdmissionPolicyBinding", "agentrewind-gc-sweep-rbac", &b)
	if b.Spec.PolicyName != got.Name || len(b.Spec.ValidationActions) != 1 || b.Spec.ValidationActions[0] != admissionv1.Deny {
		t.Errorf("the policy's binding: %+v", b.Spec)
	}
}

func TestChartCRDsAreConfigCRDsKeptOnUninstall(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	r := render(t)
	if got := len(r.kinds("CustomResourceDefinition")); got != len(files) {
		t.Errorf("the chart renders %d CRDs, config/crd/bases has %d", got, len(files))
	}
	for _, f := range files {
		var want, got apiextensionsv1.CustomResourceDefinition
		fromFile(t, strings.TrimPrefix(f, repoRoot+string(filepath.Separator)), "CustomResourceDefinition", &want)
		get(t, r, "CustomResourceDefinition", want.Name, &got)
		if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
			t.Errorf("CRD %s differs from %s (run make manifests) (-config +chart):\n%s", want.Name, f, diff)
		}
		if got.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s is not kept on uninstall: annotations %v", want.Name, got.Annotations)
		}
	}
	if r := render(t, "--set", "crds.keep=false"); strings.Contains(r.text, "helm.sh/resource-policy") {
		t.Error("crds.keep=false still renders helm.sh/resource-policy: keep")
	}
	if r := render(t, "--set", "crds.install=false"); len(r.kinds("CustomResourceDefinition")) != 0 {
		t.Error("crds.install=false still renders CRDs")
	}
}

func TestChartManagerRunsUnderTheRestrictedPodSecurityStandard(t *testing.T) {
	for _, values := range []string{"default", "full"} {
		t.Run(values, func(t *testing.T) {
			d := manager(t, render(t, "-f", filepath.Join(chartDir(), "ci", values+"-values.yaml")))
			pod := d.Spec.Template.Spec
			if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
				sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod securityContext %+v: want runAsNonRoot and the RuntimeDefault seccomp profile", sc)
			}
			for _, c := range append(pod.InitContainers, pod.Containers...) {
				sc := c.SecurityContext
				if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
					sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
					sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
					t.Errorf("container %s securityContext %+v: want no privilege escalation, a read-only root, ALL capabilities dropped", c.Name, sc)
				}
				if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
					t.Errorf("container %s has no CPU request or memory limit: %+v", c.Name, c.Resources)
				}
				if c.LivenessProbe == nil || c.ReadinessProbe == nil {
					t.Errorf("container %s lacks a liveness or readiness probe", c.Name)
				}
			}
			if len(pod.TopologySpreadConstraints) == 0 || pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil && values == "default" {
				t.Errorf("no topology spread or anti-affinity: %+v %+v", pod.TopologySpreadConstraints, pod.Affinity)
			}
			for _, c := range pod.TopologySpreadConstraints {
				if c.LabelSelector == nil || c.LabelSelector.MatchLabels["app.kubernetes.io/component"] != "manager" {
					t.Errorf("topology spread constraint %+v does not select the manager's pods", c)
				}
			}
		})
	}
}

func TestChartValuesReachTheManagersFlags(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		d := manager(t, render(t))
		f := flags(t, d)
		c := managerContainer(t, d)
		want := map[string]string{
			"leader-elect":       "true",
			"leader-election-id": "agentrewind.agentrewind.io", // what config/default's manager uses
			"store-endpoint":     "https://s3.example.internal",
			"store-bucket":       "agentrewind",
			"engine-image":       c.Image, // engine Jobs and the proxy run the manager's image
			"gc":                 "true",
			"gc-dry-run":         "false",
			"metrics-secure":     "true",
		}
		for k, v := range want {
			if f[k] != v {
				t.Errorf("--%s=%q, want %q", k, f[k], v)
			}
		}
		if c.Image != "agentrewind:0.2.0" && !strings.HasPrefix(c.Image, "agentrewind:") {
			t.Errorf("manager image %q, want agentrewind:<appVersion>", c.Image)
		}
		for _, absent := range []string{"watch-namespaces", "store-sync-namespace", "gc-namespaces", "anthropic-upstream", "proxy-image", "store-job-ca-key"} {
			if v, ok := f[absent]; ok {
				t.Errorf("--%s=%q set without its value", absent, v)
			}
		}
		if got := *d.Spec.Replicas; got != 1 {
			t.Errorf("replicas %d, want 1", got)
		}
	})
	t.Run("full", func(t *testing.T) {
		r := render(t, "-f", filepath.Join(chartDir(), "ci", "full-values.yaml"))
		d := manager(t, r)
		f := flags(t, d)
		want := map[string]string{
			"engine-image":                    "registry.example.internal/agentrewind-engine:1.2.3",
			"proxy-image":                     "registry.example.internal/agentrewind-proxy:1.2.3",
			"job-ttl":                         "2h",
			"job-active-deadline":             "30m",
			"job-retry-after":                 "10s",
			"store-endpoint":                  "https://minio.storage.svc:9000",
			"store-region":                    "eu-west-1",
			"store-bucket":                    "agent-sessions",
			"store-prefix":                    "prod",
			"store-job-credentials-secret":    "s3-jobs",
			"store-job-access-key-id-key":     "accessKeyID",
			"store-job-secret-access-key-key": "secretAccessKey",
			"store-job-session-token-key":     "token",
			"store-job-ca-key":                "ca.crt",
			"store-sync-namespace":            "team-a",
			"store-sync-interval":             "1m",
			"anthropic-upstream":              "https://llm-gateway.example.internal/anthropic",
			"openai-upstream":                 "https://llm-gateway.example.internal/openai",
			"watch-namespaces":                "team-a,team-b",
			"gc-interval":                     "10m",
			"gc-grace":                        "72h",
			"gc-dry-run":                      "true",
			"gc-namespaces":                   "team-b",
			"gc-sweep-interval":               "12h",
			"gc-sweep-margin":                 "6h",
			"gc-sweep-create-rbac":            "true",
			"gc-checkpoint-keep":              "5",
			"gc-checkpoint-max-bytes":         "10737418240",
			"zap-log-level":                   "debug",
			"zap-stacktrace-level":            "panic",
		}
		for k, v := range want {
			if f[k] != v {
				t.Errorf("--%s=%q, want %q", k, f[k], v)
			}
		}
		c := managerContainer(t, d)
		if c.Image != "registry.example.internal/agentrewind:1.2.3" || c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("manager image %q pull policy %q", c.Image, c.ImagePullPolicy)
		}
		if *d.Spec.Replicas != 3 {
			t.Errorf("replicas %d, want 3", *d.Spec.Replicas)
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			env[e.Name] = e
		}
		for name, key := range map[string]string{"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"} {
			ref := env[name].ValueFrom
			if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "s3-manager" || ref.SecretKeyRef.Key != key {
				t.Errorf("%s = %+v, want the key %s of Secret s3-manager", name, env[name], key)
			}
		}
		// The CA bundle: mounted, and named to Go's TLS through SSL_CERT_DIR.
		if env["SSL_CERT_DIR"].Value != "/etc/agentrewind/store-ca" {
			t.Errorf("SSL_CERT_DIR = %q", env["SSL_CERT_DIR"].Value)
		}
		vols := d.Spec.Template.Spec.Volumes
		if len(vols) != 2 || vols[0].ConfigMap == nil || vols[0].ConfigMap.Name != "corp-ca" || vols[0].ConfigMap.Items[0].Key != "bundle.pem" {
			t.Errorf("CA volume %+v, want the key bundle.pem of ConfigMap corp-ca (and the prices)", vols)
		}
		if len(c.VolumeMounts) != 2 || c.VolumeMounts[0].MountPath != "/etc/agentrewind/store-ca" || !c.VolumeMounts[0].ReadOnly {
			t.Errorf("CA mount %+v", c.VolumeMounts)
		}
		if r.find("ServiceMonitor", "agentrewind-metrics") == nil || r.find("PodDisruptionBudget", "agentrewind-manager") == nil {
			t.Error("serviceMonitor.enabled or podDisruptionBudget.enabled rendered no ServiceMonitor or PodDisruptionBudget")
		}
		// The admission policy only binds in the watched namespaces, so another release may mint elsewhere.
		var b admissionv1.ValidatingAdmissionPolicyBinding
		get(t, r, "ValidatingAdmissionPolicyBinding", "agentrewind-checkpoint-minter", &b)
		if b.Spec.MatchResources == nil || b.Spec.MatchResources.NamespaceSelector == nil ||
			!slices.Equal(b.Spec.MatchResources.NamespaceSelector.MatchExpressions[0].Values, []string{"team-a", "team-b"}) {
			t.Errorf("policy binding %+v, want it limited to team-a and team-b", b.Spec.MatchResources)
		}
	})
	t.Run("minimal", func(t *testing.T) {
		r := render(t, "-f", filepath.Join(chartDir(), "ci", "minimal-values.yaml"))
		f := flags(t, manager(t, r))
		if f["gc"] != "false" || f["metrics-bind-address"] != "0" {
			t.Errorf("--gc=%q --metrics-bind-address=%q, want false and 0", f["gc"], f["metrics-bind-address"])
		}
		for _, kind := range []string{"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount", "Service", "ValidatingAdmissionPolicy"} {
			if objs := r.kinds(kind); len(objs) > 0 {
				t.Errorf("%s %s rendered with it turned off", kind, objs[0].GetName())
			}
		}
		if sa := manager(t, r).Spec.Template.Spec.ServiceAccountName; sa != "platform-agentrewind" {
			t.Errorf("serviceAccountName %q, want platform-agentrewind", sa)
		}
	})
}

// The metrics Service selects the manager's pods, and no ServiceMonitor is rendered by default (its CRD
// need not exist).
func TestChartMetricsServiceSelectsTheManager(t *testing.T) {
	r := render(t)
	var svc corev1.Service
	get(t, r, "Service", "agentrewind-metrics", &svc)
	d := manager(t, r)
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("metrics Service selects %s=%s, the manager's pods have %q", k, v, d.Spec.Template.Labels[k])
		}
	}
	if svc.Spec.Ports[0].TargetPort.StrVal != "metrics" {
		t.Errorf("metrics Service targets %v", svc.Spec.Ports[0].TargetPort)
	}
	if r.find("ServiceMonitor", "agentrewind-metrics") != nil {
		t.Error("a ServiceMonitor is rendered by default")
	}
}

func TestChartPolicyNamesTheManagersServiceAccount(t *testing.T) {
	r := render(t, "--namespace", "ops", "--set", "serviceAccount.name=rewinder")
	var p admissionv1.ValidatingAdmissionPolicy
	get(t, r, "ValidatingAdmissionPolicy", "agentrewind-checkpoint-minter", &p)
	if want := "'system:serviceaccount:ops:rewinder'"; !strings.Contains(p.Spec.Validations[0].Expression, want) {
		t.Errorf("policy expression %q does not name %s", p.Spec.Validations[0].Expression, want)
	}
	if got := manager(t, r).Spec.Template.Spec.ServiceAccountName; got != "rewinder" {
		t.Errorf("manager runs as %q", got)
	}
	var b admissionv1.ValidatingAdmissionPolicyBinding
	get(t, r, "ValidatingAdmissionPolicyBinding", "agentrewind-checkpoint-minter", &b)
	if b.Spec.PolicyName != p.Name || b.Spec.MatchResources != nil {
		t.Errorf("binding %+v: want policy %s in every namespace", b.Spec, p.Name)
	}

	// checkpointPolicy.namespaceSelector narrows it (over watchNamespaces), for a cluster with another release.
	r = render(t, "--set", "watchNamespaces={a}", "--set", "checkpointPolicy.namespaceSelector.matchLabels.team=a")
	get(t, r, "ValidatingAdmissionPolicyBinding", "agentrewind-checkpoint-minter", &b)
	if b.Spec.MatchResources == nil || b.Spec.MatchResources.NamespaceSelector == nil ||
		!cmp.Equal(b.Spec.MatchResources.NamespaceSelector.MatchLabels, map[string]string{"team": "a"}) {
		t.Errorf("binding matchResources %+v, want the namespaces labelled team=a", b.Spec.MatchResources)
	}
}

// No credential ever goes through the chart: it renders no Secret, and the manager reads its keys from
// a Secret it names, never from a literal value.
func TestChartRendersNoSecretValue(t *testing.T) {
	const sentinel = "s3cr3t-SENTINEL"
	for _, values := range []string{"default", "full", "minimal"} {
		r := render(t, "-f", filepath.Join(chartDir(), "ci", values+"-values.yaml"))
		if s := r.kinds("Secret"); len(s) > 0 {
			t.Errorf("%s values render Secret %s", values, s[0].GetName())
		}
		for _, e := range managerContainer(t, manager(t, r)).Env {
			if strings.HasPrefix(e.Name, "AWS_") && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				t.Errorf("%s values: %s is not read from a Secret: %+v", values, e.Name, e)
			}
		}
	}
	// There is no value to put a credential in: the schema refuses one wherever a user might try.
	for _, set := range []string{"store.accessKeyID=" + sentinel, "store.credentialsSecret.secretAccessKey=" + sentinel, "store.secretAccessKey=" + sentinel} {
		out, err := helm(t, "template", release, chartDir(), "-f", filepath.Join(chartDir(), "ci", "default-values.yaml"), "--set", set)
		if err == nil || strings.Contains(out, sentinel) {
			t.Errorf("--set %s was accepted (or rendered): %v", set, err)
		}
	}
}

func TestChartSchemaRejectsATypo(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"stor.endpoint=https://x", "stor"},
		{"store.endpiont=https://x", "endpiont"},
		{"manager.replica=2", "replica"},
		{"gc.sweep.createRbac=true", "createRbac"},
		{"gc.interval=5 minutes", "gc.interval"},
		{"image.pullPolicy=Sometimes", "pullPolicy"},
		{"watchNamespaces[0]=Team_A", "watchNamespaces"},
		{"manager.securityContext.readOnlyRootFileSystem=true", "readOnlyRootFileSystem"},
		{"manager.resources.request.cpu=1", "request"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := helm(t, "template", release, chartDir(), "-f", filepath.Join(chartDir(), "ci", "default-values.yaml"), "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("--set %s: %v, want a schema error naming %q", tc.set, err, tc.want)
			}
		})
	}
	// The store is required, and the error says which value.
	_, err := helm(t, "template", release, chartDir(), "--set", "store.bucket=agentrewind")
	if err == nil || !strings.Contains(err.Error(), "store.endpoint is required") {
		t.Errorf("without store.endpoint: %v, want an error naming store.endpoint", err)
	}
}

func TestChartLints(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(chartDir(), "ci", "*-values.yaml"))
	if len(files) < 3 {
		t.Fatalf("ci/ holds %d value sets, want at least 3", len(files))
	}
	for _, f := range files {
		if out, err := helm(t, "lint", "--strict", chartDir(), "-f", f); err != nil {
			t.Errorf("helm lint -f %s: %v\n%s", filepath.Base(f), err, out)
		}
	}
}

// config/default stays the kustomize equivalent of the chart: release agentrewind in agentrewind-system
// installs every object config/default does (but the namespace, which Helm does not own), under the same
// names, with the manager under the same ServiceAccount and flags.
func TestChartInstallsWhatConfigDefaultDoes(t *testing.T) {
	kubectl := os.Getenv("KUBECTL")
	if kubectl == "" {
		m, _ := filepath.Glob(filepath.Join(repoRoot, "bin", "k8s", "*", "kubectl"))
		if len(m) == 0 {
			t.Fatal("no kubectl to build config/default with: run 'make envtest-assets' or set KUBECTL")
		}
		kubectl = m[len(m)-1]
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(repoRoot, "config", "default")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v", err)
	}
	r := render(t)
	for _, o := range decodeAll(t, string(out)) {
		if o.GetKind() == "Namespace" {
			continue
		}
		if r.find(o.GetKind(), o.GetName()) == nil {
			t.Errorf("config/default installs %s %s, the chart does not", o.GetKind(), o.GetName())
		}
	}
	var kd appsv1.Deployment
	for _, o := range decodeAll(t, string(out)) {
		if o.GetKind() == "Deployment" {
			convert(t, o.Object, &kd)
		}
	}
	want, got := flags(t, &kd), flags(t, manager(t, r))
	for k := range want {
		if _, ok := got[k]; !ok && k != "store-endpoint" {
			t.Errorf("config/default's manager has --%s, the chart's does not", k)
		}
	}
	if kd.Spec.Template.Spec.ServiceAccountName != manager(t, r).Spec.Template.Spec.ServiceAccountName {
		t.Errorf("ServiceAccount %q in config/default, %q in the chart", kd.Spec.Template.Spec.ServiceAccountName, manager(t, r).Spec.Template.Spec.ServiceAccountName)
	}
}
