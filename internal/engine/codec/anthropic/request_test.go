package anthropic_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentrewind/agentrewind/internal/engine/codec/anthropic"
	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// sentBody is the body a real SDK client sends for params, captured at a test server. stream makes
// the call through Messages.NewStreaming.
func sentBody(t *testing.T, params sdk.MessageNewParams, stream bool, opts ...option.RequestOption) []byte {
	t.Helper()
	if stream {
		srv := serveStream(t, minimalStream)
		c := srv.client()
		s := c.Messages.NewStreaming(t.Context(), params, opts...)
		for s.Next() {
		}
		if err := s.Err(); err != nil {
			t.Fatalf("streaming call: %v", err)
		}
		_ = s.Close()
		return srv.lastBody(t)
	}
	srv := serveMessage(t, minimalMessage)
	c := srv.client()
	if _, err := c.Messages.New(t.Context(), params, opts...); err != nil {
		t.Fatalf("call: %v", err)
	}
	return srv.lastBody(t)
}

func weatherTool() sdk.ToolUnionParam {
	return sdk.ToolUnionParam{OfTool: &sdk.ToolParam{
		Name:        "get_weather",
		Description: sdk.String("Current weather for a city"),
		InputSchema: sdk.ToolInputSchemaParam{
			Properties: map[string]any{
				"location": map[string]any{"type": "string", "description": "City and country"},
				"unit":     map[string]any{"type": "string", "enum": []string{"celsius", "fahrenheit"}},
			},
			Required: []string{"location"},
		},
		CacheControl: sdk.NewCacheControlEphemeralParam(),
	}}
}

func TestRequestsTheSDKSendsRoundTrip(t *testing.T) {
	sampled := minimalParams()
	sampled.StopSequences = []string{"\n\nHuman:", "</answer>"}
	// v2 of the SDK models no sampling parameters; callers send them as extra fields.
	sampled.SetExtraFields(map[string]any{"temperature": 0.2, "top_p": 0.95, "top_k": 40})

	tests := []struct {
		name   string
		params sdk.MessageNewParams
		stream bool
		check  func(t *testing.T, req session.Request)
	}{
		{
			name: "system blocks with cache control keep their blocks in params and their text in System",
			params: sdk.MessageNewParams{
				Model: "claude-sonnet-4-5", MaxTokens: 1024,
				System: []sdk.TextBlockParam{
					{Text: "You are a terse weather assistant.", CacheControl: sdk.NewCacheControlEphemeralParam()},
					{Text: "Answer in French."},
				},
				Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("Weather in Paris?"))},
			},
			check: func(t *testing.T, req session.Request) {
				wantSystem := "You are a terse weather assistant.\n\nAnswer in French."
				if req.System != wantSystem {
					t.Errorf("System = %q, want %q", req.System, wantSystem)
				}
				if _, ok := req.Params["system"]; !ok {
					t.Error(`Params["system"] is missing; the cache_control breakpoint would be lost`)
				}
			},
		},
		{
			name: "tools with input schemas and a forced tool choice go to params",
			params: func() sdk.MessageNewParams {
				p := minimalParams()
				p.Tools = []sdk.ToolUnionParam{weatherTool()}
				p.ToolChoice = sdk.ToolChoiceParamOfTool("get_weather")
				return p
			}(),
			check: wantParams("max_tokens", "tool_choice", "tools"),
		},
		{
			name: "tool use and tool result turns keep their blocks verbatim",
			params: sdk.MessageNewParams{
				Model: "claude-sonnet-4-5", MaxTokens: 1024,
				Tools: []sdk.ToolUnionParam{weatherTool()},
				Messages: []sdk.MessageParam{
					sdk.NewUserMessage(sdk.NewTextBlock("Weather in Paris?")),
					sdk.NewAssistantMessage(
						sdk.NewTextBlock("Let me check."),
						sdk.NewToolUseBlock("toolu_01A09q90qw90lq917835lq9", map[string]any{"location": "Paris, France", "unit": "celsius"}, "get_weather"),
					),
					sdk.NewUserMessage(sdk.NewToolResultBlock("toolu_01A09q90qw90lq917835lq9", "18°C, sunny <clear> & calm", false)),
				},
			},
			check: func(t *testing.T, req session.Request) {
				roles := []string{}
				for _, m := range req.Messages {
					roles = append(roles, m.Role)
				}
				if want := []string{"user", "assistant", "user"}; !slices.Equal(roles, want) {
					t.Errorf("roles = %v, want %v", roles, want)
				}
				var blocks []map[string]any
				if err := json.Unmarshal(req.Messages[1].Content, &blocks); err != nil || len(blocks) != 2 || blocks[1]["type"] != "tool_use" {
					t.Errorf("assistant content = %s, want a text and a tool_use block", req.Messages[1].Content)
				}
			},
		},
		{
			name: "base64 images stay inside the message content",
			params: sdk.MessageNewParams{
				Model: "claude-sonnet-4-5", MaxTokens: 1024,
				Messages: []sdk.MessageParam{sdk.NewUserMessage(
					sdk.NewImageBlockBase64("image/png", "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="),
					sdk.NewTextBlock("What is in this image?"),
				)},
			},
			check: wantParams("max_tokens"),
		},
		{
			name:   "sampling parameters and stop sequences go to params",
			params: sampled,
			check:  wantParams("max_tokens", "stop_sequences", "temperature", "top_k", "top_p"),
		},
		{
			name: "metadata and extended thinking go to params",
			params: func() sdk.MessageNewParams {
				p := minimalParams()
				p.MaxTokens = 4096
				p.Metadata = sdk.MetadataParam{UserID: sdk.String("user-7f3a")}
				p.Thinking = sdk.ThinkingConfigParamOfEnabled(2048)
				return p
			}(),
			check: wantParams("max_tokens", "metadata", "thinking"),
		},
		{
			name:   "a streaming call's stream flag goes to params",
			params: minimalParams(),
			stream: true,
			check:  wantParams("max_tokens", "stream"),
		},
	}
	var c anthropic.Codec
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := sentBody(t, tt.params, tt.stream)

			req, err := c.NormalizeRequest(body)
			if err != nil {
				t.Fatalf("NormalizeRequest: %v\n%s", err, body)
			}
			if req.Model != "claude-sonnet-4-5" {
				t.Errorf("Model = %q", req.Model)
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
			if !reflect.DeepEqual(again, req) {
				t.Fatalf("neutral request changed over a wire round trip\n got: %+v\nwant: %+v", again, req)
			}
		})
	}
}

