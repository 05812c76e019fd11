package chart

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The values of a hostile (or careless) platform engineer: each one tries to add a manager flag, a field
// or an object to the rendered manifests, at every indentation the chart's templates use.
var hostileStrings = []string{
	// A newline, then a list item and a mapping key at each indentation.
	"x\n- --evil=1\n  - --evil=1\n    - --evil=1\n      - --evil=1\n        - --evil=1\n          - --evil=1\n" +
		"            - --evil=1\nevil: 1\n  evil: 1\n    evil: 1\n      evil: 1\n        evil: 1\n---\nevil: 1",
	// A leading dash (a nested list where the value is a list item), a quote and ": " (a mapping).
	`- --evil" evil: "1`,
	// ": " alone, and a comment.
	"evil: 1 # x",
}

// stringValuePaths are the dotted paths of every string in values.yaml, and of a string element of each
// list of strings.
func stringValuePaths(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	var paths []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case string:
			paths = append(paths, prefix)
		case map[string]any:
			for k, e := range v {
				walk(strings.TrimPrefix(prefix+"."+k, "."), e)
			}
		}
	}
	walk("", values)
	// Lists of strings, and the string values of maps and lists of objects the templates copy.
	paths = append(paths, "watchNamespaces[]", "gc.namespaces[]", "manager.extraArgs[]", "imagePullSecrets[].name",
		"manager.extraEnv[].value", "manager.podAnnotations.a", "manager.podLabels.a", "manager.nodeSelector.a",
		"serviceAccount.annotations.a", "metrics.service.annotations.a", "metrics.serviceMonitor.labels.a",
		"checkpointPolicy.namespaceSelector.matchLabels.a", "manager.podDisruptionBudget.maxUnavailable")
	sort.Strings(paths)
	return paths
}

// valuesAt is a values document setting path (a.b, a.b[], a.b[].c) to value.
func valuesAt(path string, value any) map[string]any {
	parts := strings.Split(path, ".")
	var build func(i int) any
	build = func(i int) any {
		if i == len(parts) {
			return value
		}
		name, list := strings.CutSuffix(parts[i], "[]")
		var inner any = build(i + 1)
		if name == "extraEnv" {
			inner = map[string]any{"name": "X", "value": value}
			return map[string]any{name: []any{inner}}
		}
		if list {
			inner = []any{inner}
		}
		return map[string]any{name: inner}
	}
	m := build(0).(map[string]any)
	if strings.HasPrefix(path, "image.") {
		// The manager's image reaches --engine-image only without engine.image.
		m["engine"] = map[string]any{"image": "", "proxyImage": ""}
	}
	if path == "store.caBundle.secretName" {
		m["store"].(map[string]any)["caBundle"].(map[string]any)["configMapName"] = ""
	}
	return m
}

// injected reports where the rendered manifests hold something no value should put there: a key or a
// manager flag named evil, a list inside a list of arguments, a document of its own.
func injected(v any, where string) []string {
	var found []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.Contains(k, "evil") {
				found = append(found, where+"."+k)
			}
			found = append(found, injected(e, where+"."+k)...)
		}
	case []any:
		for i, e := range v {
			if _, nested := e.([]any); nested && (strings.HasSuffix(where, ".args") || strings.HasSuffix(where, ".command")) {
				found = append(found, fmt.Sprintf("%s[%d] is a list", where, i))
			}
			found = append(found, injected(e, fmt.Sprintf("%s[%d]", where, i))...)
		}
	case string:
		if v == "--evil=1" || v == "--evil" || strings.HasPrefix(v, "--evil\"") {
			found = append(found, where+" = "+v)
		}
	}
	return found
}

