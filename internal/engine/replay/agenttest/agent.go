// Package agenttest is a synthetic coding agent for storage tests and benchmarks: a run of turns
// whose model requests carry the whole conversation so far (a system prompt and a tool list too), with
// a tool call between model calls, as a real agent's do. Its answers and results are deterministic
// and differ from turn to turn, so nothing is shared that a real run would not share.
package agenttest

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Agent describes a run.
type Agent struct {
	Turns int
	// AnswerBytes is the size of each answer's text (about 4 bytes a token); ResultBytes of each
	// tool result.
	AnswerBytes, ResultBytes int
	// Variant changes the model's answers: a fork's live tail answers differently from its parent.
	Variant string
}

var (
	system = "You are a coding agent working in a Go repository. " + strings.Repeat("Keep every change small, run the tests after each edit, and explain what you changed. ", 20)
	tools  = json.RawMessage(`[{"name":"read_file","description":"Reads a file of the workspace and returns its text.","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},` +
		`{"name":"run_tests","description":"Runs go test on a package and returns its output.","input_schema":{"type":"object","properties":{"pkg":{"type":"string"}}}}]`)
	words = strings.Fields("the test store session fork replay blob segment event message request response stream chunk " +
		"reader writer index digest prefix tail model tool result agent turn step lane call site fingerprint")
)

