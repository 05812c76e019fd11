package argocd

import (
	"embed"
	"fmt"
	"path"
	"strings"
)

// The checks share their reading of conditions, which is written once: health/common.lua. Each kind's
// source, health/<Kind>.lua, is its own header and verdict with a line CommonMarker where the shared
// part goes. Compose writes the check Argo CD reads; `make generate` writes every one.

// CommonMarker is the line of a kind's source that the shared part replaces.
const CommonMarker = "-- @common"

//go:embed health/*.lua
var sources embed.FS

// Compose is the health check of kind, built from its source and the shared part.
func Compose(kind string) (string, error) {
	common, err := sources.ReadFile("health/common.lua")
	if err != nil {
		return "", err
	}
	src, err := sources.ReadFile(path.Join("health", kind+".lua"))
	if err != nil {
		return "", fmt.Errorf("no health check source for %s/%s: %w", Group, kind, err)
	}
	head, tail, ok := strings.Cut(string(src), CommonMarker+"\n")
	if !ok || strings.Contains(tail, CommonMarker) {
		return "", fmt.Errorf("health/%s.lua must hold the line %q exactly once", kind, CommonMarker)
	}
	return head + string(common) + tail, nil
}