// Every string value, whatever it holds, either is refused (by the schema or a template's fail, never by
// a YAML error of the rendered manifests) or lands as one string where it belongs: no value adds a
// manager flag, a field or an object.
func TestChartNoStringValueInjectsYAMLOrFlags(t *testing.T) {
	full := filepath.Join(chartDir(), "ci", "full-values.yaml")
	base := render(t, "-f", full)
	dir := t.TempDir()
	accepted := 0
	for i, path := range stringValuePaths(t) {
		for j, s := range hostileStrings {
			file := filepath.Join(dir, fmt.Sprintf("v%d-%d.yaml", i, j))
			b, err := yaml.Marshal(valuesAt(path, s))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := helm(t, "template", release, chartDir(), "--namespace", namespace,
				"-f", filepath.Join(chartDir(), "ci", "default-values.yaml"), "-f", full, "-f", file)
			if err != nil {
				if msg := err.Error(); !strings.Contains(msg, "values don't meet the specifications of the schema") && !strings.Contains(msg, "execution error at") {
					t.Errorf("%s=%q breaks the rendered YAML: %v", path, s, err)
				}
				continue
			}
			accepted++
			objs := decodeAll(t, out)
			if len(objs) != len(base.objs) {
				t.Errorf("%s=%q renders %d objects, want %d", path, s, len(objs), len(base.objs))
			}
			for _, o := range objs {
				if found := injected(o.Object, o.GetKind()+"/"+o.GetName()); len(found) > 0 {
					t.Errorf("%s=%q injects %q", path, s, found)
				}
			}
			if path != "manager.extraArgs[]" {
				want, got := managerArgs(base), managerArgs(rendered{objs: objs})
				if len(want) != len(got) {
					t.Errorf("%s=%q: the manager has %d arguments, want %d: %q", path, s, len(got), len(want), got)
				}
			}
		}
	}
	if accepted == 0 {
		t.Error("every hostile value was refused: the test checks nothing")
	}
}

// managerArgs are the manager container's arguments, as rendered (whatever their type).
func managerArgs(r rendered) []any {
	d := r.find("Deployment", release+"-manager")
	if d == nil {
		return nil
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		if c, ok := c.(map[string]any); ok && c["name"] == "manager" {
			args, _ := c["args"].([]any)
			return args
		}
	}
	return nil
}

// restrictedViolations lists what of pod breaks the restricted Pod Security Standard (the checks of
// k8s.io/pod-security-admission's restricted and baseline levels that a Deployment's pod can fail).
func restrictedViolations(pod corev1.PodSpec) []string {
	var v []string
	if pod.HostNetwork || pod.HostPID || pod.HostIPC || pod.HostUsers != nil && *pod.HostUsers {
		v = append(v, "host namespaces")
	}
	for _, vol := range pod.Volumes {
		if vol.HostPath != nil {
			v = append(v, "hostPath volume "+vol.Name)
		}
	}
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if psc.RunAsUser != nil && *psc.RunAsUser == 0 {
		v = append(v, "pod runAsUser 0")
	}
	safeSysctls := []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
		"net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
		"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
	for _, s := range psc.Sysctls {
		if !slices.Contains(safeSysctls, s.Name) {
			v = append(v, "sysctl "+s.Name)
		}
	}
	okSeccomp := func(p *corev1.SeccompProfile) bool {
		return p != nil && (p.Type == corev1.SeccompProfileTypeRuntimeDefault || p.Type == corev1.SeccompProfileTypeLocalhost)
	}
	okSELinux := func(o *corev1.SELinuxOptions) bool {
		return o == nil || o.User == "" && o.Role == "" &&
			slices.Contains([]string{"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}, o.Type)
	}
	if !okSELinux(psc.SELinuxOptions) {
		v = append(v, "pod seLinuxOptions")
	}
	if psc.WindowsOptions != nil && psc.WindowsOptions.HostProcess != nil && *psc.WindowsOptions.HostProcess {
		v = append(v, "pod hostProcess")
	}
	if psc.SeccompProfile != nil && !okSeccomp(psc.SeccompProfile) {
		v = append(v, "pod seccompProfile")
	}
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		if sc.Privileged != nil && *sc.Privileged {
			v = append(v, c.Name+" privileged")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			v = append(v, c.Name+" allowPrivilegeEscalation not false")
		}
		if (sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot) && (psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot) || sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
			v = append(v, c.Name+" runAsNonRoot not true")
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			v = append(v, c.Name+" runAsUser 0")
		}
		if !okSeccomp(sc.SeccompProfile) && !okSeccomp(psc.SeccompProfile) || sc.SeccompProfile != nil && !okSeccomp(sc.SeccompProfile) {
			v = append(v, c.Name+" seccompProfile")
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			v = append(v, c.Name+" capabilities ALL not dropped")
		} else if slices.ContainsFunc(sc.Capabilities.Add, func(c corev1.Capability) bool { return c != "NET_BIND_SERVICE" }) {
			v = append(v, c.Name+" capabilities added")
		}
		if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			v = append(v, c.Name+" procMount")
		}
		if !okSELinux(sc.SELinuxOptions) {
			v = append(v, c.Name+" seLinuxOptions")
		}
		if sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess {
			v = append(v, c.Name+" hostProcess")
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				v = append(v, c.Name+" hostPort")
			}
		}
	}
	return v
}

