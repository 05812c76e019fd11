package fakellm_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// openaiClient is the official SDK pointed at the fake, without retries.
func openaiClient(url string) openai.Client {
	return openai.NewClient(openaioption.WithBaseURL(url+"/v1/"), openaioption.WithAPIKey("test"), openaioption.WithMaxRetries(0))
}

func openaiParams(system string, messages ...openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	if system != "" {
		messages = append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system)}, messages...)
	}
	return openai.ChatCompletionNewParams{Model: "gpt-test", Messages: messages}
}

func openaiStep1() []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Make the failing test pass.")}
}

func openaiStep2() []openai.ChatCompletionMessageParamUnion {
	call := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
		ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "read_file", Arguments: `{"path":"main.go"}`}}}
	return append(openaiStep1(),
		openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{call}}},
		openai.ToolMessage("package main\n", "call_1"))
}

// callView is what a test compares of a decoded tool call.
type callView struct {
	ID, Type, Name string
	Args           map[string]any
}

func calls(t *testing.T, msg openai.ChatCompletionMessage) []callView {
	t.Helper()
	var out []callView
	for _, c := range msg.ToolCalls {
		v := callView{ID: c.ID, Type: c.Type, Name: c.Function.Name}
		if err := json.Unmarshal([]byte(c.Function.Arguments), &v.Args); err != nil {
			t.Fatalf("arguments %q of %s are not a JSON object: %v", c.Function.Arguments, c.Function.Name, err)
		}
		out = append(out, v)
	}
	return out
}

// streamCompletion streams params through the SDK's accumulator and returns what it accumulated,
// the number of chunks and the stream's error.
func streamCompletion(t *testing.T, client openai.Client, params openai.ChatCompletionNewParams) (openai.ChatCompletion, int, error) {
	t.Helper()
	stream := client.Chat.Completions.NewStreaming(t.Context(), params)
	defer stream.Close()
	acc := openai.ChatCompletionAccumulator{}
	n := 0
	for stream.Next() {
		n++
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("the accumulator refused chunk %d: %s", n, stream.Current().RawJSON())
		}
	}
	return acc.ChatCompletion, n, stream.Err()
}

func TestOpenAICompletionCarriesTheScriptedTextToolCallsFinishReasonAndUsage(t *testing.T) {
	fake, url := start(t, agentScript(t))
	client := openaiClient(url)

	c, err := client.Chat.Completions.New(t.Context(), openaiParams("You are a coding agent.", openaiStep1()...))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 1 {
		t.Fatalf("%d choices, want 1", len(c.Choices))
	}
	ch := c.Choices[0]
	if ch.Message.Content != "Let me look at the code first." || ch.FinishReason != "tool_calls" || c.Model != "gpt-test" ||
		!strings.HasPrefix(c.ID, "chatcmpl-") || c.Created != fakellm.DefaultCreated {
		t.Errorf("content %q, finish %q, model %q, id %q, created %d", ch.Message.Content, ch.FinishReason, c.Model, c.ID, c.Created)
	}
	want := []callView{{ID: ch.Message.ToolCalls[0].ID, Type: "function", Name: "read_file", Args: map[string]any{"path": "main.go"}}}
	if d := cmp.Diff(want, calls(t, ch.Message)); d != "" {
		t.Errorf("tool calls (-want +got):\n%s", d)
	}
	if !strings.HasPrefix(want[0].ID, "call_") {
		t.Errorf("tool call id %q does not look like the API's call_...", want[0].ID)
	}
	if c.Usage.PromptTokens <= 0 || c.Usage.CompletionTokens <= 0 || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
		t.Errorf("usage %+v: want positive counts adding up", c.Usage)
	}
	if fake.Requests() != 1 || fake.RequestsTo(fakellm.OpenAIChatCompletions) != 1 || fake.RequestsTo(fakellm.AnthropicMessages) != 0 {
		t.Errorf("counters %d total, %d chat, %d messages; want 1, 1, 0", fake.Requests(), fake.RequestsTo(fakellm.OpenAIChatCompletions), fake.RequestsTo(fakellm.AnthropicMessages))
	}
}