// text is n bytes of word salad seeded by seed.
func text(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// Harness runs the agent: a user's task, then Turns times a model call and a tool call whose result
// goes back to the model.
func (a Agent) Harness() replay.Harness {
	return func(ctx context.Context, ac replay.AgentContext) error {
		msgs := []session.Message{{Role: "user", Content: json.RawMessage(`"Fix the failing test in internal/store and keep the change small."`)}}
		for turn := range a.Turns {
			req := session.Request{Model: "claude-sonnet-4-5", System: system, Messages: append([]session.Message(nil), msgs...),
				Params: map[string]json.RawMessage{"max_tokens": json.RawMessage(`4096`), "tools": tools}}
			resp, err := ac.Model(ctx, req, replay.Site("plan"))
			if err != nil {
				return err
			}
			result, err := ac.Tool(ctx, "read_file", map[string]string{"path": fmt.Sprintf("internal/store/file%d.go", turn)}, replay.Site("read"))
			if err != nil {
				return err
			}
			block, _ := json.Marshal([]map[string]any{{"type": "tool_result", "tool_use_id": fmt.Sprintf("toolu_%d", turn), "content": json.RawMessage(result)}})
			msgs = append(msgs, session.Message{Role: "assistant", Content: resp.Content}, session.Message{Role: "user", Content: block})
		}
		return nil
	}
}

// Model answers each request with AnswerBytes of text that depend on the turn and the variant.
func (a Agent) Model() replay.Model { return model(a) }

type model Agent

func (m model) Create(_ context.Context, req session.Request) (*session.Response, error) {
	turn := uint64(len(req.Messages) / 2)
	seed := turn*1000003 + uint64(len(m.Variant))*7919
	for _, c := range m.Variant {
		seed = seed*31 + uint64(c)
	}
	content, err := json.Marshal([]map[string]string{{"type": "text", "text": fmt.Sprintf("%sturn %d: %s", m.Variant, turn, text(seed, m.AnswerBytes))}})
	if err != nil {
		return nil, err
	}
	return &session.Response{Content: content, StopReason: "tool_use", Usage: &session.Usage{InputTokens: int64(len(req.Messages) * 50), OutputTokens: int64(m.AnswerBytes / 4)}}, nil
}

// Tools is the agent's one tool, returning ResultBytes of file text that depend on the path.
func (a Agent) Tools() map[string]replay.Tool {
	return map[string]replay.Tool{"read_file": func(_ context.Context, args json.RawMessage) (any, error) {
		var in struct{ Path string }
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		var seed uint64
		for _, c := range in.Path {
			seed = seed*31 + uint64(c)
		}
		return map[string]string{"path": in.Path, "text": text(seed, a.ResultBytes)}, nil
	}}
}

// TranscriptBytes is the size of a run's final transcript: the last model call's request (system
// prompt, tools, every message) and its answer, as JSON.
func TranscriptBytes(events []session.Event) (int64, error) {
	for i := len(events) - 1; i >= 0; i-- {
		if ev := events[i]; ev.Kind == session.KindModelCall && ev.Request != nil && ev.Response != nil {
			req, err := json.Marshal(ev.Request)
			if err != nil {
				return 0, err
			}
			return int64(len(req) + len(ev.Response.Content)), nil
		}
	}
	return 0, fmt.Errorf("the run has no model call with a response")
}

// FormerBytes is what the schema 2 writer stored for events: each event whole on its line, and each
// field whose encoding passes session.BlobThreshold as a blob, stored once. A request's size is summed
// from its messages' (each encoded once), which is what encoding it whole gives, without the cost.
func FormerBytes(events []session.Event) (int64, error) {
	var n int64
	blobs := map[string]bool{}
	sizes := map[*byte]int{} // a message's encoded size, by its content's first byte
	requestSize := func(req *session.Request) (int, error) {
		bare := *req
		bare.Messages = []session.Message{}
		data, err := json.Marshal(bare)
		if err != nil {
			return 0, err
		}
		size := len(data)
		for i, m := range req.Messages {
			var k int
			ok := false
			if len(m.Content) > 0 {
				k, ok = sizes[&m.Content[0]]
			}
			if !ok {
				enc, err := json.Marshal(m)
				if err != nil {
					return 0, err
				}
				k = len(enc)
				if len(m.Content) > 0 {
					sizes[&m.Content[0]] = k
				}
			}
			size += k
			if i > 0 {
				size++ // the comma
			}
		}
		return size, nil
	}
	for _, ev := range events {
		ev.SchemaVersion = 2
		if ev.Author == "" {
			ev.Author = session.DefaultAuthor(ev.Kind)
		}
		if ev.Request != nil {
			size, err := requestSize(ev.Request)
			if err != nil {
				return 0, err
			}
			n += int64(size) // above the threshold a blob, otherwise inline: the same bytes
			if size > session.BlobThreshold {
				n += int64(len(`,"blobs":{"request":""}`) + 64)
			} else {
				n += int64(len(`,"request":`))
			}
			ev.Request = nil
		}
		fields := []struct {
			v     any
			clear func()
		}{
			{ev.Response, func() { ev.Response = nil }},
			{ev.Args, func() { ev.Args = nil }},
			{ev.Result, func() { ev.Result = nil }},
			{ev.Stream, func() { ev.Stream = nil }},
		}
		for _, f := range fields {
			data, err := json.Marshal(f.v)
			if err != nil {
				return 0, err
			}
			if len(data) <= session.BlobThreshold {
				continue
			}
			if !blobs[string(data)] {
				blobs[string(data)] = true
				n += int64(len(data))
			}
			f.clear()
			if ev.Blobs == nil {
				ev.Blobs = map[string]string{}
			}
			ev.Blobs[fmt.Sprint(len(ev.Blobs))] = strings.Repeat("0", 64)
		}
		line, err := json.Marshal(ev)
		if err != nil {
			return 0, err
		}
		n += int64(len(line)) + 1
	}
	return n, nil
}

// Events are the logical events a recorder writes for the run, built without running it: the same
// requests, answers and results, without the cost of a recorder fingerprinting and redacting every
// request whole (which grows with the square of the run). Storage tests use them at sizes a recorded
// run would take minutes to reach.
func (a Agent) Events() ([]session.Event, error) { return a.ForkEvents(0, a) }

// ForkEvents are the events of a fork of the run at step at (0 for the run itself) whose live tail
// is the agent live: the steps before at are served (provenance "recorded", the recorded answers),
// the rest are live.
func (a Agent) ForkEvents(at int64, live Agent) ([]session.Event, error) {
	ctx := context.Background()
	served, tail, read := a.Model(), live.Model(), a.Tools()["read_file"]
	prov := func(step int64) session.Provenance {
		switch {
		case at == 0:
			return ""
		case step < at:
			return session.ProvenanceRecorded
		}
		return session.ProvenanceLive
	}
	events := []session.Event{{Step: 0, Lane: "0", CallSite: "session", Kind: session.KindSessionStart, Author: session.AuthorRecorder}}
	step, ts := int64(1), int64(1700000000000)
	if at > 0 {
		ts = 1800000000000 // a fork runs later than its parent
	}
	msgs := []session.Message{{Role: "user", Content: json.RawMessage(`"Fix the failing test in internal/store and keep the change small."`)}}
	for turn := range a.Turns {
		req := session.Request{Model: "claude-sonnet-4-5", System: system, Messages: append([]session.Message(nil), msgs...),
			Params: map[string]json.RawMessage{"max_tokens": json.RawMessage(`4096`), "tools": tools}}
		m := served
		if at > 0 && step >= at {
			m = tail
		}
		resp, err := m.Create(ctx, req)
		if err != nil {
			return nil, err
		}
		events = append(events, session.Event{Seq: step, Step: step, TS: ts + step, Lane: "0", CallSite: "plan", Kind: session.KindModelCall,
			Provider: "anthropic", Request: &req, RequestHash: fmt.Sprintf("%064x", step), Response: resp, Usage: resp.Usage, LatencyMs: 900, Provenance: prov(step)})
		step++
		args, _ := json.Marshal(map[string]string{"path": fmt.Sprintf("internal/store/file%d.go", turn)})
		out, err := read(ctx, args)
		if err != nil {
			return nil, err
		}
		result, _ := json.Marshal(out)
		events = append(events, session.Event{Seq: step, Step: step, TS: ts + step, Lane: "0", CallSite: "read", Kind: session.KindToolCall,
			Name: "read_file", Args: args, ArgsHash: fmt.Sprintf("%064x", 1<<40+step), Result: result, LatencyMs: 3, Provenance: prov(step)})
		step++
		block, _ := json.Marshal([]map[string]any{{"type": "tool_result", "tool_use_id": fmt.Sprintf("toolu_%d", turn), "content": json.RawMessage(result)}})
		msgs = append(msgs, session.Message{Role: "assistant", Content: resp.Content}, session.Message{Role: "user", Content: block})
	}
	ok := true
	return append(events, session.Event{Seq: step, Step: step, Lane: "0", CallSite: "session", Kind: session.KindSessionEnd, Author: session.AuthorRecorder, OK: &ok}), nil
}

// DirBytes is the size of every file under dir: what a session directory stores.
func DirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	return n, err
}