// No value takes the manager's pod out of the restricted Pod Security Standard: one that would is refused
// by the schema, and one left out or set to null leaves the chart's restricted setting in place.
func TestChartManagerStaysRestrictedWhateverItsSecurityValues(t *testing.T) {
	for _, set := range []string{
		"manager.securityContext=null", "manager.podSecurityContext=null",
		"manager.securityContext=null,manager.podSecurityContext=null",
		"manager.securityContext.capabilities=null", "manager.securityContext.capabilities.drop=null",
		"manager.securityContext.allowPrivilegeEscalation=null", "manager.podSecurityContext.runAsNonRoot=null",
		"manager.podSecurityContext.seccompProfile=null", "manager.podSecurityContext.seccompProfile.type=null",
		"manager.securityContext.capabilities.drop={}", "manager.securityContext.capabilities.drop[0]=NET_RAW",
		"manager.securityContext.capabilities.add[0]=SYS_ADMIN", "manager.securityContext.capabilities.add[0]=NET_BIND_SERVICE",
		"manager.securityContext.privileged=true", "manager.securityContext.allowPrivilegeEscalation=true",
		"manager.securityContext.runAsNonRoot=false", "manager.podSecurityContext.runAsNonRoot=false",
		"manager.securityContext.runAsUser=0", "manager.podSecurityContext.runAsUser=0",
		"manager.podSecurityContext.seccompProfile.type=Unconfined", "manager.securityContext.seccompProfile.type=Unconfined",
		"manager.securityContext.procMount=Unmasked", "manager.podSecurityContext.sysctls[0].name=kernel.msgmax,manager.podSecurityContext.sysctls[0].value=1",
		"manager.securityContext.windowsOptions.hostProcess=true", "manager.podSecurityContext.windowsOptions.hostProcess=true",
		"manager.podSecurityContext.seLinuxOptions.type=spc_t", "manager.securityContext.seLinuxOptions.user=root",
		"manager.securityContext.readOnlyRootFilesystem=false",
	} {
		t.Run(set, func(t *testing.T) {
			out, err := helm(t, "template", release, chartDir(), "--namespace", namespace,
				"-f", filepath.Join(chartDir(), "ci", "default-values.yaml"), "--set", set)
			if err != nil {
				if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
					t.Fatalf("refused, but not by the schema: %v", err)
				}
				return
			}
			d := manager(t, rendered{text: out, objs: decodeAll(t, out)})
			if v := restrictedViolations(d.Spec.Template.Spec); len(v) > 0 {
				t.Errorf("the manager's pod breaks the restricted standard: %q", v)
			}
		})
	}
	// The checker itself sees a privileged pod.
	if v := restrictedViolations(corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "c"}}}); len(v) < 4 {
		t.Errorf("restrictedViolations of a bare pod: %q", v)
	}
}

