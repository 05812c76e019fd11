package v1alpha1_test

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentrewind/agentrewind/internal/testenv"
)

// TestEveryCRDFieldHasADescription walks the generated OpenAPI schema of every CRD: `kubectl explain`
// shows these descriptions, so a field without one is a field a user cannot look up.
func TestEveryCRDFieldHasADescription(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if len(files) != 5 {
		t.Fatalf("want 5 generated CRDs in config/crd/bases, found %d: run 'make manifests'", len(files))
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, v := range crd.Spec.Versions {
			fields := 0
			for name, prop := range v.Schema.OpenAPIV3Schema.Properties {
				if name == "metadata" {
					continue // the API server owns ObjectMeta's schema
				}
				fields += checkDescribed(t, crd.Name+"."+name, prop)
			}
			if fields < 10 {
				t.Errorf("%s %s: only %d fields walked; the schema walk is broken", crd.Name, v.Name, fields)
			}
		}
	}
}

func checkDescribed(t *testing.T, path string, s apiextensionsv1.JSONSchemaProps) int {
	t.Helper()
	if s.Description == "" {
		t.Errorf("%s has no description: document the Go field it comes from", path)
	}
	n := 1
	for name, prop := range s.Properties {
		n += checkDescribed(t, path+"."+name, prop)
	}
	if s.Items != nil && s.Items.Schema != nil {
		// Items of a list share the list's description unless they are objects with fields.
		for name, prop := range s.Items.Schema.Properties {
			n += checkDescribed(t, path+"[]."+name, prop)
		}
	}
	return n
}
