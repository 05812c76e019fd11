package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