// wantParams checks that Params holds exactly keys.
func wantParams(keys ...string) func(t *testing.T, req session.Request) {
	return func(t *testing.T, req session.Request) {
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
}

// Bodies other clients send (curl, other SDKs) use shapes the Go SDK never produces.
func TestWireShapesOtherClientsSendRoundTrip(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantSystem string
		wantKept   string // Params["system"], "" when absent
	}{
		{
			name:       "a plain string system lives in System alone",
			body:       `{"model":"claude-sonnet-4-5","max_tokens":64,"system":"Be brief.","messages":[{"role":"user","content":"Hi"}]}`,
			wantSystem: "Be brief.",
		},
		{
			name:     "an empty string system is kept so it is sent again",
			body:     `{"model":"claude-sonnet-4-5","system":"","messages":[{"role":"user","content":"Hi"}]}`,
			wantKept: `""`,
		},
		{
			name:     "a null system is kept so it is sent again",
			body:     `{"model":"claude-sonnet-4-5","system":null,"messages":[{"role":"user","content":"Hi"}]}`,
			wantKept: `null`,
		},
		{
			name:       "plain text blocks still keep their block form",
			body:       `{"model":"claude-sonnet-4-5","system":[{"type":"text","text":"One."},{"type":"text","text":"Two."}],"messages":[]}`,
			wantSystem: "One.\n\nTwo.",
			wantKept:   `[{"type":"text","text":"One."},{"type":"text","text":"Two."}]`,
		},
		{
			name: "no system, string content, a message without content and pretty printing",
			body: `{
				"model": "claude-sonnet-4-5",
				"messages": [
					{"role": "user", "content": "What is 2 + 2?"},
					{"role": "assistant"}
				],
				"max_tokens": 16
			}`,
		},
		{
			name: "members a newer API adds pass through params",
			body: `{"model":"claude-sonnet-4-5","messages":[{"content":[{"type":"text","text":"x","future":{"a":[1,2.50,true]}}],"role":"user"}],"future_param":{"nested":[1e3,"<&>"]}}`,
		},
	}
	var c anthropic.Codec
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
			back, err := c.DenormalizeRequest(req)
			if err != nil {
				t.Fatalf("DenormalizeRequest: %v", err)
			}
			assertJSONEqual(t, back, []byte(tt.body))
			again, err := c.NormalizeRequest(back)
			if err != nil {
				t.Fatalf("NormalizeRequest of the rebuilt body: %v", err)
			}
			if !reflect.DeepEqual(again, req) {
				t.Fatalf("neutral request changed over a wire round trip\n got: %+v\nwant: %+v", again, req)
			}
		})
	}
}

