package proxy

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/mcpproxy/mcptest"
)

// A fork that mounts its MCP server by name alone (what the operator gives a ForkRun's proxy) has no
// server to call: its prefix is served from the recording, a tail call the recording holds too, and
// one it does not hold gets onMiss's stub, never a live answer.
func TestMCPServerMountedByNameAloneForksFromTheRecordingOnly(t *testing.T) {
	parent := recordAdds(t, [2]int{2, 3}, [2]int{10, 20})
	second := int64(-1)
	for _, ev := range parent.Events {
		if ev.Kind == session.KindToolCall && strings.Contains(string(ev.Args), `"a":10`) {
			second = ev.Step
		}
	}
	fk := start(t, Options{Mode: Fork, Session: parent, Dir: filepath.Join(t.TempDir(), "child"), ID: "child", AtStep: second,
		OnMiss: replay.OnMissStub, Goal: &replay.Goal{Tool: "weather/tools/call", ArgsMatch: json.RawMessage(`{"arguments":{"a":7}}`)},
		MCPServers: map[string]string{"weather": ""}})
	cs, _, _ := mcpClient(t, fk.url)
	got := []string{mcptest.Add(t, cs, 2, 3), mcptest.Add(t, cs, 10, 20), mcptest.Add(t, cs, 7, 8)}
	_ = cs.Close()
	out := fk.stop(t)
	if out.Err != nil || out.Fork == nil {
		t.Fatalf("fork: %v", out.Err)
	}
	if got[0] != "5" || got[1] != "30" || got[2] == "15" {
		t.Errorf("the fork answered %q, want the recorded 5 and 30, and no live 15 for the call the recording does not hold", got)
	}
	if diff := cmp.Diff(replay.ProvenanceCounts{Recorded: 3, Stub: 1}, out.Fork.Provenance); diff != "" {
		t.Errorf("fork provenance (initialize and two adds served, the new add stubbed) (-want +got):\n%s", diff)
	}
}
