// Command apidocs writes docs/api.md, the API reference, from the generated CRDs in config/crd/bases.
//
// The CRDs' OpenAPI schemas carry the API types' doc comments and validation markers, so the reference
// says exactly what `kubectl explain` and the API server say. `make manifests` runs it after
// controller-gen; `make verify-gen` fails when docs/api.md is stale.
//
//	go run ./hack/apidocs -crds config/crd/bases -out docs/api.md
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	crdDir := flag.String("crds", "config/crd/bases", "directory of the generated CRD YAML files")
	out := flag.String("out", "docs/api.md", "file to write the reference to")
	flag.Parse()
	if err := run(*crdDir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
}

func run(crdDir, out string) error {
	crds, err := loadCRDs(crdDir)
	if err != nil {
		return err
	}
	doc, err := Render(crds)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(out); err == nil && bytes.Equal(old, doc) {
		return nil // unchanged: leave the file's timestamp alone
	}
	return os.WriteFile(out, doc, 0o644)
}

// loadCRDs reads every *.yaml in dir as a CustomResourceDefinition, strictly, so a schema field this
// generator does not know of is an error rather than silently missing from the reference.
func loadCRDs(dir string) ([]apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRD files (*.yaml) in %s: run 'make manifests'", dir)
	}
	sort.Strings(files)
	crds := make([]apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: kind is %q, want CustomResourceDefinition", f, crd.Kind)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
