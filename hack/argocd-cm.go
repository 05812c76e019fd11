//go:build ignore

// argocd-cm writes the health checks in config/argocd/resource_customizations from their sources in
// config/argocd/health, then config/argocd/argocd-cm.yaml from the checks. Run it from the repository
// root: go run ./hack/argocd-cm.go
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrewind/agentrewind/config/argocd"
)

func main() {
	for _, kind := range argocd.Kinds {
		script, err := argocd.Compose(kind)
		if err == nil {
			err = os.WriteFile(filepath.Join("config", "argocd", argocd.Dir(kind), "health.lua"), []byte(script), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "argocd-cm:", err)
			os.Exit(1)
		}
	}
	b, err := argocd.ConfigMap()
	if err == nil {
		err = os.WriteFile(filepath.Join("config", "argocd", argocd.ConfigMapPath), b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "argocd-cm:", err)
		os.Exit(1)
	}
}
