package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	oaiopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// forecastScript is a tool loop on the Responses API: the first call asks for the weather tool, the
// second reports, briefly when the instructions say so.
var forecastScript = mustParse(`
chunkSize: 4
turns:
  - {name: check, when: {step: 1}, text: "Let me check.", toolCalls: [{name: weather, input: {city: Paris}}], usage: {outputTokens: 7}}
  - {name: brief, when: {step: 2, system: brief}, text: "Sunny.", usage: {outputTokens: 2}}
  - {name: report, when: {step: 2}, text: "It is sunny in Paris, 21 degrees.", usage: {outputTokens: 9}}
`)

const forecastInstructions = "You are a weather bot."

// forecast is what the agent saw: every response or stream event the SDK decoded, and its answers.
type forecast struct {
	Decoded []string
	Answers []string
}

// responsesAgent asks for the weather through openai-go's Responses API, calls the tool the model
// asks for through the proxy's gateway, continues the conversation with previous_response_id, and
// reports the answer through the report tool (the fork's goal).
func responsesAgent(t *testing.T, r *running, stream bool) forecast {
	t.Helper()
	c := oai.NewClient(oaiopt.WithBaseURL(r.url+"/v1"), oaiopt.WithAPIKey("placeholder-key"), oaiopt.WithMaxRetries(0))
	var f forecast
	call := func(params responses.ResponseNewParams) *responses.Response {
		t.Helper()
		if !stream {
			resp, err := c.Responses.New(t.Context(), params)
			if err != nil {
				t.Fatal(err)
			}
			f.Decoded = append(f.Decoded, view(t, resp))
			return resp
		}
		s := c.Responses.NewStreaming(t.Context(), params)
		var final *responses.Response
		for s.Next() {
			ev := s.Current()
			f.Decoded = append(f.Decoded, view(t, ev))
			if ev.Type == "response.completed" {
				final = &ev.Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if final == nil {
			t.Fatal("the stream had no response.completed")
		}
		return final
	}
	tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("weather",
		map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, false)}
	first := call(responses.ResponseNewParams{Model: "gpt-test", Instructions: oai.String(forecastInstructions), Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Weather in Paris?")}})
	f.Answers = append(f.Answers, first.OutputText())
	var fc *responses.ResponseFunctionToolCall
	for _, item := range first.Output {
		if item.Type == "function_call" {
			v := item.AsFunctionCall()
			fc = &v
		}
	}
	if fc == nil || fc.Name != "weather" {
		t.Fatalf("the first response calls no weather tool: %s", first.RawJSON())
	}
	status, result := postJSON(t, r.url+"/v1/tools/weather", json.RawMessage(fc.Arguments))
	if status != http.StatusOK {
		t.Fatalf("weather tool: %d %s", status, result)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput(string(result))
	out.OfFunctionCallOutput.CallID = oai.String(fc.CallID)
	second := call(responses.ResponseNewParams{Model: "gpt-test", Instructions: oai.String(forecastInstructions), Tools: tools,
		PreviousResponseID: oai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}})
	f.Answers = append(f.Answers, second.OutputText())
	if status, body := postJSON(t, r.url+"/v1/tools/report", map[string]string{"text": second.OutputText()}); status != http.StatusOK {
		t.Fatalf("report tool: %d %s", status, body)
	}
	return f
}

// forbiddenUpstream fails the test on any request: the upstream a replay must never call.
func forbiddenUpstream(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the replay called upstream: %s %s", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestOpenAIResponsesRecordReplayAndForkAToolLoopThroughTheSDK records a two-turn tool loop whose
// second turn continues the first through previous_response_id, replays it with zero upstream calls,
// and forks it at the second model call with an instructions override against a fresh upstream
// that never saw the recorded response ids: the proxy sends the recorded conversation as input
// items instead, and the fork reaches its goal.
func TestOpenAIResponsesRecordReplayAndForkAToolLoopThroughTheSDK(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			root := t.TempDir()
			up := newUpstream(t, forecastScript)
			var toolCalls atomic.Int64
			tool := weatherTool(t, &toolCalls)
			rec := start(t, Options{Mode: Record, Provider: "openai-responses", Dir: filepath.Join(root, "run"), ID: "run",
				Upstreams: map[string]string{"openai-responses": up.url}, APIKeys: map[string]string{"openai-responses": canary},
				Tools: map[string]string{"weather": tool, "report": tool}})
			recorded := responsesAgent(t, rec, stream)
			if out := rec.stop(t); out.Err != nil || out.Record == nil || out.Record.HarnessErr != nil {
				t.Fatalf("record: %+v", out)
			}
			if diff := cmp.Diff([]string{"Let me check.", "It is sunny in Paris, 21 degrees."}, recorded.Answers); diff != "" {
				t.Fatalf("recorded answers (-want +got):\n%s", diff)
			}
			if up.RequestsTo(fakellm.OpenAIResponses) != 2 || toolCalls.Load() != 2 {
				t.Fatalf("upstream calls %d, tool calls %d, want 2 and 2", up.calls(), toolCalls.Load())
			}
			for _, k := range up.receivedKeys() {
				if k != canary {
					t.Fatalf("the upstream got key %q, want the proxy's", k)
				}
			}
			parent := openSession(t, filepath.Join(root, "run"))
			calls := eventsOf(parent, session.KindModelCall)
			if parent.Meta.Provider != "openai-responses" || len(calls) != 2 || calls[1].CallSite != "openai.responses" ||
				string(calls[1].Request.Params["previous_response_id"]) == "" || (len(calls[1].Stream) > 0) != stream {
				t.Fatalf("session provider %q, calls %+v", parent.Meta.Provider, calls)
			}

			// The fingerprints the recorder stored are the ones the Responses codec recomputes.
			if err := replay.CheckFingerprints(parent, func(string) replay.Codec { return OpenAIResponses.Codec }); err != nil {
				t.Fatal(err)
			}

			rep := start(t, Options{Mode: Replay, Session: parent, Upstreams: map[string]string{"openai-responses": forbiddenUpstream(t)}})
			replayed := responsesAgent(t, rep, stream)
			out := rep.stop(t)
			if out.Err != nil {
				t.Fatalf("replay: %v", out.Err)
			}
			if diff := cmp.Diff(recorded, replayed); diff != "" {
				t.Fatalf("the SDK decoded a different replay (-recorded +replayed):\n%s", diff)
			}
			if up.calls() != 2 || toolCalls.Load() != 2 {
				t.Fatalf("the replay went live: upstream %d, tools %d", up.calls(), toolCalls.Load())
			}

			fresh := newUpstream(t, forecastScript) // a live provider that never minted the recorded ids
			brief := forecastInstructions + " Be brief."
			at := calls[1].Step
			fork := start(t, Options{Mode: Fork, Session: parent, Dir: filepath.Join(root, "child"), AtStep: at,
				Overrides: replay.Overrides{System: &brief}, OnMiss: replay.OnMissStub,
				Goal:      &replay.Goal{Tool: "report", ArgsMatch: json.RawMessage(`{"text":"Sunny."}`)},
				Upstreams: map[string]string{"openai-responses": fresh.url}, APIKeys: map[string]string{"openai-responses": canary}})
			forked := responsesAgent(t, fork, stream)
			out = fork.stop(t)
			if out.Err != nil || out.Fork == nil {
				t.Fatalf("fork: %+v", out)
			}
			if diff := cmp.Diff([]string{"Let me check.", "Sunny."}, forked.Answers); diff != "" {
				t.Fatalf("forked answers (-want +got): the prefix is served, the tail answers the override\n%s", diff)
			}
			if fresh.calls() != 1 || up.calls() != 2 {
				t.Fatalf("fork upstream calls %d (the old upstream %d), want only the tail", fresh.calls(), up.calls())
			}
			sent := fresh.LastRequests(1)[0]
			var body struct {
				Instructions string            `json:"instructions"`
				Previous     *string           `json:"previous_response_id"`
				Input        []json.RawMessage `json:"input"`
			}
			if err := json.Unmarshal(sent.Body, &body); err != nil || sent.Status != http.StatusOK || body.Previous != nil ||
				body.Instructions != brief || len(body.Input) != 4 {
				t.Fatalf("the fork sent upstream (status %d) %s, want the recorded conversation as 4 items and no previous_response_id", sent.Status, sent.Body)
			}
			fr := ForkResult("run", at, out.Fork)
			if fr.Provenance.Live != 1 || fr.TokensSpent.OutputTokens != 2 || fr.ReachedGoal == nil || !*fr.ReachedGoal {
				t.Fatalf("fork result %+v", fr)
			}
			child := openSession(t, filepath.Join(root, "child"))
			tail := eventsOf(child, session.KindModelCall)[1]
			if child.Meta.Provider != "openai-responses" || tail.Provenance != session.ProvenanceLive ||
				string(tail.Request.Params["previous_response_id"]) != string(calls[1].Request.Params["previous_response_id"]) {
				t.Fatalf("the child records the tail as the agent sent it: %+v", tail.Request)
			}
			assertNoCanary(t, root)
		})
	}
}

// TestOpenAIResponsesUpstreamErrorsAreRecordedAndReplayed passes a 429 and a 500 to the SDK as the
// provider sent them, records them as error events and replays them alike.
func TestOpenAIResponsesUpstreamErrorsAreRecordedAndReplayed(t *testing.T) {
	root := t.TempDir()
	script := forecastScript
	script.Faults = []fakellm.Fault{{Kind: fakellm.FaultRateLimit, Times: 1, RetryAfter: 7}, {Kind: fakellm.FaultServerError, After: 1, Times: 1}}
	up := newUpstream(t, script)
	params := responses.ResponseNewParams{Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Weather?")}}
	check := func(r *running) {
		t.Helper()
		c := oai.NewClient(oaiopt.WithBaseURL(r.url+"/v1"), oaiopt.WithAPIKey("placeholder-key"), oaiopt.WithMaxRetries(0))
		_, err := c.Responses.New(t.Context(), params)
		var e *oai.Error
		if !errors.As(err, &e) || e.StatusCode != 429 || e.Message != "fakellm: scripted rate limit" || e.Response.Header.Get("Retry-After") != "7" {
			t.Fatalf("429: %v", err)
		}
		s := c.Responses.NewStreaming(t.Context(), params)
		for s.Next() {
		}
		if !errors.As(s.Err(), &e) || e.StatusCode != 500 || e.Message != "fakellm: scripted server error" {
			t.Fatalf("500: %v", s.Err())
		}
		if resp, err := c.Responses.New(t.Context(), params); err != nil || resp.OutputText() != "Let me check." {
			t.Fatalf("after the faults: %v", err)
		}
	}
	rec := start(t, Options{Mode: Record, Provider: "openai-responses", Dir: filepath.Join(root, "run"), ID: "run",
		Upstreams: map[string]string{"openai-responses": up.url}})
	check(rec)
	rec.stop(t)
	s := openSession(t, filepath.Join(root, "run"))
	calls := eventsOf(s, session.KindModelCall)
	if len(calls) != 3 || calls[0].Error == nil || !strings.Contains(calls[0].Error.Message, `"status":429`) ||
		calls[1].Error == nil || !strings.Contains(calls[1].Error.Message, `"status":500`) || calls[2].Error != nil {
		t.Fatalf("recorded calls: %+v", calls)
	}
	before := up.calls()
	check(start(t, Options{Mode: Replay, Session: s}))
	if up.calls() != before {
		t.Fatal("the replay went upstream")
	}
}

// TestOpenAIResponsesMalformedRequestsAndAClientLeavingMidStream refuses bodies the codec cannot
// map in OpenAI's error shape, naming the field or byte, without going upstream; and keeps a session
// intact when the agent leaves in the middle of a stream.
func TestOpenAIResponsesMalformedRequestsAndAClientLeavingMidStream(t *testing.T) {
	root := t.TempDir()
	up := newUpstream(t, forecastScript)
	up.hang.Store(true)
	rec := start(t, Options{Mode: Record, Provider: "openai-responses", Dir: filepath.Join(root, "run"), ID: "run",
		Upstreams: map[string]string{"openai-responses": up.url}})
	for body, want := range map[string]string{
		`{"model":`:                          "byte 9",
		`{"input":"hi"}`:                     "model",
		`{"model":"m","input":[{"x":1}]}`:    "input[0].type",
		`{"model":"m","input":{"role":"u"}}`: "input",
	} {
		req, _ := http.NewRequest(http.MethodPost, rec.url+"/v1/responses", strings.NewReader(body))
		status, got := do(t, req)
		var e struct {
			Error struct{ Message, Type string }
		}
		if status != http.StatusBadRequest || json.Unmarshal(got, &e) != nil || e.Error.Type != "invalid_request_error" ||
			!strings.Contains(e.Error.Message, want) {
			t.Errorf("%s: %d %s, want 400 naming %s", body, status, got, want)
		}
	}
	if up.calls() != 0 {
		t.Fatalf("%d malformed requests went upstream", up.calls())
	}

	c := oai.NewClient(oaiopt.WithBaseURL(rec.url+"/v1"), oaiopt.WithAPIKey("placeholder-key"), oaiopt.WithMaxRetries(0))
	ctx, cancel := context.WithCancel(t.Context())
	s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Weather?")}})
	if !s.Next() || s.Current().Type != "response.created" {
		t.Fatalf("first event: %v", s.Err())
	}
	cancel()
	s.Close()
	select {
	case <-up.canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy kept the upstream call after the agent left")
	}
	up.hang.Store(false)
	resp, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Weather?")}})
	if err != nil || resp.OutputText() != "Let me check." {
		t.Fatalf("the next call: %v", err)
	}
	if out := rec.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	calls := eventsOf(openSession(t, filepath.Join(root, "run")), session.KindModelCall)
	if len(calls) != 2 || calls[0].Error == nil || len(calls[0].Stream) != 1 || calls[1].Error != nil {
		t.Fatalf("recorded calls: %+v", calls)
	}
}

// TestOpenAIResponsesStreamTheAgentLeavesAtItsTerminalEventIsRecordedWhole: the Responses stream
// has no [DONE]; an agent that stops reading at response.completed, while the upstream keeps the
// body open a moment longer, got the whole answer, and the recording keeps it with its usage.
func TestOpenAIResponsesStreamTheAgentLeavesAtItsTerminalEventIsRecordedWhole(t *testing.T) {
	resp := `{"id":"resp_1","object":"response","created_at":1,"status":"%s","model":"gpt-test","output":%s,"usage":%s}`
	done := `[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello","annotations":[]}]}]`
	lingering := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range [][2]string{
			{"response.created", `{"type":"response.created","sequence_number":0,"response":` + fmt.Sprintf(resp, "in_progress", "[]", "null") + `}`},
			{"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello"}`},
			{"response.completed", `{"type":"response.completed","sequence_number":2,"response":` +
				fmt.Sprintf(resp, "completed", done, `{"input_tokens":5,"output_tokens":3,"total_tokens":8}`) + `}`},
		} {
			_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev[0], ev[1])
		}
		w.(http.Flusher).Flush()
		select { // the body ends well after the agent has left
		case <-r.Context().Done():
		case <-time.After(300 * time.Millisecond):
		}
	}))
	t.Cleanup(lingering.Close)

	dir := filepath.Join(t.TempDir(), "run")
	rec := start(t, Options{Mode: Record, Provider: "openai-responses", Dir: dir, ID: "run",
		Upstreams: map[string]string{"openai-responses": lingering.URL}})
	c := oai.NewClient(oaiopt.WithBaseURL(rec.url+"/v1"), oaiopt.WithAPIKey("placeholder-key"), oaiopt.WithMaxRetries(0))
	s := c.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Greet")}})
	for s.Next() {
		if s.Current().Type == "response.completed" {
			break
		}
	}
	_ = s.Close() // the agent hangs up at the terminal event
	if out := rec.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	calls := eventsOf(openSession(t, dir), session.KindModelCall)
	if len(calls) != 1 || calls[0].Error != nil || calls[0].Usage == nil || calls[0].Usage.OutputTokens != 3 ||
		!strings.Contains(string(calls[0].Response.Content), "Hello") {
		t.Fatalf("the finished answer was recorded as %+v; want it whole, with 3 output tokens", calls)
	}
}
