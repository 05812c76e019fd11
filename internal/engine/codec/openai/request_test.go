package openai_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// sentBody is the body a real SDK client sends for params, captured at a test server. stream makes
// the call through Chat.Completions.NewStreaming.
func sentBody(t *testing.T, params sdk.ChatCompletionNewParams, stream bool) []byte {
	t.Helper()
	if stream {
		srv := serve(t, "text/event-stream", minimalStream)
		c := srv.client()
		s := c.Chat.Completions.NewStreaming(t.Context(), params)
		for s.Next() {
		}
		if err := s.Err(); err != nil {
			t.Fatalf("streaming call: %v", err)
		}
		_ = s.Close()
		return srv.lastBody(t)
	}
	srv := serve(t, "application/json", minimalCompletion)
	c := srv.client()
	if _, err := c.Chat.Completions.New(t.Context(), params); err != nil {
		t.Fatalf("call: %v", err)
	}
	return srv.lastBody(t)
}

func weatherTool() sdk.ChatCompletionToolUnionParam {
	return sdk.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: sdk.String("Current weather for a city"),
		Strict:      sdk.Bool(true),
		Parameters: shared.FunctionParameters{
			"type": "object",
			"properties": map[string]any{
				"location": map[string]any{"type": "string", "description": "City and country"},
				"unit":     map[string]any{"type": "string", "enum": []string{"celsius", "fahrenheit"}},
			},
			"required":             []string{"location", "unit"},
			"additionalProperties": false,
		},
	})
}

// toolConversation is a request with every construct of a tool-using agent: a system prompt, a user
// turn, an assistant turn that called two tools, their results, tools, a forced tool choice and a
// structured output format.
func toolConversation() sdk.ChatCompletionNewParams {
	assistant := sdk.ChatCompletionAssistantMessageParam{
		Content: sdk.ChatCompletionAssistantMessageParamContentUnion{OfString: sdk.String("Let me check both cities.")},
		ToolCalls: []sdk.ChatCompletionMessageToolCallUnionParam{
			{OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
				ID:       "call_paris",
				Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"location":"Paris, France","unit":"celsius"}`},
			}},
			{OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
				ID:       "call_oslo",
				Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"location":"Oslo, Norway","unit":"celsius"}`},
			}},
		},
	}
	return sdk.ChatCompletionNewParams{
		Model: "gpt-4o",
		Messages: []sdk.ChatCompletionMessageParamUnion{
			sdk.SystemMessage("You are a terse weather assistant."),
			sdk.UserMessage("Weather in Paris and Oslo?"),
			{OfAssistant: &assistant},
			sdk.ToolMessage("18°C, sunny <clear> & calm", "call_paris"),
			sdk.ToolMessage("4°C, snow", "call_oslo"),
		},
		Tools:      []sdk.ChatCompletionToolUnionParam{weatherTool()},
		ToolChoice: sdk.ToolChoiceOptionFunctionToolChoice(sdk.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
		ResponseFormat: sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name:   "forecast",
				Strict: sdk.Bool(true),
				Schema: map[string]any{
					"type":                 "object",
					"properties":           map[string]any{"summary": map[string]any{"type": "string"}},
					"required":             []string{"summary"},
					"additionalProperties": false,
				},
			},
		}},
		Temperature: sdk.Float(0.2),
		Seed:        sdk.Int(7),
	}
}

func TestRequestsTheSDKSendsRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		params sdk.ChatCompletionNewParams
		stream bool
		check  func(t *testing.T, req session.Request)
	}{
		{
			name:   "a tool conversation with tools, tool choice and a response format",
			params: toolConversation(),
			check: func(t *testing.T, req session.Request) {
				if req.System != "You are a terse weather assistant." {
					t.Errorf("System = %q", req.System)
				}
				if _, ok := req.Params["system"]; ok {
					t.Error(`a plain system message is kept in Params["system"]; its text says it all`)
				}
				wantParams(t, req, "response_format", "seed", "temperature", "tool_choice", "tools")
				var roles []string
				for _, m := range req.Messages {
					roles = append(roles, m.Role)
				}
				if want := []string{"user", "assistant", "tool", "tool"}; !slices.Equal(roles, want) {
					t.Errorf("roles = %v, want %v", roles, want)
				}
				assertJSONEqual(t, req.Messages[0].Content, []byte(`"Weather in Paris and Oslo?"`))
				assertJSONEqual(t, req.Messages[1].Content, []byte(`{"content":"Let me check both cities.","tool_calls":[`+
					`{"id":"call_paris","function":{"arguments":"{\"location\":\"Paris, France\",\"unit\":\"celsius\"}","name":"get_weather"},"type":"function"},`+
					`{"id":"call_oslo","function":{"arguments":"{\"location\":\"Oslo, Norway\",\"unit\":\"celsius\"}","name":"get_weather"},"type":"function"}]}`))
				assertJSONEqual(t, req.Messages[2].Content, []byte(`{"content":"18°C, sunny <clear> & calm","tool_call_id":"call_paris"}`))
			},
		},
		{
			name: "a developer message with content parts is kept whole, its text in System",
			params: sdk.ChatCompletionNewParams{
				Model: "o3",
				Messages: []sdk.ChatCompletionMessageParamUnion{
					sdk.DeveloperMessage([]sdk.ChatCompletionContentPartTextParam{{Text: "Be brief."}, {Text: "Answer in French."}}),
					sdk.UserMessage("Weather in Paris?"),
				},
				ReasoningEffort:     shared.ReasoningEffortLow,
				MaxCompletionTokens: sdk.Int(512),
			},
			check: func(t *testing.T, req session.Request) {
				if want := "Be brief.\n\nAnswer in French."; req.System != want {
					t.Errorf("System = %q, want %q", req.System, want)
				}
				wantParams(t, req, "max_completion_tokens", "reasoning_effort", "system")
				assertJSONEqual(t, req.Params["system"], []byte(`{"role":"developer","content":[{"text":"Be brief.","type":"text"},{"text":"Answer in French.","type":"text"}]}`))
			},
		},
		{
			name: "a streaming call's stream and stream_options go to params",
			params: func() sdk.ChatCompletionNewParams {
				p := minimalParams()
				p.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
				p.User = sdk.String("user-7f3a")
				p.Metadata = shared.Metadata{"trace": "abc"}
				return p
			}(),
			stream: true,
			check: func(t *testing.T, req session.Request) {
				wantParams(t, req, "metadata", "stream", "stream_options", "user")
				if req.System != "" {
					t.Errorf("System = %q, want none", req.System)
				}
			},
		},
	}
	var c openai.Codec
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := sentBody(t, tt.params, tt.stream)

			req, err := c.NormalizeRequest(body)
			if err != nil {
				t.Fatalf("NormalizeRequest: %v\n%s", err, body)
			}
			if want := string(tt.params.Model); req.Model != want {
				t.Errorf("Model = %q, want %q", req.Model, want)
			}
			tt.check(t, req)

			back, err := c.DenormalizeRequest(req)
			if err != nil {
				t.Fatalf("DenormalizeRequest: %v", err)
			}
			assertJSONEqual(t, back, body)

			again, err := c.NormalizeRequest(back)
			if err != nil {
				t.Fatalf("NormalizeRequest of the rebuilt body: %v", err)
			}
			if diff := cmp.Diff(req, again); diff != "" {
				t.Fatalf("neutral request changed over a wire round trip (-want +got):\n%s", diff)
			}
		})
	}
}

// wantParams checks that Params holds exactly keys.
func wantParams(t *testing.T, req session.Request, keys ...string) {
	t.Helper()
	got := make([]string, 0, len(req.Params))
	for k := range req.Params {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, keys) {
		t.Errorf("Params keys = %v, want %v", got, keys)
	}
}