// Values the schema lets through one by one but that contradict each other or the chart, and empty
// required ones: each is refused, naming the value and what to set instead.
func TestChartRefusesContradictoryOrMissingValues(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"store.endpoint=", "store.endpoint is required: the S3 endpoint"},
		{"store.bucket=", "store.bucket is required: the bucket"},
		{"store.jobCredentials.secretName=", "store.jobCredentials.secretName is required: the name of the Secret"},
		{"serviceAccount.create=false", "serviceAccount.name is required when serviceAccount.create is false"},
		{"manager.replicas=2,manager.leaderElection.enabled=false", "manager.replicas > 1 needs manager.leaderElection.enabled"},
		{"manager.replicas=2,manager.extraArgs={--leader-elect=false}", "--leader-elect is set by the chart"},
		{"manager.extraArgs={--leader-elect}", "--leader-elect is set by the chart"},
		{"manager.extraArgs={--health-probe-bind-address=:9}", "--health-probe-bind-address is set by the chart"},
		{"manager.extraArgs={--metrics-bind-address=0}", "--metrics-bind-address is set by the chart"},
		{"store.caBundle.secretName=a,store.caBundle.configMapName=b", "set secretName or configMapName, not both"},
		{"watchNamespaces={team-a},gc.namespaces={team-a,team-b}", "gc.namespaces: team-b is not among watchNamespaces (team-a)"},
		{"watchNamespaces={team-a},store.sync.namespace=team-b", "store.sync.namespace: team-b is not among watchNamespaces (team-a)"},
		{"metrics.port=8081", "metrics.port 8081 is the manager's health probe port"},
		{"manager.podLabels.app\\.kubernetes\\.io/component=x", "manager.podLabels: app.kubernetes.io/component is a label the chart sets"},
		{"manager.podLabels.app\\.kubernetes\\.io/instance=x", "manager.podLabels: app.kubernetes.io/instance is a label the chart sets"},
		{"metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.labels.app\\.kubernetes\\.io/name=x", "metrics.serviceMonitor.labels: app.kubernetes.io/name"},
		{"manager.podAnnotations.kubectl\\.kubernetes\\.io/default-container=x", "kubectl.kubernetes.io/default-container is set by the chart"},
		{"metrics.enabled=false,metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.enabled needs metrics.enabled"},
		{"manager.podDisruptionBudget.enabled=true,manager.podDisruptionBudget.maxUnavailable=0", "maxUnavailable 0 would forbid every eviction"},
		{"manager.podDisruptionBudget.enabled=true,manager.podDisruptionBudget.maxUnavailable=0%", "maxUnavailable 0 would forbid every eviction"},
		{"manager.podDisruptionBudget.enabled=true,manager.podDisruptionBudget.maxUnavailable=00%", "maxUnavailable 0 would forbid every eviction"},
		{"manager.extraEnv[0].name=AWS_SECRET_ACCESS_KEY,manager.extraEnv[0].value=x", "AWS_SECRET_ACCESS_KEY is set by the chart"},
		{"manager.extraEnv[0].name=SSL_CERT_DIR,manager.extraEnv[0].value=/tmp", "SSL_CERT_DIR is set by the chart"},
		{"manager.extraEnv[0].name=OPENAI_API_KEY,manager.extraEnv[0].value=sk-x", "OPENAI_API_KEY looks like a credential"},
		{"manager.extraEnv[0].name=db_password,manager.extraEnv[0].value=x", "db_password looks like a credential"},
		{"manager.extraEnv[0].name=GITHUB_TOKEN,manager.extraEnv[0].value=", "GITHUB_TOKEN looks like a credential"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			args := []string{"template", release, chartDir(), "--namespace", namespace, "--set", tc.set}
			if !strings.HasPrefix(tc.set, "store.endpoint=") {
				args = append(args, "--set", "store.endpoint=https://s3.example.internal")
			}
			if !strings.HasPrefix(tc.set, "store.bucket=") {
				args = append(args, "--set", "store.bucket=agentrewind")
			}
			_, err := helm(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("--set %s: %v, want an error saying %q", tc.set, err, tc.want)
			}
		})
	}
	// And what they allow stays allowed.
	for _, set := range []string{"watchNamespaces={team-a,team-b},gc.namespaces={team-b},store.sync.namespace=team-a",
		"manager.extraArgs={--zap-devel}", "manager.podLabels.team=a", "manager.podDisruptionBudget.enabled=true,manager.podDisruptionBudget.maxUnavailable=50%", "manager.extraEnv[0].name=GOMAXPROCS,manager.extraEnv[0].value=2",
		"manager.extraEnv[0].name=API_TOKEN,manager.extraEnv[0].valueFrom.secretKeyRef.name=s,manager.extraEnv[0].valueFrom.secretKeyRef.key=k", "manager.replicas=0,manager.leaderElection.enabled=false"} {
		render(t, "--set", set)
	}
}

