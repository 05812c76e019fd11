// Command golangci-kal is golangci-lint with the Kube API Linter (sigs.k8s.io/kube-api-linter) compiled
// in as the "kubeapilinter" module plugin; `make lint-api` runs it over ./api/... with kal.golangci.yml.
//
// It exists because `golangci-lint custom`, the upstream way to build a binary with module plugins,
// git-clones golangci-lint from GitHub and so cannot run offline. This module builds the same binary from
// the Go module proxy alone: main is golangci-lint's own cmd/golangci-lint main (which cannot be imported,
// so it is reproduced here), plus the blank import that `custom` would write into plugins.go. Both
// versions are pinned in go.mod; the Makefile names the binary after them. It is a separate module so
// golangci-lint's dependencies stay out of the product module.
package main

import (
	"cmp"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/golangci/golangci-lint/v2/pkg/commands"
	"github.com/golangci/golangci-lint/v2/pkg/exitcodes"

	// The module plugin: its init registers "kubeapilinter" with golangci/plugin-module-register
	// (pkg/plugin/base) and imports the default KAL analyzers (pkg/registration).
	_ "sigs.k8s.io/kube-api-linter"
)

const (
	golangciPath = "github.com/golangci/golangci-lint/v2"
	kalPath      = "sigs.k8s.io/kube-api-linter"
)

func main() {
	if err := commands.Execute(buildInfo()); err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "The command is terminated due to an error: %v\n", err)
		os.Exit(exitcodes.Failure)
	}
}

// buildInfo reports golangci-lint's and kube-api-linter's module versions as `--version` shows them. The
// upstream main reads its own (main) module version; here golangci-lint is a dependency, so read that.
func buildInfo() commands.BuildInfo {
	info := commands.BuildInfo{Version: "unknown", Commit: "?", GoVersion: "unknown", Date: "(unknown)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.GoVersion = bi.GoVersion
	golangci, kal := "unknown", "unknown"
	for _, dep := range bi.Deps {
		switch dep.Path {
		case golangciPath:
			golangci = strings.TrimPrefix(dep.Version, "v")
			info.Commit = fmt.Sprintf("(mod sum: %q)", cmp.Or(dep.Sum, "?"))
		case kalPath:
			kal = dep.Version
		}
	}
	info.Version = fmt.Sprintf("%s, with kube-api-linter %s", golangci, kal)
	return info
}
