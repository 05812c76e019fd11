//go:build ignore

// argocd-cm writes config/argocd/argocd-cm.yaml from the health checks in
// config/argocd/resource_customizations. Run it from the repository root: go run ./hack/argocd-cm.go
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrewind/agentrewind/config/argocd"
)

func main() {
	b, err := argocd.ConfigMap()
	if err == nil {
		err = os.WriteFile(filepath.Join("config", "argocd", argocd.ConfigMapPath), b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "argocd-cm:", err)
		os.Exit(1)
	}
}
