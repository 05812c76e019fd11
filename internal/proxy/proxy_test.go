package proxy

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// transcript is everything the weather agent was answered, as it decoded it.
type transcript struct {
	UUID, Random, Tool string
	Tokens             int64
	Turns              []string
}

// weatherAgent asks for the weather through the official SDK, calls the weather tool through the
// gateway, draws entropy, and suspends.
func weatherAgent(t *testing.T, r *running, stream bool) transcript {
	t.Helper()
	ctx := t.Context()
	c := r.client()
	var tr transcript
	_, b := get(t, r.url+"/v1/entropy/uuid")
	tr.UUID = string(b)
	first := sdk.NewUserMessage(sdk.NewTextBlock("What is the weather in Paris? My key is " + canary))
	count, err := c.Messages.CountTokens(ctx, sdk.MessageCountTokensParams{Model: "claude-test", Messages: []sdk.MessageParam{first}})
	if err != nil {
		t.Fatalf("count_tokens: %v", err)
	}
	tr.Tokens = count.InputTokens
	params := sdk.MessageNewParams{Model: "claude-test", MaxTokens: 256,
		System:   []sdk.TextBlockParam{{Text: "You are a weather bot."}},
		Messages: []sdk.MessageParam{first},
		Tools: []sdk.ToolUnionParam{sdk.ToolUnionParamOfTool(sdk.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}}}, "weather")}}
	msg := send(t, c, params, stream, &tr)
	var use *sdk.ContentBlockUnion
	for i := range msg.Content {
		if msg.Content[i].Type == "tool_use" {
			use = &msg.Content[i]
		}
	}
	if use == nil {
		t.Fatalf("no tool use in %s", msg.RawJSON())
	}
	status, res := postJSON(t, r.url+"/v1/tools/weather", use.Input)
	if status != http.StatusOK {
		t.Fatalf("tool: %d %s", status, res)
	}
	tr.Tool = string(res)
	_, b = get(t, r.url+"/v1/entropy/random")
	tr.Random = string(b)
	params.Messages = append(params.Messages, msg.ToParam(), sdk.NewUserMessage(sdk.NewToolResultBlock(use.ID, string(res), false)))
	send(t, c, params, stream, &tr)
	if status, b := postJSON(t, r.url+"/v1/ledger", map[string]any{"op": "SUSPEND", "turnIndex": 99}); status != http.StatusOK {
		t.Fatalf("ledger: %d %s", status, b)
	}
	return tr
}

