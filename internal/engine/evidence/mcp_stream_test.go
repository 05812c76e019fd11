package evidence_test

import (
	"encoding/json"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
	"github.com/agentrewind/agentrewind/internal/engine/evidence"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// A tool an agent called on an MCP server is in the tool stream under its own name and arguments, as
// a gateway tool is, so the recorder's rung and the coherence verdict see it; a JSON-RPC error or a
// result the server marked isError is a failed call. Other MCP requests stay as recorded. The event
// is built with the codec's own names, so a change to them breaks this test.
func TestAnMCPToolCallIsInTheToolStreamUnderItsToolsName(t *testing.T) {
	call := func(method, args, result string, err error) session.Event {
		ev := session.Event{Kind: session.KindToolCall, CallSite: mcp.Site("tracker"), Name: mcp.ToolName("tracker", method),
			Args: json.RawMessage(args), Result: json.RawMessage(result)}
		if err != nil {
			ev.Error = mcp.RecordedError(&mcp.RPCError{Code: -32000, Message: err.Error()}).(*session.SerializedError)
		}
		return ev
	}
	events := []session.Event{
		{Kind: session.KindModelCall},
		call("tools/list", `{}`, `{"tools":[]}`, nil),
		call("tools/call", `{"name":"search_issues","arguments":{"q":"crash"}}`, `{"content":[]}`, nil),
		call("tools/call", `{"name":"add_label","arguments":{"label":"bug"}}`, `{"content":[],"isError":true}`, nil),
		call("tools/call", `{"name":"close_issue","arguments":{}}`, ``, json.Unmarshal([]byte("x"), &struct{}{})),
	}
	rounds := evidence.Rounds(events)
	if len(rounds) != 1 || len(rounds[0].Calls) != 4 {
		t.Fatalf("rounds %+v, want one round of four calls", rounds)
	}
	want := []struct {
		name, args string
		failed     bool
	}{
		{"tracker/tools/list", `{}`, false},
		{"search_issues", `{"q":"crash"}`, false},
		{"add_label", `{"label":"bug"}`, true},
		{"close_issue", `{}`, true},
	}
	for i, w := range want {
		c := rounds[0].Calls[i]
		if c.Name != w.name || string(c.Args) != w.args || c.Failed != w.failed {
			t.Errorf("call %d: %s %s failed=%v, want %s %s failed=%v", i, c.Name, c.Args, c.Failed, w.name, w.args, w.failed)
		}
	}
}

// A fork's stub answer (onMiss: Stub) ran no tool, so it is a failed call to the tool stream: the
// recorder's rung never takes it for the step done, whether the tool is a gateway tool or an MCP one.
func TestAStubAnswerIsNoWitness(t *testing.T) {
	events := []session.Event{
		{Kind: session.KindModelCall},
		{Kind: session.KindToolCall, Name: "add_label", Args: json.RawMessage(`{"label":"x"}`), Result: json.RawMessage(`{"__agentrewind_unavailable":true}`),
			Provenance: session.ProvenanceStub},
		{Kind: session.KindToolCall, CallSite: mcp.Site("tracker"), Name: mcp.ToolName("tracker", "tools/call"),
			Args: json.RawMessage(`{"name":"search_issues","arguments":{}}`), Result: json.RawMessage(`{"content":[]}`), Provenance: session.ProvenanceStub},
		{Kind: session.KindToolCall, Name: "add_label", Args: json.RawMessage(`{"label":"y"}`), Result: json.RawMessage(`{}`), Provenance: session.ProvenanceLive},
	}
	calls := evidence.Rounds(events)[0].Calls
	if len(calls) != 3 || !calls[0].Failed || !calls[1].Failed || calls[2].Failed {
		t.Fatalf("calls %+v: want the two stubs failed and the live answer not", calls)
	}
}