func TestOpenAIStreamSplitsArgumentsAcrossChunksAndAccumulatesToTheJSONAnswer(t *testing.T) {
	script := agentScript(t)
	script.ChunkSize = 3 // {"path":"main_test.go","content":...} arrives in dozens of pieces
	_, url := start(t, script)
	client := openaiClient(url)
	params := openaiParams("You never delete tests.", openaiStep2()...)

	want, err := client.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	got, chunks, err := streamCompletion(t, client, params)
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := calls(t, want.Choices[0].Message)
	if d := cmp.Diff(wantCalls, calls(t, got.Choices[0].Message)); d != "" {
		t.Errorf("accumulated tool calls differ from the JSON answer (-json +stream):\n%s", d)
	}
	if wantCalls[0].Name != "write_file" || wantCalls[0].Args["content"] != "package main\n\n// The test now passes: <ok> & done.\n" {
		t.Errorf("tool call %+v, want write_file of the fixed test", wantCalls[0])
	}
	args := want.Choices[0].Message.ToolCalls[0].Function.Arguments
	// role chunk, one chunk opening the call, the arguments in 3-byte pieces, finish, usage.
	if wantChunks := 1 + 1 + (len(args)+2)/3 + 1 + 1; chunks != wantChunks {
		t.Errorf("%d chunks for %d bytes of arguments, want %d", chunks, len(args), wantChunks)
	}
	if got.Choices[0].FinishReason != "tool_calls" || got.ID != want.ID {
		t.Errorf("stream: finish %q id %q; want tool_calls and the JSON answer's id %q", got.Choices[0].FinishReason, got.ID, want.ID)
	}
	if got.Usage.PromptTokens != want.Usage.PromptTokens || got.Usage.CompletionTokens != want.Usage.CompletionTokens || got.Usage.TotalTokens == 0 {
		t.Errorf("stream usage %+v, JSON usage %+v", got.Usage, want.Usage)
	}

	// Without include_usage there is no usage chunk.
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	got, withoutUsage, err := streamCompletion(t, client, params)
	if err != nil {
		t.Fatal(err)
	}
	if withoutUsage != chunks-1 || got.Usage.TotalTokens != 0 {
		t.Errorf("without include_usage: %d chunks and usage %+v; want %d chunks and no usage", withoutUsage, got.Usage, chunks-1)
	}
}

func TestOpenAISystemPromptRuleAndStopReasons(t *testing.T) {
	script := agentScript(t)
	script.Turns = append([]fakellm.Turn{{When: fakellm.Match{Message: "write a novel"}, Text: "It was a dark", StopReason: "max_tokens"}}, script.Turns...)
	_, url := start(t, script)
	client := openaiClient(url)

	for _, tc := range []struct{ system, tool string }{
		{"You are a coding agent.", "delete_file"},
		{"You are a coding agent. You never delete tests.", "write_file"},
	} {
		got, _, err := streamCompletion(t, client, openaiParams(tc.system, openaiStep2()...))
		if err != nil {
			t.Fatal(err)
		}
		if c := calls(t, got.Choices[0].Message); len(c) != 1 || c[0].Name != tc.tool {
			t.Errorf("system %q: calls %+v, want one %s call", tc.system, c, tc.tool)
		}
	}
	c, err := client.Chat.Completions.New(t.Context(), openaiParams("", openai.UserMessage("Please write a novel.")))
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].FinishReason != "length" || c.Choices[0].Message.Content != "It was a dark" {
		t.Errorf("finish %q content %q, want length and the scripted text", c.Choices[0].FinishReason, c.Choices[0].Message.Content)
	}
	// The unmatched answer of the script.
	c, err = client.Chat.Completions.New(t.Context(), openaiParams("", openai.UserMessage("hm"), openai.AssistantMessage("a"), openai.UserMessage("b"),
		openai.AssistantMessage("c"), openai.UserMessage("d"), openai.AssistantMessage("e"), openai.UserMessage("f")))
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Message.Content != "Nothing is scripted for this request." || c.Choices[0].FinishReason != "stop" {
		t.Errorf("step 4: %q %q, want the unmatched answer with stop", c.Choices[0].Message.Content, c.Choices[0].FinishReason)
	}
}