// Bodies other clients send (curl, other SDKs, older code) use shapes the Go SDK never produces.
func TestWireShapesOtherClientsSendRoundTrip(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantSystem string
		wantKept   string // Params["system"], "" when absent
		wantFirst  string // the first neutral message's Content, "" to skip
	}{
		{
			name:       "a plain system message lives in System alone",
			body:       `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}`,
			wantSystem: "Be brief.",
			wantFirst:  `"Hi"`,
		},
		{
			name:     "an empty system message is kept so it is sent again",
			body:     `{"model":"gpt-4o","messages":[{"role":"system","content":""},{"role":"user","content":"Hi"}]}`,
			wantKept: `{"role":"system","content":""}`,
		},
		{
			name:       "a named system message is kept",
			body:       `{"model":"gpt-4o","messages":[{"role":"system","name":"policy","content":"Be brief."}]}`,
			wantSystem: "Be brief.",
			wantKept:   `{"role":"system","name":"policy","content":"Be brief."}`,
		},
		{
			name:       "only the first message is the system prompt; a later one is a message",
			body:       `{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"},{"role":"system","content":"Be brief."}]}`,
			wantSystem: "",
			wantFirst:  `"Hi"`,
		},
		{
			name:       "a second system message stays in the conversation",
			body:       `{"model":"gpt-4o","messages":[{"role":"system","content":"One."},{"role":"system","content":"Two."}]}`,
			wantSystem: "One.",
			wantFirst:  `"Two."`,
		},
		{
			name: "legacy function calls, null content, a message without content and pretty printing",
			body: `{
				"model": "gpt-3.5-turbo",
				"messages": [
					{"role": "user", "content": [{"type": "text", "text": "What is 2 + 2?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}]},
					{"role": "assistant", "content": null, "function_call": {"name": "add", "arguments": "{\"a\": 2, \"b\": 2}"}},
					{"role": "function", "name": "add", "content": "4"},
					{"role": "assistant"}
				],
				"functions": [{"name": "add", "parameters": {"type": "object"}}],
				"max_tokens": 16
			}`,
			wantFirst: `[{"type":"text","text":"What is 2 + 2?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}]`,
		},
		{
			name:      "content that is an object is wrapped so it cannot pass for the message's members",
			body:      `{"model":"gpt-4o","messages":[{"role":"user","content":{"tool_calls":[]}}]}`,
			wantFirst: `{"content":{"tool_calls":[]}}`,
		},
		{
			name:      "members a newer API adds pass through params and messages",
			body:      `{"model":"gpt-4o","messages":[{"content":"x","role":"user","future":{"a":[1,2.50,true]}}],"future_param":{"nested":[1e3,"<&>"]}}`,
			wantFirst: `{"content":"x","future":{"a":[1,2.50,true]}}`,
		},
	}
	var c openai.Codec
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := c.NormalizeRequest([]byte(tt.body))
			if err != nil {
				t.Fatalf("NormalizeRequest: %v", err)
			}
			if req.System != tt.wantSystem {
				t.Errorf("System = %q, want %q", req.System, tt.wantSystem)
			}
			if kept := string(req.Params["system"]); kept != tt.wantKept {
				t.Errorf(`Params["system"] = %s, want %s`, kept, tt.wantKept)
			}
			if tt.wantFirst != "" {
				if got := string(req.Messages[0].Content); got != tt.wantFirst {
					t.Errorf("first message content = %s, want %s", got, tt.wantFirst)
				}
			}
			back, err := c.DenormalizeRequest(req)
			if err != nil {
				t.Fatalf("DenormalizeRequest: %v", err)
			}
			assertJSONEqual(t, back, []byte(tt.body))
			again, err := c.NormalizeRequest(back)
			if err != nil {
				t.Fatalf("NormalizeRequest of the rebuilt body: %v", err)
			}
			if diff := cmp.Diff(req, again); diff != "" {
				t.Fatalf("neutral request changed over a wire round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSystemOverridesReachTheWire(t *testing.T) {
	tests := []struct {
		name        string
		first       *sdk.ChatCompletionMessageParamUnion
		override    string
		wantMessage string // the wire's first message when it is the system prompt; "" when there must be none
	}{
		{
			name:        "a plain system message takes the new text",
			first:       ptr(sdk.SystemMessage("Old prompt.")),
			override:    "New prompt.",
			wantMessage: `{"role":"system","content":"New prompt."}`,
		},
		{
			name:        "a developer message stays a developer message",
			first:       ptr(sdk.DeveloperMessage("Old prompt.")),
			override:    "New prompt.",
			wantMessage: `{"content":"New prompt.","role":"developer"}`,
		},
		{
			name:        "a lone text part takes the new text",
			first:       ptr(sdk.SystemMessage([]sdk.ChatCompletionContentPartTextParam{{Text: "Old prompt."}})),
			override:    "New prompt.",
			wantMessage: `{"content":[{"text":"New prompt.","type":"text"}],"role":"system"}`,
		},
		{
			name:        "several parts collapse into a plain string",
			first:       ptr(sdk.SystemMessage([]sdk.ChatCompletionContentPartTextParam{{Text: "Old."}, {Text: "Prompt."}})),
			override:    "New prompt.",
			wantMessage: `{"content":"New prompt.","role":"system"}`,
		},
		{
			name:     "an empty override removes the system prompt",
			first:    ptr(sdk.DeveloperMessage("Old prompt.")),
			override: "",
		},
		{
			name:        "a request without a system prompt gains one",
			override:    "New prompt.",
			wantMessage: `{"role":"system","content":"New prompt."}`,
		},
	}
	var c openai.Codec
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := minimalParams()
			if tt.first != nil {
				p.Messages = append([]sdk.ChatCompletionMessageParamUnion{*tt.first}, p.Messages...)
			}
			req, err := c.NormalizeRequest(sentBody(t, p, false))
			if err != nil {
				t.Fatal(err)
			}
			req, err = replay.Overrides{System: &tt.override}.Apply(req, 0)
			if err != nil {
				t.Fatal(err)
			}
			body, err := c.DenormalizeRequest(req)
			if err != nil {
				t.Fatal(err)
			}
			var wire struct {
				Messages []json.RawMessage `json:"messages"`
			}
			if err := json.Unmarshal(body, &wire); err != nil {
				t.Fatal(err)
			}
			if tt.wantMessage == "" {
				if len(wire.Messages) != 1 {
					t.Fatalf("messages = %s, want the user message alone", body)
				}
			} else {
				if len(wire.Messages) != 2 {
					t.Fatalf("messages = %s, want a system prompt and the user message", body)
				}
				assertJSONEqual(t, wire.Messages[0], []byte(tt.wantMessage))
			}
			again, err := c.NormalizeRequest(body)
			if err != nil {
				t.Fatal(err)
			}
			if again.System != tt.override {
				t.Errorf("System after the round trip = %q, want %q", again.System, tt.override)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestFingerprintsIgnoreVolatileMembers(t *testing.T) {
	var c openai.Codec
	normalized := func(t *testing.T, p sdk.ChatCompletionNewParams, stream bool) session.Request {
		t.Helper()
		req, err := c.NormalizeRequest(sentBody(t, p, stream))
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	fp := func(t *testing.T, req session.Request, mode fingerprint.Mode) string {
		t.Helper()
		sum, err := fingerprint.Of(req, fingerprint.Options{Mode: mode, VolatilePaths: c.VolatilePaths()})
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}

	t.Run("who calls, how it streams and what is stored do not change the stripped request", func(t *testing.T) {
		a := minimalParams()
		a.User = sdk.String("user-1")
		a.SafetyIdentifier = sdk.String("hash-1")
		a.PromptCacheKey = sdk.String("session-1")
		a.Metadata = shared.Metadata{"trace": "1"}
		b := minimalParams()
		b.User = sdk.String("user-2")
		b.Store = sdk.Bool(true)
		b.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
		ra, rb := normalized(t, a, false), normalized(t, b, true)
		if cmp.Equal(ra, rb) {
			t.Fatal("the requests should differ before stripping")
		}
		sa, sb := c.StripVolatile(ra), c.StripVolatile(rb)
		if diff := cmp.Diff(sa, sb); diff != "" {
			t.Fatalf("stripped requests differ:\n%s", diff)
		}
		if fp(t, sa, fingerprint.Strict) != fp(t, sb, fingerprint.Strict) {
			t.Fatal("strict fingerprints of the stripped requests differ")
		}
	})

	t.Run("structural mode masks sampling parameters and budgets but not the prompt", func(t *testing.T) {
		a := minimalParams()
		a.Temperature, a.TopP, a.Seed, a.MaxCompletionTokens = sdk.Float(0), sdk.Float(0.9), sdk.Int(1), sdk.Int(100)
		a.FrequencyPenalty, a.PresencePenalty = sdk.Float(0.5), sdk.Float(0.1)
		a.ReasoningEffort = shared.ReasoningEffortLow
		b := minimalParams()
		b.Temperature, b.TopP, b.Seed, b.MaxCompletionTokens = sdk.Float(1), sdk.Float(0.5), sdk.Int(2), sdk.Int(900)
		b.FrequencyPenalty, b.PresencePenalty = sdk.Float(0), sdk.Float(1)
		b.ReasoningEffort = shared.ReasoningEffortHigh
		ra, rb := normalized(t, a, false), normalized(t, b, false)
		if fp(t, ra, fingerprint.Strict) == fp(t, rb, fingerprint.Strict) {
			t.Fatal("strict fingerprints should tell the requests apart")
		}
		if fp(t, ra, fingerprint.Structural) != fp(t, rb, fingerprint.Structural) {
			t.Fatal("structural fingerprints differ")
		}
		other := a
		other.Messages = []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Goodbye")}
		if fp(t, normalized(t, other, false), fingerprint.Structural) == fp(t, ra, fingerprint.Structural) {
			t.Fatal("structural fingerprints must still see a different prompt")
		}
	})
}
