package v1alpha1_test

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// PROJECT, which kubebuilder's plugins read, lists every kind this package registers, and no other.
func TestPROJECTListsEveryKind(t *testing.T) {
	data, err := os.ReadFile("../../PROJECT")
	if err != nil {
		t.Fatal(err)
	}
	var project struct {
		Resources []struct{ Kind, Version, Group string }
	}
	if err := yaml.Unmarshal(data, &project); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range project.Resources {
		listed = append(listed, r.Kind)
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for gvk, typ := range scheme.AllKnownTypes() {
		// The package's own kinds, not the option and event types every group version gets.
		if gvk.GroupVersion() == v1alpha1.GroupVersion && !strings.HasSuffix(gvk.Kind, "List") && typ.PkgPath() == reflect.TypeFor[v1alpha1.AgentSession]().PkgPath() {
			kinds = append(kinds, gvk.Kind)
		}
	}
	slices.Sort(listed)
	slices.Sort(kinds)
	if !slices.Equal(listed, kinds) {
		t.Errorf("PROJECT lists %v, the package registers %v", listed, kinds)
	}
}
