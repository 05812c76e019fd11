package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// The fixtures are recorded with the engine's recorder and forked with its fork engine, as the proxy
// and a ForkRun would, into one directory of sessions.

const (
	triageSystem = "You are a triage bot. Label the issue."
	fixedSystem  = "You are a triage bot. Always check CODEOWNERS before labelling."
	// The secret the agent sees in its issue; the recorder redacts it before anything is stored.
	leakedKey = "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	// xssPayload is what a hostile tool result and note carry: markup that would run if the page
	// ever put a recorded string in as HTML.
	xssPayload = `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>`
)

// Steps of the triage recording: 0 session_start, 1 uuid, 2 clock, 3 ledger INTENT, 4 plan,
// 5 search_issues, 6 note, 7 decide, 8 add_label, 9 session_end.
const (
	planStep   = 4
	searchStep = 5
	noteStep   = 6
	decideStep = 7
)

// triageModel answers the plan call with a search and the decide call with a label: "bug", or
// "needs-owner-review" once the system prompt asks for CODEOWNERS. It counts its calls.
type triageModel struct{ calls atomic.Int64 }

func (m *triageModel) Create(_ context.Context, req session.Request) (*session.Response, error) {
	m.calls.Add(1)
	answer := "search: crash on save"
	if len(req.Messages) > 1 {
		answer = "label: bug"
		if strings.Contains(req.System, "CODEOWNERS") {
			answer = "label: needs-owner-review"
		}
	}
	content, _ := json.Marshal([]map[string]string{{"type": "text", "text": answer}})
	return &session.Response{Content: content, StopReason: "end_turn",
		Usage: &session.Usage{InputTokens: int64(40 * len(req.Messages)), OutputTokens: 7, CostMicroUSD: int64(130 * len(req.Messages))}}, nil
}

func answerText(resp *session.Response) string {
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(resp.Content, &blocks)
	if len(blocks) == 0 {
		return ""
	}
	return blocks[0].Text
}

func userText(text string) session.Message {
	b, _ := json.Marshal(text)
	return session.Message{Role: "user", Content: b}
}

// triageAgent plans a search, searches, notes what it found, decides a label and applies it.
func triageAgent(system string) replay.Harness {
	return func(ctx context.Context, ac replay.AgentContext) error {
		id, err := ac.UUID(ctx)
		if err != nil {
			return err
		}
		if _, err := ac.Clock(ctx); err != nil {
			return err
		}
		if err := ac.Ledger(ctx, ledger.Intent("", "label the issue", "", ledger.Step{ID: "search"}, ledger.Step{ID: "label"})); err != nil {
			return err
		}
		req := session.Request{Model: "fake-1", System: system,
			Messages: []session.Message{userText("Issue " + id + ": the editor crashes when saving. Reporter pasted their key " + leakedKey)},
			Params:   map[string]json.RawMessage{"max_tokens": json.RawMessage("256")}}
		resp, err := ac.Model(ctx, req, replay.Site("plan"))
		if err != nil {
			return err
		}
		query := strings.TrimPrefix(answerText(resp), "search: ")
		results, err := ac.Tool(ctx, "search_issues", map[string]string{"q": query}, replay.Site("search"))
		if err != nil {
			return err
		}
		ac.Note(ctx, "the search result carries markup: "+xssPayload)
		toolUse, _ := json.Marshal([]map[string]any{{"type": "tool_use", "id": "t1", "name": "search_issues", "input": map[string]string{"q": query}}})
		toolResult, _ := json.Marshal([]map[string]any{{"type": "tool_result", "tool_use_id": "t1", "content": string(results)}})
		req.Messages = append(req.Messages, session.Message{Role: "assistant", Content: toolUse}, session.Message{Role: "user", Content: toolResult})
		resp, err = ac.Model(ctx, req, replay.Site("decide"))
		if err != nil {
			return err
		}
		label := strings.TrimPrefix(answerText(resp), "label: ")
		_, err = ac.Tool(ctx, "add_label", map[string]string{"issue": id, "label": label}, replay.Site("label"))
		return err
	}
}

func triageTools() map[string]replay.Tool {
	return map[string]replay.Tool{
		"search_issues": func(context.Context, json.RawMessage) (any, error) {
			return []string{"#12 crash on save (closed) " + xssPayload}, nil
		},
		"add_label": func(context.Context, json.RawMessage) (any, error) { return map[string]bool{"ok": true}, nil },
	}
}

