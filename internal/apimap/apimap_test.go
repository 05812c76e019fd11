package apimap

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

// engineConstants reads the string constants of a named type from an engine package's source, so a
// value added to the engine later is pinned here without anyone remembering to list it.
func engineConstants(t *testing.T, pkg, typeName string) []string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "internal", "engine", pkg)
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typeName {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s.%s: a constant that is not a string literal", pkg, typeName)
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, s)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("internal/engine/%s declares no constants of type %s", pkg, typeName)
	}
	slices.Sort(out)
	return out
}

func sortedStrings[K ~string](keys []K) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	slices.Sort(out)
	return out
}

// checkTable asserts a table is total over the engine's values and one-to-one, and returns the API
// values it produces.
func checkTable[K, V ~string](t *testing.T, name string, table map[K]V, engine []string) []string {
	t.Helper()
	if got := sortedStrings(slices.Collect(maps.Keys(table))); !slices.Equal(got, engine) {
		t.Errorf("%s: the table maps %v, the engine declares %v", name, got, engine)
	}
	api := sortedStrings(slices.Collect(maps.Values(table)))
	if len(slices.Compact(slices.Clone(api))) != len(api) {
		t.Errorf("%s: two engine values share an API spelling: %v", name, api)
	}
	return api
}

// TestEveryEngineValueHasExactlyTheCRDsSpelling pins each engine value to the API value a controller
// writes, and that API value to the enum the API server accepts for the field, both ways.
func TestEveryEngineValueHasExactlyTheCRDsSpelling(t *testing.T) {
	verdicts := checkTable(t, "resume verdicts", resumeVerdicts, engineConstants(t, "verdict/resume", "Verdict"))
	reach := checkTable(t, "reachability", reachabilities, engineConstants(t, "verdict/resume", "Reachability"))
	decisions := checkTable(t, "rewind decisions", rewindDecisions, engineConstants(t, "verdict/rewind", "Decision"))
	convergences := checkTable(t, "convergence verdicts", convergenceVerdicts, engineConstants(t, "verdict/convergence", "Verdict"))
	drifts := checkTable(t, "plan drift verdicts", planDriftVerdicts, engineConstants(t, "verdict/coherence", "DriftVerdict"))

	for _, k := range []session.Kind{session.KindModelCall, session.KindToolCall, session.KindEntropy} {
		if _, err := CallKind(k); err != nil {
			t.Errorf("the boundary call kind %q has no API spelling", k)
		}
	}

	policies := sortedStrings(slices.Collect(maps.Values(driftPolicies)))
	if engine := engineConstants(t, "replay", "DriftPolicy"); !slices.Equal(policies, engine) {
		t.Errorf("drift policies: the API offers %v, the engine has %v", policies, engine)
	}
	if engine := engineConstants(t, "replay", "OnMiss"); !slices.Equal(sortedStrings(slices.Collect(maps.Values(toolOnMisses))), engine) {
		t.Errorf("tool miss policies: the API offers %v, the engine has %v", toolOnMisses, engine)
	}

	enums := []struct {
		crd, path string
		want      []string
	}{
		{"resumeplans", "status.verdict", verdicts},
		{"agentsessions", "status.resumeVerdict", verdicts},
		{"resumeplans", "status.reachability.state", reach},
		{"agentsessions", "status.reachability.state", reach},
		{"resumeplans", "status.rewind.decision", decisions},
		{"resumeplans", "status.convergence.verdict", convergences},
		{"resumeplans", "status.drift.verdict", drifts},
		{"forkruns", "spec.fork.driftPolicy", sortedStrings(slices.Collect(maps.Keys(driftPolicies)))},
		{"forkruns", "spec.replay.driftPolicy", sortedStrings(slices.Collect(maps.Keys(replayDriftPolicies)))},
		{"forkruns", "spec.fork.tools.onMiss", sortedStrings(slices.Collect(maps.Keys(toolOnMisses)))},
		{"forkruns", "status.firstDivergence.kind", sortedStrings(slices.Collect(maps.Values(callKinds)))},
		{"forkruns", "status.outcome", sortedStrings([]v1alpha1.ForkOutcome{v1alpha1.OutcomeGoalReached, v1alpha1.OutcomeGoalMissed,
			v1alpha1.OutcomeCompleted, v1alpha1.OutcomePassed, v1alpha1.OutcomeDiverged, v1alpha1.OutcomeFailed})},
	}
	for _, e := range enums {
		if got := crdEnum(t, e.crd, e.path); !slices.Equal(got, e.want) {
			t.Errorf("%s %s: the CRD accepts %v, the mapping writes %v", e.crd, e.path, got, e.want)
		}
	}
}

// TestEngineReasonsAreAPIReasonCodes: a controller copies the engine's reasons into status fields and
// condition reasons verbatim, so each must be a CamelCase code the CRD pattern and metav1.Condition
// accept.
func TestEngineReasonsAreAPIReasonCodes(t *testing.T) {
	code := regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	for _, c := range []struct{ pkg, typ string }{
		{"verdict/resume", "Reason"}, {"verdict/resume", "ReachabilityReason"}, {"verdict/rewind", "Reason"},
		{"verdict/convergence", "Reason"}, {"task", "FailureReason"}, {"replay", "DriftCode"},
	} {
		for _, r := range engineConstants(t, c.pkg, c.typ) {
			if !code.MatchString(r) || len(r) > 64 {
				t.Errorf("%s.%s %q is not a CamelCase reason code of at most 64 characters", c.pkg, c.typ, r)
			}
		}
	}
	for engine, api := range map[task.FailureReason]string{
		task.ReasonStorageUnavailable:  v1alpha1.ReasonStorageUnavailable,
		task.ReasonEvidenceUnavailable: v1alpha1.ReasonEvidenceUnavailable,
		task.ReasonSessionNotFound:     v1alpha1.ReasonSessionNotFound,
		task.ReasonSessionCorrupt:      v1alpha1.ReasonSessionCorrupt,
	} {
		if string(engine) != api {
			t.Errorf("the engine fails with %q where the API's condition reason is %q", engine, api)
		}
	}
}

func TestUnknownValuesAreErrorsNotGuesses(t *testing.T) {
	if _, err := ResumeVerdict("PAUSED"); err == nil || !strings.Contains(err.Error(), `"PAUSED"`) {
		t.Fatalf("an unknown verdict gave %v, want an error naming it", err)
	}
	if _, err := DriftPolicy("Lenient"); err == nil {
		t.Fatal("an unknown drift policy was accepted")
	}
	if p, err := DriftPolicy(""); err != nil || p != "Strict" {
		t.Fatalf("an unset drift policy is %q, %v; want the CRD default Strict", p, err)
	}
	if p, err := ToolOnMiss(""); err != nil || p != "Error" {
		t.Fatalf("an unset tool miss policy is %q, %v; want the CRD default Error", p, err)
	}
}

// crdEnum is the sorted enum of a field of a generated CRD, by dot path.
func crdEnum(t *testing.T, plural, path string) []string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "agentrewind.io_"+plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatal(err)
	}
	schema := *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, name := range strings.Split(path, ".") {
		next, ok := schema.Properties[name]
		if !ok {
			t.Fatalf("%s has no field %s", plural, path)
		}
		schema = next
	}
	var out []string
	for _, v := range schema.Enum {
		var s string
		if err := json.Unmarshal(v.Raw, &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		t.Fatalf("%s.%s has no enum", plural, path)
	}
	slices.Sort(out)
	return out
}
