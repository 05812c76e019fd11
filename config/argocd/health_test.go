package argocd

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestTheChecksOnControllerOutput runs every kind's check over the objects the controllers produced,
// kept in testdata, as Argo CD's repository tests its own checks. Every kind has a fixture for each
// health it can report, so a mapping removed or changed fails here.
func TestTheChecksOnControllerOutput(t *testing.T) {
	want := map[string][]string{
		"AgentSession": {"Degraded", "Healthy", "Progressing"},
		"Checkpoint":   {"Degraded", "Healthy", "Progressing"},
		"ForkRun":      {"Degraded", "Healthy", "Progressing"},
		"ResumePlan":   {"Degraded", "Healthy", "Progressing", "Suspended"},
	}
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) {
			script, err := Script(kind)
			if err != nil {
				t.Fatal(err)
			}
			var tests HealthTests
			readYAML(t, filepath.Join(Dir(kind), "health_test.yaml"), &tests)
			var seen []string
			for _, tc := range tests.Tests {
				var obj map[string]any
				readYAML(t, filepath.Join(Dir(kind), tc.InputPath), &obj)
				if obj["kind"] != kind || obj["apiVersion"] != Group+"/v1alpha1" {
					t.Errorf("%s: a %v %v, not a %s", tc.InputPath, obj["apiVersion"], obj["kind"], kind)
				}
				got, err := Evaluate(script, obj)
				if err != nil {
					t.Errorf("%s: %v", tc.InputPath, err)
					continue
				}
				if d := cmp.Diff(tc.HealthStatus, got); d != "" {
					t.Errorf("%s (-want +got):\n%s", tc.InputPath, d)
				}
				seen = append(seen, tc.HealthStatus.Status)
			}
			slices.Sort(seen)
			if d := cmp.Diff(want[kind], slices.Compact(seen)); d != "" {
				t.Errorf("health reported by the fixtures (-want +got):\n%s", d)
			}
		})
	}
}

// TestTheChecksOnStatesTheControllersDoNotWrite covers the branches no controller output reaches: a
// status Argo CD may see from an older operator or a hand edit. They are the fallbacks the checks
// share, so every kind runs them.
func TestTheChecksOnStatesTheControllersDoNotWrite(t *testing.T) {
	cond := func(typ, status, reason, message string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "observedGeneration": int64(3)}
	}
	cases := []struct {
		name   string
		status map[string]any
		want   Health
	}{
		{"Ready False without Reconciling or Stalled is in progress", map[string]any{"observedGeneration": int64(3),
			"conditions": []any{cond("Ready", "False", "Progressing", "waiting")}}, Health{"Progressing", "Progressing: waiting"}},
		{"conditions of other types only", map[string]any{"conditions": []any{cond("Verified", "True", "Verified", "Verified")}},
			Health{"Progressing", "Waiting for the operator to report status"}},
		{"no observedGeneration: the Ready condition's generation is read", map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Verified", "message": "m", "observedGeneration": int64(2)}}},
			Health{"Progressing", "Generation 3 is not observed yet (status is of generation 2)"}},
		{"a message equal to the reason is said once", map[string]any{"observedGeneration": int64(3),
			"conditions": []any{cond("Stalled", "True", "InvalidSpec", "InvalidSpec")}}, Health{"Degraded", "InvalidSpec"}},
	}
	for _, kind := range Kinds {
		script, err := Script(kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				obj := map[string]any{"apiVersion": Group + "/v1alpha1", "kind": kind,
					"metadata": map[string]any{"name": "x", "generation": int64(3)}, "status": tc.status}
				got, err := Evaluate(script, obj)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("(-want +got):\n%s", d)
				}
			})
		}
	}
}

// TestTheChecksUseOnlyWhatArgoCDLoads: Argo CD runs a check from argocd-cm without Lua's string and
// math libraries; a script that called one would fail there while passing under a full interpreter.
func TestTheChecksUseOnlyWhatArgoCDLoads(t *testing.T) {
	if _, err := Evaluate(`return {status = string.upper("healthy")}`, map[string]any{}); err == nil {
		t.Fatal("the runner loads the string library, which Argo CD does not")
	}
	if _, err := Evaluate(`return {status = "Fine"}`, map[string]any{}); err == nil {
		t.Fatal("a status Argo CD does not know was accepted")
	}
}

// TestTheConfigMapIsCurrent regenerates argocd-cm.yaml in memory and compares it with the file, and
// reads the file back: each key holds its script byte for byte.
func TestTheConfigMapIsCurrent(t *testing.T) {
	want, err := ConfigMap()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(ConfigMapPath)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Fatalf("%s is stale; run go run ./hack/argocd-cm.go (-generated +file):\n%s", ConfigMapPath, d)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(got, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Name != "argocd-cm" || len(cm.Data) != len(Kinds) {
		t.Errorf("ConfigMap %s with %d keys", cm.Name, len(cm.Data))
	}
	for _, kind := range Kinds {
		s, _ := Script(kind)
		if d := cmp.Diff(s, cm.Data[ConfigMapKey(kind)]); d != "" {
			t.Errorf("%s in the ConfigMap (-script +ConfigMap):\n%s", ConfigMapKey(kind), d)
		}
	}
}

func readYAML(t *testing.T, name string, into any) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}
