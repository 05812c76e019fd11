package evidence

import (
	"encoding/json"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/coherence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/rewind"
)

// A turn is one model call. Turn i is the i-th model_call event of the session in log order (0-based,
// all lanes); the recorder numbers the turn it stamps at SUSPEND the same way.

// TurnDigest is the digest of a turn: rewind.DigestTurn over the canonical JSON (package fingerprint)
// of the conversation the model saw at that turn — its system prompt and messages. The recorder
// mints a checkpoint with this function and the boundary recomputes it, so an edit anywhere in the
// history under a checkpoint changes the digest; numbers count exactly (a tool_use id edited from
// 1234567890123456789 to …788 is an edit). "" when the request is missing or cannot be canonicalised
// (invalid UTF-8, an unpaired surrogate, a duplicate key): a turn that cannot be hashed is no anchor.
func TurnDigest(req *session.Request) string {
	if req == nil {
		return ""
	}
	// Built from maps and slices, not a struct: fingerprint would marshal a struct through
	// encoding/json, which replaces invalid UTF-8 in the strings with U+FFFD instead of failing. The
	// canonical text is the same either way.
	var messages []any
	if req.Messages != nil {
		messages = make([]any, len(req.Messages))
		for i, m := range req.Messages {
			messages[i] = map[string]any{"role": m.Role, "content": m.Content}
		}
	}
	doc, err := fingerprint.Canonicalize(map[string]any{"system": req.System, "messages": messages})
	if err != nil {
		return ""
	}
	return rewind.DigestTurn(doc)
}

// Turns lists the session's turns with their live digests. Turn i is the i-th model call; the stamp
// the recorder mints for it digests the transcript that call sent (its system prompt and its m
// messages). The live digest is computed from the latest transcript the agent sent on the same lane
// that still holds the turn — at least m messages — over its system prompt and first m messages, not
// from the request the stamp was taken from: an edit after the stamp to anything under the turn (a
// rewritten tool result, a changed system prompt, a renumbered tool_use id) stops the turn digesting
// to its stamp, and the rewind verdict says UNANCHORED.
func Turns(events []session.Event) []rewind.Turn {
	var calls []session.Event
	for _, ev := range events {
		if ev.Kind == session.KindModelCall {
			calls = append(calls, ev)
		}
	}
	turns := make([]rewind.Turn, len(calls))
	for i := range calls {
		turns[i] = rewind.Turn{Index: i, Digest: liveDigest(calls, i)}
	}
	return turns
}

// liveDigest is the digest of turn i in the latest transcript on its lane that holds it.
func liveDigest(calls []session.Event, i int) string {
	turn := calls[i].Request
	if turn == nil {
		return ""
	}
	held := len(turn.Messages)
	for j := len(calls) - 1; j >= i; j-- {
		later := calls[j].Request
		if calls[j].Lane != calls[i].Lane || later == nil || len(later.Messages) < held {
			continue
		}
		return TurnDigest(&session.Request{System: later.System, Messages: later.Messages[:held]})
	}
	return "" // unreachable: call i itself holds its own turn
}

// Rounds groups the recorded tool stream into rounds for plan coherence: a model call opens a round
// and the tool calls and step marks (STEP_CLAIMED and STEP_VERIFIED records: the run maintaining its
// plan) that follow belong to it. Anything before
// the first model call forms a round of its own. Only recorded tool calls are read — the tool's
// result and error were recorded at the boundary, not reported by the agent.
func Rounds(events []session.Event) []coherence.Round {
	rounds := []coherence.Round{}
	current := func() *coherence.Round {
		if len(rounds) == 0 {
			rounds = append(rounds, coherence.Round{Label: 1})
		}
		return &rounds[len(rounds)-1]
	}
	for _, ev := range events {
		switch ev.Kind {
		case session.KindModelCall:
			rounds = append(rounds, coherence.Round{Label: len(rounds) + 1})
		case session.KindToolCall:
			r := current()
			// A stub (a fork's answer for a tool the recording does not hold) ran nothing: it is no
			// success the tool stream could witness.
			call := coherence.Call{Name: ev.Name, Args: ev.Args, Result: ev.Result, Failed: ev.Error != nil || ev.Provenance == session.ProvenanceStub, Step: ev.Step}
			if name, args, failed, ok := mcpTool(ev); ok {
				call.Name, call.Args, call.Failed = name, args, failed || call.Failed
			}
			r.Calls = append(r.Calls, call)
		case session.KindLedger:
			if rec, d := ledger.Decode(ev.Ledger); (d == ledger.DamageNone || d == ledger.DamageUntagged) && marks(rec.Op) {
				r := current()
				r.Marks = append(r.Marks, strings.TrimSpace(rec.Step))
			}
		}
	}
	return rounds
}

// EnvError is the latest environment error in the recorded tool stream, as an excerpt carrying the
// author the recorder recorded for the event: a tool call's error, else the stderr or output of the
// latest run that exited non-zero. Only tool results and errors are read — never the arguments the
// agent wrote. The zero EnvExcerpt when there is none.
func EnvError(events []session.Event) rewind.EnvExcerpt {
	for i := len(events) - 1; i >= 0; i-- {
		ev := events[i]
		if ev.Kind != session.KindToolCall {
			continue
		}
		if ev.Error != nil {
			return rewind.NewEnvExcerpt(ev.Error.Error(), ev.Author)
		}
		if text := failedRunOutput(ev.Result); text != "" {
			return rewind.NewEnvExcerpt(text, ev.Author)
		}
	}
	return rewind.EnvExcerpt{}
}

// failedRunOutput is the stderr (else output) of a result whose exit code is non-zero.
func failedRunOutput(result json.RawMessage) string {
	var r struct {
		ExitCode *float64 `json:"exitCode"`
		Stderr   string   `json:"stderr"`
		Output   string   `json:"output"`
	}
	if json.Unmarshal(result, &r) != nil || r.ExitCode == nil || *r.ExitCode == 0 {
		return ""
	}
	if r.Stderr != "" {
		return r.Stderr
	}
	return r.Output
}

func marks(op ledger.Op) bool { return op == ledger.OpStepClaimed || op == ledger.OpStepVerified }

// mcpTool reads a recorded event as a call of an MCP server's tool (call site "mcp.<server>", name
// "<server>/tools/call", the codec's naming): the tool's name and arguments, and whether it failed (a
// JSON-RPC error, or a result the server marked isError). ok is false for any other event. So the
// tool stream counts an MCP tool as it counts a gateway tool.
func mcpTool(ev session.Event) (name string, args json.RawMessage, failed, ok bool) {
	server, found := strings.CutPrefix(ev.CallSite, "mcp.")
	if ev.Kind != session.KindToolCall || !found || ev.Name != server+"/tools/call" {
		return "", nil, false, false
	}
	var params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(ev.Args, &params) != nil || params.Name == "" {
		return "", nil, false, false
	}
	var result struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(ev.Result, &result)
	return params.Name, params.Arguments, ev.Error != nil || result.IsError, true
}