// Counts reach the manifests as the integers they are, whether from a values file (where YAML numbers
// are float64: 1000000 would print 1e+06) or --set, up to their bound; past it, or negative, they are
// refused.
func TestChartCountsRenderAsIntegersWithinBounds(t *testing.T) {
	file := filepath.Join(t.TempDir(), "counts.yaml")
	const counts = `
manager:
  replicas: 1000000
  terminationGracePeriodSeconds: 1000000
  podDisruptionBudget: {enabled: true, maxUnavailable: 1000000}
gc:
  checkpoints: {keep: 1000000, maxBytes: 9007199254740991}
metrics:
  port: 10000
  service: {port: 10000}
`
	if err := os.WriteFile(file, []byte(counts), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-f", file}, {"--set", "manager.replicas=1000000,manager.terminationGracePeriodSeconds=1000000," +
		"manager.podDisruptionBudget.enabled=true,manager.podDisruptionBudget.maxUnavailable=1000000,gc.checkpoints.keep=1000000," +
		"gc.checkpoints.maxBytes=9007199254740991,metrics.port=10000,metrics.service.port=10000"}} {
		r := render(t, args...)
		for _, want := range []string{"replicas: 1000000\n", "terminationGracePeriodSeconds: 1000000\n", "maxUnavailable: 1000000\n",
			`"--gc-checkpoint-keep=1000000"`, `"--gc-checkpoint-max-bytes=9007199254740991"`, `"--metrics-bind-address=:10000"`,
			"containerPort: 10000\n", "port: 10000\n"} {
			if !strings.Contains(r.text, want) {
				t.Errorf("%s: the chart does not render %q", args[0], want)
			}
		}
		if strings.Contains(r.text, "e+") {
			t.Errorf("%s: a number renders in exponent notation", args[0])
		}
	}
	for _, set := range []string{"manager.replicas=-1", "manager.replicas=2147483648", "gc.checkpoints.keep=-1",
		"gc.checkpoints.keep=2147483648", "gc.checkpoints.maxBytes=-1", "gc.checkpoints.maxBytes=9007199254740993",
		"manager.terminationGracePeriodSeconds=-1", "manager.podDisruptionBudget.maxUnavailable=-1",
		"manager.podDisruptionBudget.maxUnavailable=50 %", "metrics.port=0", "metrics.port=65536", "manager.logLevel=128",
		"manager.logLevel=99999999999999999999"} {
		if _, err := helm(t, "template", release, chartDir(), "-f", filepath.Join(chartDir(), "ci", "default-values.yaml"), "--set", set); err == nil ||
			!strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
			t.Errorf("--set %s: %v, want a schema error", set, err)
		}
	}
}

// A misspelt key is refused at every level of the values, the error naming it: the schema closes every
// object it describes.
func TestChartSchemaRejectsATypoAtEveryLevel(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir(), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := yaml.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	var objects []string
	var walk func(path string, n map[string]any)
	walk = func(path string, n map[string]any) {
		props, _ := n["properties"].(map[string]any)
		if len(props) > 0 {
			if n["additionalProperties"] != false {
				t.Errorf("values.schema.json: %q lets any key through", path)
			}
			objects = append(objects, path)
		}
		for k, p := range props {
			if p, ok := p.(map[string]any); ok {
				walk(strings.TrimPrefix(path+"."+k, "."), p)
			}
		}
	}
	walk("", schema)
	if len(objects) < 20 {
		t.Fatalf("the schema describes %d objects", len(objects))
	}
	for _, path := range objects {
		key := strings.TrimPrefix(path+".zzTypo", ".")
		_, err := helm(t, "template", release, chartDir(), "-f", filepath.Join(chartDir(), "ci", "default-values.yaml"), "--set", key+"=1")
		if err == nil || !strings.Contains(err.Error(), "zzTypo") {
			t.Errorf("--set %s=1: %v, want a schema error naming zzTypo", key, err)
		}
	}
}

// The longest release name Helm takes (53 characters) and the longest name overrides still give every
// object a valid name: the metrics Service a DNS label, the others DNS subdomains, no two alike.
func TestChartLongestNamesStayValid(t *testing.T) {
	long := strings.Repeat("r", 53)
	for _, args := range [][]string{
		{long},
		{long, "--set", "nameOverride=" + strings.Repeat("n", 40)},
		{long, "--set", "fullnameOverride=" + strings.Repeat("f", 40)},
		{strings.Repeat("a", 40) + "-agentrewind"},
	} {
		out, err := helm(t, append([]string{"template", args[0], chartDir(), "-n", namespace,
			"-f", filepath.Join(chartDir(), "ci", "full-values.yaml"), "-f", filepath.Join(chartDir(), "ci", "default-values.yaml")}, args[1:]...)...)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, o := range decodeAll(t, out) {
			id := o.GetKind() + "/" + o.GetName()
			if seen[id] {
				t.Errorf("%q: two %s", args, id)
			}
			seen[id] = true
			check := validation.IsDNS1123Subdomain
			if o.GetKind() == "Service" {
				check = validation.IsDNS1035Label
			}
			if errs := check(o.GetName()); len(errs) > 0 {
				t.Errorf("%q: %s: %v", args, id, errs)
			}
			for k, v := range o.GetLabels() {
				if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
					t.Errorf("%q: %s label %s=%s: %v", args, id, k, v, errs)
				}
			}
		}
	}
}