func TestOpenAIFaultsSurfaceAsSDKErrors(t *testing.T) {
	script := fakellm.Script{
		Turns: []fakellm.Turn{
			{When: fakellm.Match{Message: "limit"}, Text: "ok", Faults: []fakellm.Fault{{Kind: fakellm.FaultRateLimit, Times: 1}}},
			{When: fakellm.Match{Message: "boom"}, Text: "x", Faults: []fakellm.Fault{{Kind: fakellm.FaultServerError}}},
			{When: fakellm.Match{Message: "cut"}, Text: "x", ToolCalls: []fakellm.ToolCall{{Name: "f", Input: json.RawMessage(`{"a": "long enough to split"}`)}},
				ChunkSize: 4, Faults: []fakellm.Fault{{Kind: fakellm.FaultCut}}},
			{When: fakellm.Match{Message: "fail"}, Text: "never finished", ChunkSize: 1, Faults: []fakellm.Fault{{Kind: fakellm.FaultStreamError, CutAfter: 5}}},
		},
	}
	_, url := start(t, script)
	client := openaiClient(url)
	ask := func(text string) openai.ChatCompletionNewParams { return openaiParams("", openai.UserMessage(text)) }

	_, err := client.Chat.Completions.New(t.Context(), ask("limit"))
	apiErr, ok := errors.AsType[*openai.Error](err)
	if !ok || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "rate_limit_exceeded" ||
		apiErr.Response.Header.Get("retry-after") != "1" {
		t.Fatalf("rate_limit fault: %v; want an *openai.Error 429 rate_limit_exceeded with retry-after 1", err)
	}
	if c, err := client.Chat.Completions.New(t.Context(), ask("limit")); err != nil || c.Choices[0].Message.Content != "ok" {
		t.Errorf("after the one rate-limited request: %v; want the answer", err)
	}
	_, err = client.Chat.Completions.New(t.Context(), ask("boom"))
	if apiErr, ok := errors.AsType[*openai.Error](err); !ok || apiErr.StatusCode != http.StatusInternalServerError || apiErr.Type != "server_error" {
		t.Errorf("server_error fault: %v; want an *openai.Error 500 server_error", err)
	}
	got, chunks, err := streamCompletion(t, client, ask("cut"))
	if err == nil {
		t.Errorf("cut stream ended cleanly after %d chunks with %+v; want a stream error", chunks, got.Choices)
	}
	if chunks == 0 {
		t.Error("cut stream delivered nothing; want the first half of the chunks before the cut")
	}
	got, chunks, err = streamCompletion(t, client, ask("fail"))
	if streamErr, ok := errors.AsType[*ssestream.StreamError](err); !ok || chunks != 5 || got.Choices[0].Message.Content != "neve" {
		t.Errorf("stream_error: %v (%T) after %d chunks with %q; want an *openai.StreamError after 5 chunks and \"neve\"", err, streamErr, chunks, got.Choices[0].Message.Content)
	}
}

func TestOpenAIRequestValidationAndUnknownPathsAnswerInTheAPIErrorShape(t *testing.T) {
	_, url := start(t, agentScript(t))
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"no model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 400, "you must provide a model parameter"},
		{"no messages", "/v1/chat/completions", `{"model":"m"}`, 400, "Missing required parameter: 'messages'."},
		{"empty messages", "/v1/chat/completions", `{"model":"m","messages":[]}`, 400,
			"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."},
		{"unknown path", "/v1/embeddings", `{}`, 404, "Not found: POST /v1/embeddings"},
	} {
		status, header, body := post(t, url, tc.path, tc.body, "Authorization", "Bearer test")
		var got struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %s is not JSON", tc.name, body)
		}
		if status != tc.status || got.Error.Type != "invalid_request_error" || got.Error.Message != tc.want ||
			!strings.HasPrefix(header.Get("x-request-id"), "req_") {
			t.Errorf("%s: %d %s; want %d invalid_request_error %q", tc.name, status, body, tc.status, tc.want)
		}
	}
}
