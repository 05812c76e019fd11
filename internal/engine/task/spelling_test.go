package task

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/rewind"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

// TestEngineSpellingsAreTheAPIs pins every verdict, decision, policy and outcome the engine writes into
// a result to the api/v1alpha1 constant a controller copies it into, both ways: a renamed constant on
// either side, or a value one side has and the other lacks, fails here rather than in a status write.
func TestEngineSpellingsAreTheAPIs(t *testing.T) {
	groups := []struct {
		name   string
		engine []string
		api    []string
	}{
		{"resume verdicts",
			[]string{string(resume.Resumable), string(resume.Complete), string(resume.Diverged), string(resume.Unresumable)},
			[]string{string(v1alpha1.VerdictResumable), string(v1alpha1.VerdictComplete), string(v1alpha1.VerdictDiverged), string(v1alpha1.VerdictUnresumable)}},
		{"reachability",
			[]string{string(resume.Reachable), string(resume.Collectible)},
			[]string{string(v1alpha1.Reachable), string(v1alpha1.Collectible)}},
		{"rewind decisions",
			[]string{string(rewind.Rewind), string(rewind.NoRewind), string(rewind.Unanchored)},
			[]string{string(v1alpha1.DecisionRewind), string(v1alpha1.DecisionNoRewind), string(v1alpha1.DecisionUnanchored)}},
		{"drift policies",
			[]string{string(replay.Strict), string(replay.Warn), string(replay.Passthrough)},
			[]string{string(v1alpha1.DriftStrict), string(v1alpha1.DriftWarn), string(v1alpha1.DriftPassthrough)}},
		{"tool miss policies",
			[]string{string(replay.OnMissError), string(replay.OnMissStub)},
			[]string{string(v1alpha1.ToolMissError), string(v1alpha1.ToolMissStub)}},
		{"task outcomes and fork phases",
			[]string{string(Succeeded), string(Failed)},
			[]string{string(v1alpha1.ForkSucceeded), string(v1alpha1.ForkFailed)}},
		{"failure reasons the API names",
			[]string{string(ReasonStorageUnavailable), string(ReasonEvidenceUnavailable)},
			[]string{v1alpha1.ReasonStorageUnavailable, v1alpha1.ReasonEvidenceUnavailable}},
	}
	for _, g := range groups {
		if len(g.engine) != len(g.api) {
			t.Errorf("%s: the engine has %d values, the API %d", g.name, len(g.engine), len(g.api))
			continue
		}
		for i := range g.engine {
			if g.engine[i] != g.api[i] {
				t.Errorf("%s: the engine writes %q where the API says %q", g.name, g.engine[i], g.api[i])
			}
		}
	}
}

// TestEngineValuesAreTheCRDEnums reads the generated CRDs: every value an engine type can take must be
// one the API server accepts for the field the controller copies it into, and the other way round.
func TestEngineValuesAreTheCRDEnums(t *testing.T) {
	cases := []struct {
		crd, path string
		engine    []string
	}{
		{"resumeplans", "status.verdict", []string{string(resume.Resumable), string(resume.Complete), string(resume.Diverged), string(resume.Unresumable)}},
		{"resumeplans", "status.reachability", []string{string(resume.Reachable), string(resume.Collectible)}},
		{"resumeplans", "status.rewind.decision", []string{string(rewind.Rewind), string(rewind.NoRewind), string(rewind.Unanchored)}},
		{"forkruns", "spec.driftPolicy", []string{string(replay.Strict), string(replay.Warn), string(replay.Passthrough)}},
		{"forkruns", "spec.tools.onMiss", []string{string(replay.OnMissError), string(replay.OnMissStub)}},
	}
	for _, tc := range cases {
		t.Run(tc.crd+"."+tc.path, func(t *testing.T) {
			got := crdEnum(t, tc.crd, tc.path)
			want := slices.Clone(tc.engine)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("the CRD accepts %v, the engine writes %v", got, want)
			}
		})
	}
}

// crdEnum is the enum of a field of a generated CRD, by dot path.
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
	return out
}