// notes renders NOTES.txt (helm template leaves it out) through a copy of the chart in which a
// ConfigMap holds it.
func notes(t *testing.T, set string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agentrewind")
	if out, err := exec.Command("cp", "-r", chartDir(), dir).CombinedOutput(); err != nil {
		t.Fatalf("copying the chart: %v: %s", err, out)
	}
	if err := os.Rename(filepath.Join(dir, "templates", "NOTES.txt"), filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: {{ tpl (.Files.Get \"notes.txt\") . | quote }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "zz-notes.yaml"), []byte(cm), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := helm(t, "template", release, dir, "-n", namespace, "-f", filepath.Join(chartDir(), "ci", "default-values.yaml"),
		"--set", set, "--show-only", "templates/zz-notes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var o struct{ Data map[string]string }
	if err := yaml.Unmarshal([]byte(out), &o); err != nil {
		t.Fatal(err)
	}
	return o.Data["notes"]
}

// The release notes tell what the values make the manager need before it runs: every key of its Secret,
// the CA bundle's Secret or ConfigMap, a ServiceAccount the chart does not create, and that no replica
// runs.
func TestChartNotesFollowTheValues(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want []string
	}{
		{"store.credentialsSecret.sessionTokenKey=tok", []string{"--from-literal=tok=<session token>"}},
		{"store.caBundle.secretName=corp-ca,store.caBundle.key=b.pem", []string{"key b.pem of Secret corp-ca, in namespace\n   agentrewind-system: create it"}},
		{"store.caBundle.configMapName=corp-ca", []string{"ConfigMap corp-ca"}},
		{"store.jobCredentials.sessionTokenKey=tok,store.jobCredentials.caKey=ca.crt", []string{"secretAccessKey, tok, and the CA bundle ca.crt"}},
		{"serviceAccount.create=false,serviceAccount.name=mgr", []string{"ServiceAccount mgr (serviceAccount.create=false)"}},
		{"manager.replicas=0", []string{"manager.replicas is 0: no manager runs"}},
		{"crds.install=false,gc.dryRun=true,watchNamespaces={a,b}", []string{"did not install the CRDs", "dry-run mode", "watches (a, b)"}},
	} {
		got := notes(t, tc.set)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("--set %s: the notes do not say %q:\n%s", tc.set, w, got)
			}
		}
		if strings.Contains(got, "\n\n\n") {
			t.Errorf("--set %s: the notes have two blank lines in a row:\n%s", tc.set, got)
		}
	}
	if got := notes(t, "manager.replicas=1"); strings.Contains(got, "session token") || strings.Contains(got, "ServiceAccount") || strings.Contains(got, "private CA in") {
		t.Errorf("the default notes speak of what the values do not set:\n%s", got)
	}
}

// Whatever the values, the chart's Roles and ClusterRoles name every verb, resource and API group: no
// wildcard, and none of escalate, bind, impersonate.
func TestChartRBACHasNoWildcard(t *testing.T) {
	for _, values := range []string{"default", "full", "minimal"} {
		r := render(t, "-f", filepath.Join(chartDir(), "ci", values+"-values.yaml"), "--set", "gc.sweep.createRBAC=true,rbac.create=true")
		for _, o := range append(r.kinds("ClusterRole"), r.kinds("Role")...) {
			var role rbacv1.ClusterRole
			convert(t, o.Object, &role)
			for _, rule := range role.Rules {
				for _, s := range slices.Concat(rule.Verbs, rule.Resources, rule.APIGroups, rule.ResourceNames, rule.NonResourceURLs) {
					if strings.Contains(s, "*") || s == "escalate" || s == "bind" || s == "impersonate" {
						t.Errorf("%s values: %s %s has %q in %+v", values, o.GetKind(), o.GetName(), s, rule)
					}
				}
			}
		}
	}
}