// steadyClock is a clock that moves 173 ms each time it is read, so recorded calls have latencies.
func steadyClock() func() time.Time {
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(173 * time.Millisecond)
		return now
	}
}

// recordTriage records the triage run as session "triage" under root.
func recordTriage(t testing.TB, root string) *session.Session {
	t.Helper()
	dir := filepath.Join(root, "triage")
	_, err := replay.Record(context.Background(), replay.RecordOptions{Config: replay.Config{Now: steadyClock()}, Dir: dir, ID: "triage",
		Model: &triageModel{}, Tools: triageTools()}, triageAgent(triageSystem))
	if err != nil {
		t.Fatal(err)
	}
	return mustOpen(t, dir)
}

func mustOpen(t testing.TB, dir string) *session.Session {
	t.Helper()
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// forkTriage forks parent at the decide step with the CODEOWNERS prompt fix, as a ForkRun does, into
// session "triage-fix" under root. The label it then asks for was never recorded: a stub answers.
func forkTriage(t testing.TB, root string, parent *session.Session) *session.Session {
	t.Helper()
	fix := fixedSystem
	dir := filepath.Join(root, "triage-fix")
	_, err := replay.Fork(context.Background(), replay.ForkOptions{Config: replay.Config{Now: steadyClock()}, Parent: parent, Dir: dir, ID: "triage-fix", AtStep: decideStep,
		Model: &triageModel{}, Overrides: replay.Overrides{System: &fix}, OnMiss: replay.OnMissStub}, triageAgent(triageSystem))
	if err != nil {
		t.Fatal(err)
	}
	return mustOpen(t, dir)
}

// writeLargeSession writes a session of n events (model calls, tool calls and entropy draws in two
// lanes, each with its true fingerprint) with the session writer, as a long agent run leaves one.
func writeLargeSession(t testing.TB, dir, id string, n int) {
	t.Helper()
	meta := session.Meta{ID: id, CreatedAt: 1, RecorderVersion: "test", SchemaVersion: session.CurrentSchemaVersion, FingerprintMode: string(fingerprint.Strict)}
	w, err := session.Create(dir, meta, session.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := meta
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Append(session.Event{Step: 0, Lane: "0", Kind: session.KindSessionStart, Meta: &start}))
	codec := replay.GenericCodec{}
	opts := fingerprint.Options{Mode: fingerprint.Strict, VolatilePaths: codec.VolatilePaths()}
	seq := map[string]int64{}
	for step := int64(1); step < int64(n)-1; step++ {
		lane := []string{"0", "0.1"}[step%7/6]
		ev := session.Event{Step: step, Seq: seq[lane], Lane: lane, TS: 1_700_000_000_000 + step}
		seq[lane]++
		switch step % 3 {
		case 0:
			req := session.Request{Model: "fake-1", Messages: []session.Message{userText(fmt.Sprintf("turn %d", step))}}
			fp, err := fingerprint.Of(codec.StripVolatile(req), opts)
			must(err)
			ev.Kind, ev.CallSite, ev.Request, ev.RequestHash, ev.LatencyMs = session.KindModelCall, "loop.think", &req, fp, 40+step%90
			ev.Response = &session.Response{Content: json.RawMessage(`"ok"`)}
			ev.Usage = &session.Usage{InputTokens: 20 + step%50, OutputTokens: 5, CostMicroUSD: 60}
		case 1:
			args := json.RawMessage(fmt.Sprintf(`{"n":%d}`, step))
			fp, err := fingerprint.OfJSON(args, fingerprint.Options{})
			must(err)
			ev.Kind, ev.CallSite, ev.Name, ev.Args, ev.ArgsHash, ev.Result, ev.LatencyMs = session.KindToolCall, "loop.act", "step_tool", args, fp, json.RawMessage(`true`), 3
		default:
			ev.Kind, ev.CallSite, ev.Source, ev.Value = session.KindEntropy, "loop.clock", session.SourceRandom, json.RawMessage(`0.5`)
		}
		must(w.Append(ev))
	}
	ok := true
	must(w.Append(session.Event{Step: int64(n) - 1, Lane: "0", Kind: session.KindSessionEnd, OK: &ok}))
	_, err = w.Close(nil)
	must(err)
}