func TestSystemOverridesReachTheWire(t *testing.T) {
	oneBlock := []sdk.TextBlockParam{{Text: "Old prompt.", CacheControl: sdk.NewCacheControlEphemeralParam()}}
	twoBlocks := []sdk.TextBlockParam{{Text: "Old."}, {Text: "Prompt."}}
	tests := []struct {
		name       string
		system     []sdk.TextBlockParam
		override   string
		wantSystem string // the wire system member; "" when it must be absent
	}{
		{
			name:       "a lone text block takes the new text and keeps its cache breakpoint",
			system:     oneBlock,
			override:   "New prompt.",
			wantSystem: `[{"text":"New prompt.","cache_control":{"type":"ephemeral"},"type":"text"}]`,
		},
		{
			name:       "several blocks collapse into a plain string",
			system:     twoBlocks,
			override:   "New prompt.",
			wantSystem: `"New prompt."`,
		},
		{
			name:     "an empty override removes the system prompt",
			system:   oneBlock,
			override: "",
		},
		{
			name:       "a request without a system prompt gains one",
			override:   "New prompt.",
			wantSystem: `"New prompt."`,
		},
	}
	var c anthropic.Codec
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := minimalParams()
			p.System = tt.system
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
			var wire map[string]json.RawMessage
			if err := json.Unmarshal(body, &wire); err != nil {
				t.Fatal(err)
			}
			if got := string(wire["system"]); got != tt.wantSystem {
				t.Errorf("system = %s, want %s", got, tt.wantSystem)
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

func TestFingerprintsIgnoreVolatileMembers(t *testing.T) {
	var c anthropic.Codec
	normalized := func(t *testing.T, p sdk.MessageNewParams, stream bool) session.Request {
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

	t.Run("metadata and stream do not change the stripped request or its fingerprint", func(t *testing.T) {
		a := minimalParams()
		a.Metadata = sdk.MetadataParam{UserID: sdk.String("user-1")}
		b := minimalParams()
		b.Metadata = sdk.MetadataParam{UserID: sdk.String("user-2")}
		ra, rb := normalized(t, a, false), normalized(t, b, true)
		if reflect.DeepEqual(ra, rb) {
			t.Fatal("the requests should differ before stripping")
		}
		sa, sb := c.StripVolatile(ra), c.StripVolatile(rb)
		if !reflect.DeepEqual(sa, sb) {
			t.Fatalf("stripped requests differ\n%+v\n%+v", sa, sb)
		}
		if fp(t, sa, fingerprint.Strict) != fp(t, sb, fingerprint.Strict) {
			t.Fatal("strict fingerprints of the stripped requests differ")
		}
	})

	t.Run("structural mode masks sampling parameters and budgets but not the prompt", func(t *testing.T) {
		a := minimalParams()
		a.Thinking = sdk.ThinkingConfigParamOfEnabled(1024)
		a.SetExtraFields(map[string]any{"temperature": 0.0, "top_p": 0.9, "top_k": 5})
		b := minimalParams()
		b.MaxTokens = 2048
		b.Thinking = sdk.ThinkingConfigParamOfEnabled(1536)
		b.SetExtraFields(map[string]any{"temperature": 1.0, "top_p": 0.5, "top_k": 50})
		ra, rb := normalized(t, a, false), normalized(t, b, false)
		if fp(t, ra, fingerprint.Strict) == fp(t, rb, fingerprint.Strict) {
			t.Fatal("strict fingerprints should tell the requests apart")
		}
		if fp(t, ra, fingerprint.Structural) != fp(t, rb, fingerprint.Structural) {
			t.Fatal("structural fingerprints differ")
		}
		other := minimalParams()
		other.Messages = []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("Goodbye"))}
		other.Thinking = a.Thinking
		other.SetExtraFields(map[string]any{"temperature": 0.0, "top_p": 0.9, "top_k": 5})
		if fp(t, normalized(t, other, false), fingerprint.Structural) == fp(t, ra, fingerprint.Structural) {
			t.Fatal("structural fingerprints must still see a different prompt")
		}
	})
}
