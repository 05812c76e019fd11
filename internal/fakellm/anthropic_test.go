package fakellm_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// blockView is what a test compares of a decoded content block.
type blockView struct {
	Type, Text, ID, Name string
	Input                map[string]any
}

func blocks(t *testing.T, msg *anthropic.Message) []blockView {
	t.Helper()
	var out []blockView
	for _, b := range msg.Content {
		v := blockView{Type: b.Type, Text: b.Text, ID: b.ID, Name: b.Name}
		if b.Type == "tool_use" {
			if err := json.Unmarshal(b.Input, &v.Input); err != nil {
				t.Fatalf("tool_use input %q is not a JSON object: %v", b.Input, err)
			}
		}
		out = append(out, v)
	}
	return out
}

func TestAnthropicMessageCarriesTheScriptedTextToolUseStopReasonAndUsage(t *testing.T) {
	fake, url := start(t, agentScript(t))
	client := anthropicClient(url)

	msg, err := client.Messages.New(t.Context(), anthropicParams("You are a coding agent.", anthropicStep1()...))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(msg.ID, "msg_") || !strings.HasPrefix(msg.Content[1].ID, "toolu_") {
		t.Errorf("ids %q, %q do not look like the API's (msg_..., toolu_...)", msg.ID, msg.Content[1].ID)
	}
	want := []blockView{
		{Type: "text", Text: "Let me look at the code first."},
		{Type: "tool_use", ID: msg.Content[1].ID, Name: "read_file", Input: map[string]any{"path": "main.go"}},
	}
	if d := cmp.Diff(want, blocks(t, msg)); d != "" {
		t.Errorf("content (-want +got):\n%s", d)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || msg.Model != "claude-test" || msg.Role != "assistant" {
		t.Errorf("stop_reason %q, model %q, role %q; want tool_use, claude-test (echoed), assistant", msg.StopReason, msg.Model, msg.Role)
	}
	if msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 0 {
		t.Errorf("usage %+v: want estimated positive counts", msg.Usage)
	}

	// count_tokens counts the same conversation as the message's input_tokens.
	count, err := client.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{
		Model: "claude-test", Messages: anthropicStep1(),
		System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: []anthropic.TextBlockParam{{Text: "You are a coding agent."}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if count.InputTokens != msg.Usage.InputTokens {
		t.Errorf("count_tokens says %d input tokens, the message said %d", count.InputTokens, msg.Usage.InputTokens)
	}

	// Step 3 has scripted usage and the end_turn stop reason.
	step3 := append(anthropicStep2(),
		anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_2", map[string]string{"path": "main_test.go"}, "delete_file")),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_2", "deleted", false)))
	msg, err = client.Messages.New(t.Context(), anthropicParams("", step3...))
	if err != nil {
		t.Fatal(err)
	}
	if got := blocks(t, msg); len(got) != 1 || got[0].Text != "Done. The build is green." {
		t.Errorf("step 3 content %+v, want the one text block of turn done", got)
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.InputTokens != 1200 || msg.Usage.OutputTokens != 7 {
		t.Errorf("step 3: stop_reason %q, usage %d/%d; want end_turn, 1200/7 as scripted", msg.StopReason, msg.Usage.InputTokens, msg.Usage.OutputTokens)
	}

	if fake.Requests() != 3 || fake.RequestsTo(fakellm.AnthropicMessages) != 2 || fake.RequestsTo(fakellm.AnthropicCountTokens) != 1 ||
		fake.RequestsTo(fakellm.OpenAIChatCompletions) != 0 {
		t.Errorf("counters: %d total, %d messages, %d count_tokens, %d chat; want 3, 2, 1, 0", fake.Requests(),
			fake.RequestsTo(fakellm.AnthropicMessages), fake.RequestsTo(fakellm.AnthropicCountTokens), fake.RequestsTo(fakellm.OpenAIChatCompletions))
	}
	last := fake.LastRequests(2)
	if len(last) != 2 || last[0].Endpoint != fakellm.AnthropicCountTokens || last[1].Step != 3 || last[1].Turn != 3 ||
		!strings.Contains(string(last[1].Body), `"delete_file"`) {
		t.Errorf("last requests %+v: want count_tokens, then the step-3 message answered by turns[3] with its body", last)
	}
}

// streamMessage streams params and accumulates the message the way the SDK documents.
func streamMessage(t *testing.T, client anthropic.Client, params anthropic.MessageNewParams) (anthropic.Message, []string, error) {
	t.Helper()
	stream := client.Messages.NewStreaming(t.Context(), params)
	defer stream.Close()
	var msg anthropic.Message
	var events []string
	for stream.Next() {
		ev := stream.Current()
		events = append(events, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("accumulating %s: %v", ev.Type, err)
		}
	}
	return msg, events, stream.Err()
}

func TestAnthropicStreamAccumulatesToTheSameMessageAsTheJSONAnswer(t *testing.T) {
	_, url := start(t, agentScript(t))
	client := anthropicClient(url)
	params := anthropicParams("You are a coding agent.", anthropicStep1()...)

	want, err := client.Messages.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	got, events, err := streamMessage(t, client, params)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(blocks(t, want), blocks(t, &got)); d != "" {
		t.Errorf("accumulated content differs from the JSON answer (-json +stream):\n%s", d)
	}
	if got.ID != want.ID || got.StopReason != want.StopReason || got.Usage.InputTokens != want.Usage.InputTokens ||
		got.Usage.OutputTokens != want.Usage.OutputTokens {
		t.Errorf("stream: id %q stop %q usage %d/%d; JSON: id %q stop %q usage %d/%d", got.ID, got.StopReason,
			got.Usage.InputTokens, got.Usage.OutputTokens, want.ID, want.StopReason, want.Usage.InputTokens, want.Usage.OutputTokens)
	}
	// chunkSize 5: the 30-byte text arrives in 6 text deltas, {"path":"main.go"} in 4 argument deltas.
	wantEvents := []string{"message_start", "content_block_start"}
	for range 6 {
		wantEvents = append(wantEvents, "content_block_delta")
	}
	wantEvents = append(wantEvents, "content_block_stop", "content_block_start")
	for range 4 {
		wantEvents = append(wantEvents, "content_block_delta")
	}
	wantEvents = append(wantEvents, "content_block_stop", "message_delta", "message_stop")
	if d := cmp.Diff(wantEvents, events); d != "" {
		t.Errorf("event sequence (-want +got):\n%s", d)
	}
}

func TestAnthropicSystemPromptRuleSelectsTheFixedAnswer(t *testing.T) {
	fake, url := start(t, agentScript(t))
	client := anthropicClient(url)
	for _, tc := range []struct {
		system, tool string
		turn         int
	}{
		{"You are a coding agent.", "delete_file", 2},
		{"You are a coding agent. You never delete tests.", "write_file", 1},
	} {
		msg, _, err := streamMessage(t, client, anthropicParams(tc.system, anthropicStep2()...))
		if err != nil {
			t.Fatal(err)
		}
		got := blocks(t, &msg)
		if len(got) != 1 || got[0].Name != tc.tool {
			t.Errorf("system %q: content %+v, want one %s call", tc.system, got, tc.tool)
		}
		if last := fake.LastRequests(1); last[0].Turn != tc.turn || last[0].Step != 2 {
			t.Errorf("system %q: answered by turns[%d] at step %d, want turns[%d] at step 2", tc.system, last[0].Turn, last[0].Step, tc.turn)
		}
	}
}

func TestAnthropicFaultsSurfaceAsSDKErrors(t *testing.T) {
	script := fakellm.Script{
		Faults: []fakellm.Fault{{Kind: fakellm.FaultRateLimit, Times: 1, RetryAfter: 7}},
		Turns: []fakellm.Turn{
			{When: fakellm.Match{Message: "boom"}, Text: "x", Faults: []fakellm.Fault{{Kind: fakellm.FaultServerError}}},
			{When: fakellm.Match{Message: "cut"}, Text: "a long answer cut short", ChunkSize: 2, Faults: []fakellm.Fault{{Kind: fakellm.FaultCut, CutAfter: 4}}},
			{When: fakellm.Match{Message: "overload"}, Text: "never finished", Faults: []fakellm.Fault{{Kind: fakellm.FaultStreamError, CutAfter: 3}}},
			{When: fakellm.Match{Message: "hello"}, Text: "hi"},
		},
	}
	_, url := start(t, script)
	client := anthropicClient(url)
	ask := func(text string) anthropic.MessageNewParams {
		return anthropicParams("", anthropic.NewUserMessage(anthropic.NewTextBlock(text)))
	}

	_, err := client.Messages.New(t.Context(), ask("hello"))
	apiErr, ok := errors.AsType[*anthropic.Error](err)
	if !ok || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type() != "rate_limit_error" ||
		apiErr.Response.Header.Get("retry-after") != "7" || !strings.HasPrefix(apiErr.RequestID, "req_") {
		t.Fatalf("first request: %v; want an *anthropic.Error 429 rate_limit_error with retry-after 7 and a request id", err)
	}
	msg, err := client.Messages.New(t.Context(), ask("hello"))
	if err != nil || msg.Content[0].Text != "hi" {
		t.Fatalf("second request: %v, %+v; want the rate limit over after one request", err, msg)
	}

	_, err = client.Messages.New(t.Context(), ask("boom"))
	if apiErr, ok := errors.AsType[*anthropic.Error](err); !ok || apiErr.StatusCode != http.StatusInternalServerError || apiErr.Type() != "api_error" {
		t.Errorf("server_error fault: %v; want an *anthropic.Error 500 api_error", err)
	}

	got, events, err := streamMessage(t, client, ask("cut"))
	if err == nil {
		t.Errorf("cut stream ended cleanly with %q after events %v; want a stream error", got.Content[0].Text, events)
	}
	if len(events) != 3 { // message_start, content_block_start and one delta; the ping is not an event
		t.Errorf("cut stream delivered %v, want the 4 events before the cut (ping included)", events)
	}

	_, err = client.Messages.New(t.Context(), ask("cut"))
	if err == nil {
		t.Error("cut JSON answer decoded without error")
	}

	_, events, err = streamMessage(t, client, ask("overload"))
	if apiErr, ok := errors.AsType[*anthropic.Error](err); !ok || apiErr.Type() != "overloaded_error" || len(events) != 2 {
		t.Errorf("stream_error: %v after %v; want an overloaded_error *anthropic.Error after message_start and content_block_start", err, events)
	}
	_, err = client.Messages.New(t.Context(), ask("overload"))
	if apiErr, ok := errors.AsType[*anthropic.Error](err); !ok || apiErr.StatusCode != http.StatusInternalServerError {
		t.Errorf("stream_error on a JSON request: %v; want a 500", err)
	}

	// Unmatched without a scripted fallback is a 400 naming the step.
	_, err = client.Messages.New(t.Context(), ask("something else"))
	if apiErr, ok := errors.AsType[*anthropic.Error](err); !ok || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "step 1") {
		t.Errorf("unmatched request: %v; want a 400 saying no turn matches step 1", err)
	}
}

func TestAnthropicRequestValidationAndUnknownPathsAnswerInTheAPIErrorShape(t *testing.T) {
	fake, url := start(t, agentScript(t))
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"no model", "/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, 400, "model: Field required"},
		{"no messages", "/v1/messages", `{"model":"m","max_tokens":5}`, 400, "messages: Field required"},
		{"no max_tokens", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 400, "max_tokens: Field required"},
		{"not JSON", "/v1/messages", `{`, 400, "There was an error parsing the body of your request: the body is not a JSON object"},
		{"unknown path", "/v1/complete", `{}`, 404, "Not found: POST /v1/complete"},
	} {
		status, header, body := post(t, url, tc.path, tc.body, "anthropic-version", "2023-06-01")
		var got struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %s is not JSON", tc.name, body)
		}
		wantType := map[int]string{400: "invalid_request_error", 404: "not_found_error"}[tc.status]
		if status != tc.status || got.Type != "error" || got.Error.Type != wantType || got.Error.Message != tc.want ||
			!strings.HasPrefix(header.Get("request-id"), "req_") {
			t.Errorf("%s: %d %s; want %d with error type %s and message %q", tc.name, status, body, tc.status, wantType, tc.want)
		}
	}
	// count_tokens needs no max_tokens.
	if status, _, body := post(t, url, "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"x"}]}`); status != 200 ||
		!strings.HasPrefix(string(body), `{"input_tokens":`) {
		t.Errorf("count_tokens: %d %s", status, body)
	}
	if fake.Requests() != 6 || fake.RequestsTo(fakellm.AnthropicMessages) != 4 {
		t.Errorf("counters %d total, %d messages; want 6 and 4 (a 404 counts only in the total)", fake.Requests(), fake.RequestsTo(fakellm.AnthropicMessages))
	}
}
