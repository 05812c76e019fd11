package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestTheDemoPointsEveryUpstreamAtTheFakeModel: every provider upstream the chart has a value for
// (values.yaml upstreams) is set to the fake model by the demo's install, so that a fork of a session
// of any API answers its live calls in the cluster; the OpenAI upstream used to be left empty, and an
// OpenAI fork's live calls would have gone to the provider's public endpoint.
func TestTheDemoPointsEveryUpstreamAtTheFakeModel(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "charts", "agentrewind", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Upstreams map[string]any `json:"upstreams"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	if len(values.Upstreams) == 0 {
		t.Fatal("the chart's values.yaml has no upstreams")
	}
	args := helmArgs(options{image: "agentrewind:demo"})
	for provider := range values.Upstreams {
		set := "upstreams." + provider + "=" + fakeModelURL
		if i := slices.Index(args, set); i < 1 || args[i-1] != "--set" {
			t.Errorf("the demo's helm install does not --set %s: %q", set, args)
		}
	}
}
