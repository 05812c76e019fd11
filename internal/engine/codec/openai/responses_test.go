package openai_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

var rc = openai.ResponsesCodec{}

// sdkResponsesBody is the body openai-go sends for params.
func sdkResponsesBody(t *testing.T, params responses.ResponseNewParams) []byte {
	t.Helper()
	srv := serve(t, "application/json", responseBody)
	c := srv.client()
	if _, err := c.Responses.New(t.Context(), params); err != nil {
		t.Fatalf("the SDK could not send the request: %v", err)
	}
	return srv.lastBody(t)
}

// toolParams is a second turn of a tool-using conversation, as an agent on openai-go builds it.
func toolParams() responses.ResponseNewParams {
	out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"sky":"clear"}`)
	out.OfFunctionCallOutput.CallID = sdk.String("call_1")
	return responses.ResponseNewParams{
		Model:        "gpt-test",
		Instructions: sdk.String("You are a weather bot."),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, "call_1", "weather"),
			out,
		}},
		Tools:       []responses.ToolUnionParam{responses.ToolParamOfFunction("weather", map[string]any{"type": "object"}, true)},
		Temperature: sdk.Float(0.2),
	}
}

// TestResponsesRequestsRoundTripWhatTheSDKSends normalizes the bodies openai-go sends — items of
// every kind a tool loop uses, a string input, a chain — and denormalizes them back to the same JSON.
func TestResponsesRequestsRoundTripWhatTheSDKSends(t *testing.T) {
	chained := toolParams()
	chained.PreviousResponseID = sdk.String("resp_1")
	cases := map[string]struct {
		params    responses.ResponseNewParams
		wantRoles []string
	}{
		"tool loop": {toolParams(), []string{"user", "function_call", "function_call_output"}},
		"string input": {responses.ResponseNewParams{Model: "gpt-test",
			Input: responses.ResponseNewParamsInputUnion{OfString: sdk.String("Hello")}}, []string{"user"}},
		"chain": {chained, []string{"user", "function_call", "function_call_output"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			body := sdkResponsesBody(t, tc.params)
			req, err := rc.NormalizeRequest(body)
			if err != nil {
				t.Fatal(err)
			}
			var roles []string
			for _, m := range req.Messages {
				roles = append(roles, m.Role)
			}
			if diff := cmp.Diff(tc.wantRoles, roles); diff != "" {
				t.Fatalf("message roles (-want +got):\n%s", diff)
			}
			if tc.params.Instructions.Valid() && req.System != tc.params.Instructions.Value {
				t.Fatalf("System = %q, want the instructions", req.System)
			}
			back, err := rc.DenormalizeRequest(req)
			if err != nil {
				t.Fatal(err)
			}
			assertJSONEqual(t, back, body)
		})
	}
}

// TestResponsesRequestSystemOverrideBecomesInstructions is what a fork's system override sends.
func TestResponsesRequestSystemOverrideBecomesInstructions(t *testing.T) {
	req, err := rc.NormalizeRequest(sdkResponsesBody(t, toolParams()))
	if err != nil {
		t.Fatal(err)
	}
	req.System = "Be brief."
	back, err := rc.DenormalizeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Instructions string            `json:"instructions"`
		Input        []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(back, &got); err != nil || got.Instructions != "Be brief." || len(got.Input) != 3 {
		t.Fatalf("denormalized %s", back)
	}
}

func TestResponsesNormalizeRequestNamesTheFieldAtFault(t *testing.T) {
	cases := map[string]struct {
		body, field string
		want        error
		offset      int64
	}{
		"not JSON":           {`{"model":`, "", openai.ErrNotJSON, 9},
		"no model":           {`{"input":"hi"}`, "model", openai.ErrMissing, -1},
		"input a number":     {`{"model":"m","input":7}`, "input", openai.ErrWrongType, -1},
		"item neither":       {`{"model":"m","input":[{"role":"user","content":"a"},{"content":"b"}]}`, "input[1].type", openai.ErrMissing, -1},
		"role equal to type": {`{"model":"m","input":[{"type":"user","role":"user"}]}`, "input[0].role", openai.ErrWrongType, -1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := rc.NormalizeRequest([]byte(tc.body))
			var ce *openai.CodecError
			if !errors.As(err, &ce) || !errors.Is(err, tc.want) || ce.Field != tc.field || (tc.offset >= 0 && ce.Offset != tc.offset) {
				t.Fatalf("error %v, want %v at field %q offset %d", err, tc.want, tc.field, tc.offset)
			}
		})
	}
}

// responseBody is a response that calls a tool after a sentence, as the API answers.
var responseBody = []byte(`{"id":"resp_1","object":"response","created_at":1700000000,"status":"completed","error":null,"incomplete_details":null,"instructions":"You are a weather bot.","model":"gpt-test","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me check.","annotations":[]}]},{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"}],"parallel_tool_calls":true,"previous_response_id":null,"store":true,"temperature":1,"tool_choice":"auto","tools":[],"top_p":1,"usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":4},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":29}}`)

func TestResponsesResponseRoundTripsAndTheSDKDecodesIt(t *testing.T) {
	resp, err := rc.NormalizeResponse(responseBody)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != "completed" || !strings.HasPrefix(string(resp.Content), `[{"id":"msg_1"`) ||
		cmp.Diff(&session.Usage{InputTokens: 20, OutputTokens: 9, CacheReadInputTokens: 4}, resp.Usage) != "" {
		t.Fatalf("neutral response %+v", resp)
	}
	if strings.Contains(string(resp.Raw), "Let me check") {
		t.Fatal("Raw repeats the output")
	}
	back, err := rc.DenormalizeResponse(resp)
	if err != nil {
		t.Fatal(err)
	}
	assertJSONEqual(t, back, responseBody)
	if got, want := sdkResponse(t, back), sdkResponse(t, responseBody); cmp.Diff(want, got, typedOnly) != "" {
		t.Fatalf("the SDK decodes a different response:\n%s", cmp.Diff(want, got, typedOnly))
	}
	if id := rc.ResponseID(resp); id != "resp_1" {
		t.Fatalf("ResponseID = %q", id)
	}
}

func sdkResponse(t *testing.T, body []byte) *responses.Response {
	t.Helper()
	c := serve(t, "application/json", body).client()
	r, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "gpt-test"})
	if err != nil {
		t.Fatalf("the SDK could not decode the response: %v\n%s", err, body)
	}
	return r
}

// sdkEvents is what an SDK user sees of a Responses stream: every event, raw JSON included, and the
// error the stream ended with.
func sdkEvents(t *testing.T, body []byte) ([]responses.ResponseStreamEventUnion, error) {
	t.Helper()
	c := serve(t, "text/event-stream", body).client()
	s := c.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: "gpt-test"})
	defer s.Close()
	var out []responses.ResponseStreamEventUnion
	for s.Next() {
		out = append(out, s.Current())
	}
	return out, s.Err()
}

// TestResponsesStreamRebuildsForTheSDKAndAssemblesTheResponse streams responseBody the way the
// codec synthesizes it, and checks the round trip of that stream: the SDK sees the same events from
// the rebuilt stream, the assembly is the response, and a stream cut before its terminal event
// assembles the same output from the deltas.
func TestResponsesStreamRebuildsForTheSDKAndAssemblesTheResponse(t *testing.T) {
	resp, err := rc.NormalizeResponse(responseBody)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := rc.SynthesizeStream(resp)
	if err != nil {
		t.Fatal(err)
	}
	wire := rc.RebuildStream(chunks)
	for _, typ := range []string{"response.created", "response.output_text.delta", "response.function_call_arguments.delta", "response.completed"} {
		if !strings.Contains(string(wire), "event: "+typ+"\n") {
			t.Fatalf("the stream has no %s event:\n%s", typ, wire)
		}
	}
	got, chunks2, err := rc.NormalizeStream(wire)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(resp, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("the stream assembles another response (-want +got):\n%s", diff)
	}
	if string(rc.RebuildStream(chunks2)) != string(wire) {
		t.Fatal("a normalized stream does not rebuild byte for byte")
	}
	events, err := sdkEvents(t, wire)
	if err != nil || len(events) != len(chunks) {
		t.Fatalf("the SDK read %d events (err %v), want %d", len(events), err, len(chunks))
	}
	last := events[len(events)-1]
	if last.Type != "response.completed" || last.Response.OutputText() != "Let me check." ||
		last.Response.Output[1].AsFunctionCall().Arguments != `{"city":"Paris"}` {
		t.Fatalf("the SDK's last event %s", last.RawJSON())
	}

	cut := wire[:strings.Index(string(wire), "event: response.output_item.done")]
	partial, _, err := rc.NormalizeStream(cut)
	if err != nil {
		t.Fatal(err)
	}
	var items []map[string]any
	if err := json.Unmarshal(partial.Content, &items); err != nil || len(items) != 1 {
		t.Fatalf("a stream cut in its first item assembles %s", partial.Content)
	}
	text := items[0]["content"].([]any)[0].(map[string]any)["text"]
	if text != "Let me check." || partial.StopReason != "in_progress" {
		t.Fatalf("the deltas assemble %q, status %q", text, partial.StopReason)
	}
}

func TestResponsesNormalizeStreamRefusesDataThatIsNotJSON(t *testing.T) {
	body := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{}}\n\nevent: response.output_text.delta\ndata: {nope\n\n"
	_, _, err := rc.NormalizeStream([]byte(body))
	var ce *openai.CodecError
	if !errors.As(err, &ce) || !errors.Is(err, openai.ErrNotJSON) || ce.Offset != int64(strings.Index(body, "event: response.output_text")) {
		t.Fatalf("error %v, want ErrNotJSON at the second event", err)
	}
}

// TestResponsesExpandPreviousRebuildsTheConversation is what a fork sends upstream for a request
// that continues a response its served prefix handed the agent.
func TestResponsesExpandPreviousRebuildsTheConversation(t *testing.T) {
	norm := func(body string) session.Request {
		req, err := rc.NormalizeRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	first := openai.Exchange{Request: norm(`{"model":"m","instructions":"old","input":"Weather in Paris?"}`)}
	first.Response, _ = rc.NormalizeResponse(responseBody)
	second := openai.Exchange{
		Request:  norm(`{"model":"m","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"call_1","output":"clear"}]}`),
		Response: session.Response{Content: json.RawMessage(`[{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"output_text","text":"Sunny."}]}]`)},
	}
	recorded := map[string]openai.Exchange{"resp_1": first, "resp_2": second}
	lookup := func(id string) (openai.Exchange, bool) { ex, ok := recorded[id]; return ex, ok }

	req := norm(`{"model":"m","instructions":"new","previous_response_id":"resp_2","input":"Thanks"}`)
	out, ok, err := rc.ExpandPrevious(req, lookup)
	if err != nil || !ok {
		t.Fatalf("ExpandPrevious: ok %v, %v", ok, err)
	}
	body, err := rc.DenormalizeRequest(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","instructions":"new","input":[` +
		`{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","text":"Let me check.","annotations":[]}]},` +
		`{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"clear"},` +
		`{"role":"assistant","id":"msg_2","type":"message","content":[{"type":"output_text","text":"Sunny."}]},` +
		`{"role":"user","content":"Thanks"}]}`
	assertJSONEqual(t, body, []byte(want))

	live := norm(`{"model":"m","previous_response_id":"resp_live","input":"Thanks"}`)
	if same, ok, err := rc.ExpandPrevious(live, lookup); ok || err != nil || cmp.Diff(live, same) != "" {
		t.Fatalf("a live response's id was expanded: ok %v, %v", ok, err)
	}
	delete(recorded, "resp_1")
	if _, _, err := rc.ExpandPrevious(req, lookup); !errors.Is(err, openai.ErrBrokenChain) {
		t.Fatalf("a chain through a response the recording lacks: %v, want ErrBrokenChain", err)
	}
}