// send makes one model call, streamed or not, and notes what the SDK decoded.
func send(t *testing.T, c sdk.Client, params sdk.MessageNewParams, stream bool, tr *transcript) *sdk.Message {
	t.Helper()
	if !stream {
		msg, err := c.Messages.New(t.Context(), params)
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		tr.Turns = append(tr.Turns, view(t, msg))
		return msg
	}
	s := c.Messages.NewStreaming(t.Context(), params)
	defer s.Close()
	var acc sdk.Message
	var events []string
	for s.Next() {
		ev := s.Current()
		events = append(events, view(t, ev))
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(events) < 4 {
		t.Fatalf("only %d stream events", len(events))
	}
	tr.Turns = append(tr.Turns, strings.Join(events, "\n"), view(t, &acc))
	return &acc
}

func weatherTool(t *testing.T, calls *atomic.Int64) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"sky":"sunny","celsius":21}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestRecordReplayAndForkAToolUsingRunThroughTheSDK(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			root := t.TempDir()
			up := newUpstream(t, weatherScript)
			var toolCalls atomic.Int64
			rec := start(t, Options{Mode: Record, Dir: filepath.Join(root, "run"), ID: "run",
				Upstreams: map[string]string{"anthropic": up.url}, APIKeys: map[string]string{"anthropic": canary},
				Tools: map[string]string{"weather": weatherTool(t, &toolCalls)}})
			recorded := weatherAgent(t, rec, stream)
			out := rec.stop(t)
			if out.Err != nil || out.Record == nil || out.Record.HarnessErr != nil {
				t.Fatalf("record: %+v", out)
			}
			if got := up.calls(); got != 3 {
				t.Fatalf("upstream calls = %d, want 3 (count_tokens and two turns)", got)
			}
			for _, k := range up.receivedKeys() {
				if k != canary {
					t.Fatalf("the upstream got key %q, want the proxy's", k)
				}
			}
			// The upstream echoes the proxy's key: the agent is answered its token, never the key.
			if all := strings.Join(recorded.Turns, "\n"); strings.Contains(all, canary) || !strings.Contains(all, redact.Token(canary)) {
				t.Fatalf("the agent was answered the proxy's key, or not its token: %v", recorded.Turns)
			}
			parent := openSession(t, filepath.Join(root, "run"))
			checkSuspendMinted(t, parent)

			// Replay: built with no upstream at all, and the fake's counter must not move.
			rep := start(t, Options{Mode: Replay, Session: parent})
			replayed := weatherAgent(t, rep, stream)
			out = rep.stop(t)
			if out.Err != nil {
				t.Fatalf("replay: %v", out.Err)
			}
			if diff := cmp.Diff(recorded, replayed); diff != "" {
				t.Fatalf("the SDK decoded a different replay (-recorded +replayed):\n%s", diff)
			}
			if up.calls() != 3 || toolCalls.Load() != 1 {
				t.Fatalf("replay went live: upstream %d, tool %d", up.calls(), toolCalls.Load())
			}
			res, ok := ReplayResult("run", out.Replay, out.Err)
			if !ok || !res.Passed || res.LiveCalls != 0 {
				t.Fatalf("replay result %+v", res)
			}
			// Every answer the agent got (three model calls, one tool call) came from the recording.
			if want := (task.Provenance{Recorded: 4}); res.Provenance != want {
				t.Fatalf("replay provenance %+v, want %+v", res.Provenance, want)
			}

			// Fork at the second model call with a system prompt override: the prefix is served, the
			// tail goes live and answers differently.
			second := eventsOf(parent, session.KindModelCall)[1].Step
			brief := "You are a weather bot. Be brief."
			fork := start(t, Options{Mode: Fork, Session: parent, Dir: filepath.Join(root, "child"), AtStep: second,
				Overrides: replay.Overrides{System: &brief}, Upstreams: map[string]string{"anthropic": up.url},
				APIKeys: map[string]string{"anthropic": canary}})
			forked := weatherAgent(t, fork, stream)
			out = fork.stop(t)
			if out.Err != nil || out.Fork == nil {
				t.Fatalf("fork: %+v", out)
			}
			if up.calls() != 4 {
				t.Fatalf("upstream calls after the fork = %d, want 4 (only the tail)", up.calls())
			}
			last := forked.Turns[len(forked.Turns)-1]
			if !strings.Contains(last, `"text":"Sunny."`) || strings.Contains(recorded.Turns[len(recorded.Turns)-1], "Sunny.") {
				t.Fatalf("the fork's tail did not answer differently:\nrecorded %s\nforked %s", recorded.Turns[len(recorded.Turns)-1], last)
			}
			if diff := cmp.Diff(recorded.Turns[:len(recorded.Turns)/2], forked.Turns[:len(forked.Turns)/2]); diff != "" {
				t.Fatalf("the fork's prefix differs:\n%s", diff)
			}
			child := openSession(t, filepath.Join(root, "child"))
			if child.Meta.Parent != "run" || child.Meta.ForkedAtStep == nil || *child.Meta.ForkedAtStep != second {
				t.Fatalf("child meta parent %q forkedAtStep %v, want run, %d", child.Meta.Parent, child.Meta.ForkedAtStep, second)
			}
			fr := ForkResult("run", second, out.Fork)
			// The served prefix is the one model call before the fork step: its recorded usage is replayed.
			if fr.Provenance.Live != 1 || fr.ChildSessionID != "run-fork-"+itoa(second) || fr.TokensSpent.OutputTokens != 7 ||
				fr.Replayed.OutputTokens != 7 {
				t.Fatalf("fork result %+v", fr)
			}
			assertNoCanary(t, root)
		})
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// checkSuspendMinted asserts the agent's SUSPEND became the recorder's stamp of the last turn, not
// the agent's word.
func checkSuspendMinted(t *testing.T, s *session.Session) {
	t.Helper()
	var suspend *session.Event
	for _, ev := range eventsOf(s, session.KindLedger) {
		var rec ledger.Record
		_ = json.Unmarshal(ev.Ledger, &rec)
		if rec.Op == ledger.OpSuspend {
			suspend = &ev
			if rec.TurnIndex == nil || *rec.TurnIndex != 1 || rec.TranscriptDigest == "" {
				t.Fatalf("SUSPEND stamp %s, want turn 1 with a digest", ev.Ledger)
			}
		}
	}
	if suspend == nil || suspend.Author != session.AuthorRecorder {
		t.Fatalf("no recorder-minted SUSPEND: %+v", suspend)
	}
}

func TestReplayDriftIsAnsweredWithStepCallSiteAndNearest(t *testing.T) {
	root := t.TempDir()
	up := newUpstream(t, weatherScript)
	rec := start(t, Options{Mode: Record, Dir: filepath.Join(root, "run"), ID: "run", Upstreams: map[string]string{"anthropic": up.url}})
	ask(t, rec, "hello")
	rec.stop(t)

	rep := start(t, Options{Mode: Replay, Session: openSession(t, filepath.Join(root, "run"))})
	c := rep.client()
	_, err := c.Messages.New(t.Context(), question("goodbye"))
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict {
		t.Fatalf("err = %v, want a 409 API error", err)
	}
	if string(apiErr.Type()) != driftErrorType || !strings.Contains(apiErr.Message, "drift at step 1") ||
		!strings.Contains(apiErr.Message, "differences from the nearest recorded call (step 1)") {
		t.Fatalf("drift error %s %q", apiErr.Type(), apiErr.Message)
	}
	h := apiErr.Response.Header
	if h.Get(HeaderDriftStep) != "1" || h.Get(HeaderDriftSite) != "anthropic.messages" || h.Get(HeaderNearestStep) != "1" {
		t.Fatalf("drift headers %v", h)
	}
	out := rep.stop(t)
	res, ok := ReplayResult("run", out.Replay, out.Err)
	if !ok || res.Passed || res.Divergence == nil || res.Divergence.Step != 1 || res.Divergence.CallSite != "anthropic.messages" ||
		res.Divergence.ExpectedCallSite != "anthropic.messages" || res.Divergence.ExpectedFingerprint == "" ||
		res.Divergence.Reason != string(replay.DriftNoRecordedCall) {
		t.Fatalf("replay result %+v", res)
	}
}

func question(text string) sdk.MessageNewParams {
	return sdk.MessageNewParams{Model: "claude-test", MaxTokens: 64, Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(text))}}
}

func ask(t *testing.T, r *running, text string, opts ...any) *sdk.Message {
	t.Helper()
	c := r.client()
	msg, err := c.Messages.New(t.Context(), question(text))
	if err != nil {
		t.Fatal(err)
	}
	return msg
}
