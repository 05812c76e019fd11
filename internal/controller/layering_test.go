package controller

import (
	"os/exec"
	"strings"
	"testing"
)

// The manager builds the proxy's command line from the contract both sides share (proxyargs), never
// from the proxy itself: linking the proxy would put its HTTP server, codecs and MCP relay into the
// manager's binary and let a controller reach into them.
func TestTheControllersDoNotLinkTheProxy(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/agentrewind/agentrewind/internal/controller").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages: %s", len(deps), out)
	}
	for _, d := range deps {
		switch d {
		case "github.com/agentrewind/agentrewind/internal/proxy", "github.com/agentrewind/agentrewind/internal/mcpproxy":
			t.Errorf("internal/controller depends on %s", d)
		}
	}
}
