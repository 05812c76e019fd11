package main

import (
	"strings"
	"testing"
)

// TestEngineReplayAndForkAreTheProxyInThatMode: the engine names run the proxy with its mode set, so
// a fork without --at-step is refused as a fork, and a replay refuses a fork's flags.
func TestEngineReplayAndForkAreTheProxyInThatMode(t *testing.T) {
	t.Setenv(envStore, "")
	if _, err := runCLI(t, "engine", "fork", "--session-dir", t.TempDir(), "--session-id", "a"); err == nil ||
		!strings.Contains(err.Error(), "--at-step is required in fork mode") {
		t.Fatalf("engine fork without --at-step: %v", err)
	}
	if _, err := runCLI(t, "engine", "replay", "--session-dir", t.TempDir(), "--session-id", "a", "--at-step", "2"); err == nil ||
		!strings.Contains(err.Error(), "are for fork mode") {
		t.Fatalf("engine replay with --at-step: %v", err)
	}
	out, err := runCLI(t, "engine", "replay", "--help")
	if err != nil || strings.Contains(out, "--mode string") || !strings.Contains(out, "--drift-policy") {
		t.Fatalf("engine replay --help shows the mode flag or lacks the proxy's: %v\n%s", err, out)
	}
}
