package argocd

import (
	"os"
	"path/filepath"
	"testing"
)

// Every check Argo CD reads is its source with the shared part put in: an edit goes to health/, and
// `make generate` writes the checks again.
func TestEveryCheckIsComposedFromItsSource(t *testing.T) {
	for _, kind := range Kinds {
		want, err := Compose(kind)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(Dir(kind), "health.lua"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s/health.lua is not what health/%s.lua and health/common.lua compose: run make generate", Dir(kind), kind)
		}
	}
}
