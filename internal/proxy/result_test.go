package proxy

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestForkResultSplitsUsageByModel: the result of a fork carries its live and served calls by provider
// and model, so the operator prices each with its table (a fork that changes the model goes live on
// another price than its recording was made at).
func TestForkResultSplitsUsageByModel(t *testing.T) {
	call := func(step int64, provider, model string, prov session.Provenance, in, out int64) session.Event {
		return session.Event{Step: step, Kind: session.KindModelCall, Provider: provider, Provenance: prov, Request: &session.Request{Model: model},
			Usage: &session.Usage{InputTokens: in, OutputTokens: out}}
	}
	trace := replay.Trace{
		call(1, "anthropic", "claude-sonnet-4-5", session.ProvenanceRecorded, 100, 10),
		{Step: 2, Kind: session.KindToolCall, Provenance: session.ProvenanceRecorded},
		call(3, "anthropic", "claude-opus-4-1", session.ProvenanceLive, 200, 20),
		call(4, "anthropic", "claude-opus-4-1", session.ProvenanceLive, 300, 30),
	}
	res := ForkResult("parent", 3, &replay.ForkResult{Trace: trace, TokensSpent: session.Usage{InputTokens: 500, OutputTokens: 50},
		Replayed: session.Usage{InputTokens: 100, OutputTokens: 10}})
	live := []price.Line{{Provider: "anthropic", Model: "claude-opus-4-1", Calls: 2, Usage: session.Usage{InputTokens: 500, OutputTokens: 50}}}
	served := []price.Line{{Provider: "anthropic", Model: "claude-sonnet-4-5", Calls: 1, Usage: session.Usage{InputTokens: 100, OutputTokens: 10}}}
	if d := cmp.Diff(live, res.TokensSpent.Models); d != "" {
		t.Errorf("live lines (-want +got):\n%s", d)
	}
	if d := cmp.Diff(served, res.Replayed.Models); d != "" {
		t.Errorf("served lines (-want +got):\n%s", d)
	}
	rep, ok := ReplayResult("parent", &replay.ReplayResult{Events: trace[:2]}, nil)
	if d := cmp.Diff(served, rep.Replayed.Models); !ok || d != "" {
		t.Errorf("a replay's served lines (-want +got):\n%s", d)
	}
}
