package openai_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/openai/openai-go/v3"

	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Completions in the shape the API sends them (see the SDK's ChatCompletion).
var (
	textCompletion = `{
  "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "gpt-4.1-2025-04-14",
  "choices": [
    {
      "index": 0,
      "message": {"role": "assistant", "content": "Paris is sunny <and> 18°C & calm.", "refusal": null, "annotations": []},
      "logprobs": null,
      "finish_reason": "stop"
    }
  ],
  "usage": {
    "prompt_tokens": 2050, "completion_tokens": 10, "total_tokens": 2060,
    "prompt_tokens_details": {"cached_tokens": 2048, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_a1b2c3"
}`

	toolCallCompletion = `{"id":"chatcmpl-tools","object":"chat.completion","created":1741569953,"model":"gpt-4o-2024-08-06",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_paris","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Paris, France\",\"unit\":\"celsius\"}"}},` +
		`{"id":"call_oslo","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Oslo, Norway\",\"unit\":\"celsius\"}"}}],` +
		`"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":82,"completion_tokens":51,"total_tokens":133,"completion_tokens_details":{"reasoning_tokens":12}},"service_tier":"default","system_fingerprint":"fp_tools"}`

	refusalCompletion = `{"id":"chatcmpl-refusal","object":"chat.completion","created":1741569954,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27}}`

	twoChoiceCompletion = `{"id":"chatcmpl-two","object":"chat.completion","created":1741569955,"model":"gpt-4o-mini","choices":[` +
		`{"index":0,"message":{"role":"assistant","content":"Yes."},"logprobs":{"content":[{"token":"Yes","logprob":-0.01,"bytes":[89,101,115],"top_logprobs":[]},{"token":".","logprob":0,"bytes":[46],"top_logprobs":[]}],"refusal":null},"finish_reason":"stop"},` +
		`{"index":1,"message":{"role":"assistant","content":"No."},"logprobs":{"content":[{"token":"No","logprob":-4.2,"bytes":[78,111],"top_logprobs":[]},{"token":".","logprob":0,"bytes":[46],"top_logprobs":[]}],"refusal":null},"finish_reason":"length"}],` +
		`"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13},"future_member":{"x":1}}`
)

func TestResponsesRoundTripThroughTheSDK(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantStop  string
		wantUsage *session.Usage
		check     func(t *testing.T, cc *sdk.ChatCompletion)
	}{
		{
			name:      "text with cached prompt tokens, a service tier and a system fingerprint",
			body:      textCompletion,
			wantStop:  "stop",
			wantUsage: &session.Usage{InputTokens: 2050, OutputTokens: 10, CacheReadInputTokens: 2048},
			check: func(t *testing.T, cc *sdk.ChatCompletion) {
				if got := cc.Choices[0].Message.Content; got != "Paris is sunny <and> 18°C & calm." {
					t.Errorf("content = %q", got)
				}
				if cc.Usage.PromptTokensDetails.CachedTokens != 2048 || cc.ServiceTier != "default" || cc.SystemFingerprint != "fp_a1b2c3" {
					t.Errorf("usage details, service tier or fingerprint lost: %+v %q %q", cc.Usage.PromptTokensDetails, cc.ServiceTier, cc.SystemFingerprint)
				}
			},
		},
		{
			name:      "parallel tool calls",
			body:      toolCallCompletion,
			wantStop:  "tool_calls",
			wantUsage: &session.Usage{InputTokens: 82, OutputTokens: 51},
			check: func(t *testing.T, cc *sdk.ChatCompletion) {
				wantToolCalls(t, cc.Choices[0].Message.ToolCalls, []toolCall{
					{"call_paris", "get_weather", map[string]any{"location": "Paris, France", "unit": "celsius"}},
					{"call_oslo", "get_weather", map[string]any{"location": "Oslo, Norway", "unit": "celsius"}},
				})
				if cc.Usage.CompletionTokensDetails.ReasoningTokens != 12 {
					t.Errorf("reasoning tokens = %d", cc.Usage.CompletionTokensDetails.ReasoningTokens)
				}
			},
		},
		{
			name:      "a refusal",
			body:      refusalCompletion,
			wantStop:  "stop",
			wantUsage: &session.Usage{InputTokens: 20, OutputTokens: 7},
			check: func(t *testing.T, cc *sdk.ChatCompletion) {
				if got := cc.Choices[0].Message.Refusal; got != "I can't help with that." {
					t.Errorf("refusal = %q", got)
				}
			},
		},
		{
			name:      "two choices with log probabilities and a member a newer API adds",
			body:      twoChoiceCompletion,
			wantStop:  "stop",
			wantUsage: &session.Usage{InputTokens: 9, OutputTokens: 4},
			check: func(t *testing.T, cc *sdk.ChatCompletion) {
				if len(cc.Choices) != 2 || cc.Choices[1].Message.Content != "No." || cc.Choices[1].FinishReason != "length" {
					t.Fatalf("choices = %+v", cc.Choices)
				}
				if got := cc.Choices[1].Logprobs.Content[0].Logprob; got != -4.2 {
					t.Errorf("second choice's first logprob = %v", got)
				}
			},
		},
	}
	var c openai.Codec
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := c.NormalizeResponse([]byte(tt.body))
			if err != nil {
				t.Fatalf("NormalizeResponse: %v", err)
			}
			if resp.StopReason != tt.wantStop {
				t.Errorf("StopReason = %q, want %q", resp.StopReason, tt.wantStop)
			}
			if diff := cmp.Diff(tt.wantUsage, resp.Usage); diff != "" {
				t.Errorf("Usage (-want +got):\n%s", diff)
			}
			var msg struct {
				Role string `json:"role"`
			}
			if err := json.Unmarshal(resp.Content, &msg); err != nil || msg.Role != "assistant" {
				t.Errorf("Content = %s, want the first choice's message", resp.Content)
			}

			back, err := c.DenormalizeResponse(resp)
			if err != nil {
				t.Fatalf("DenormalizeResponse: %v", err)
			}
			assertJSONEqual(t, back, []byte(tt.body))

			decoded := newCompletion(t, back)
			tt.check(t, decoded)
			if got := decoded.Choices[0].FinishReason; got != tt.wantStop {
				t.Errorf("the SDK decoded finish_reason %q, want %q", got, tt.wantStop)
			}
			if decoded.Usage.PromptTokens != tt.wantUsage.InputTokens || decoded.Usage.CompletionTokens != tt.wantUsage.OutputTokens {
				t.Errorf("the SDK decoded usage %+v", decoded.Usage)
			}
			original := newCompletion(t, []byte(tt.body))
			assertSameCompletion(t, decoded, original)
			assertJSONEqual(t, []byte(decoded.RawJSON()), []byte(original.RawJSON()))

			again, err := c.NormalizeResponse(back)
			if err != nil {
				t.Fatalf("NormalizeResponse of the rebuilt body: %v", err)
			}
			if diff := cmp.Diff(resp, again); diff != "" {
				t.Fatalf("neutral response changed over a wire round trip (-want +got):\n%s", diff)
			}
		})
	}
}

type toolCall struct {
	id, name string
	args     map[string]any
}

// wantToolCalls checks the tool calls an SDK user reads: ids, names and the arguments they parse.
func wantToolCalls(t *testing.T, got []sdk.ChatCompletionMessageToolCallUnion, want []toolCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d tool calls, want %d", len(got), len(want))
	}
	for i, w := range want {
		var args map[string]any
		if err := json.Unmarshal([]byte(got[i].Function.Arguments), &args); err != nil {
			t.Fatalf("tool call %d arguments %q do not parse: %v", i, got[i].Function.Arguments, err)
		}
		if got[i].ID != w.id || got[i].Function.Name != w.name || !cmp.Equal(args, w.args) {
			t.Errorf("tool call %d = %s %s %v, want %s %s %v", i, got[i].ID, got[i].Function.Name, args, w.id, w.name, w.args)
		}
	}
}

func TestEditedResponsesReachTheSDKAsEdited(t *testing.T) {
	var c openai.Codec
	recorded, err := c.NormalizeResponse([]byte(textCompletion))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		resp         session.Response
		wantContent  string
		wantStop     string
		wantUsage    sdk.CompletionUsage // the counts the SDK must see; details compared when set
		checkDetails bool
	}{
		{
			name:        "a stub without an envelope",
			resp:        session.Response{Content: json.RawMessage(`{"role":"assistant","content":"Stubbed."}`), StopReason: "stop", Usage: &session.Usage{InputTokens: 3, OutputTokens: 2}},
			wantContent: "Stubbed.",
			wantStop:    "stop",
			wantUsage:   sdk.CompletionUsage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5},
		},
		{
			name: "a new stop reason and new usage replace the recorded ones, and the stale cache count goes",
			resp: func() session.Response {
				r := recorded
				r.StopReason = "length"
				r.Usage = &session.Usage{InputTokens: 100, OutputTokens: 10}
				return r
			}(),
			wantContent:  "Paris is sunny <and> 18°C & calm.",
			wantStop:     "length",
			wantUsage:    sdk.CompletionUsage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110},
			checkDetails: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := c.DenormalizeResponse(tt.resp)
			if err != nil {
				t.Fatal(err)
			}
			cc := newCompletion(t, body)
			if len(cc.Choices) != 1 {
				t.Fatalf("%d choices, want 1: %s", len(cc.Choices), body)
			}
			if got := cc.Choices[0].Message.Content; got != tt.wantContent {
				t.Errorf("content = %q, want %q", got, tt.wantContent)
			}
			if got := cc.Choices[0].FinishReason; got != tt.wantStop {
				t.Errorf("finish_reason = %q, want %q", got, tt.wantStop)
			}
			u := cc.Usage
			if u.PromptTokens != tt.wantUsage.PromptTokens || u.CompletionTokens != tt.wantUsage.CompletionTokens || u.TotalTokens != tt.wantUsage.TotalTokens {
				t.Errorf("usage = %d/%d/%d, want %d/%d/%d", u.PromptTokens, u.CompletionTokens, u.TotalTokens,
					tt.wantUsage.PromptTokens, tt.wantUsage.CompletionTokens, tt.wantUsage.TotalTokens)
			}
			if tt.checkDetails && u.PromptTokensDetails.CachedTokens != 0 {
				t.Errorf("cached tokens = %d; the recorded 2048 no longer fit the edited prompt count", u.PromptTokensDetails.CachedTokens)
			}
		})
	}
}

// TestAnEditedCachedCountReachesTheSDK: a usage whose cached count changed is written into
// prompt_tokens_details, and one without a cached count serves an old recording's bytes unchanged.
func TestAnEditedCachedCountReachesTheSDK(t *testing.T) {
	var c openai.Codec
	recorded, err := c.NormalizeResponse([]byte(textCompletion))
	if err != nil {
		t.Fatal(err)
	}
	edited := recorded
	edited.Usage = &session.Usage{InputTokens: 100, OutputTokens: 10, CacheReadInputTokens: 64}
	body, err := c.DenormalizeResponse(edited)
	if err != nil {
		t.Fatal(err)
	}
	if u := newCompletion(t, body).Usage; u.PromptTokens != 100 || u.PromptTokensDetails.CachedTokens != 64 || u.CompletionTokens != 10 {
		t.Fatalf("SDK sees usage %+v, want 100 prompt tokens of which 64 cached", u)
	}
	if again, _ := c.NormalizeResponse(body); !reflect.DeepEqual(again.Usage, edited.Usage) {
		t.Fatalf("normalizing the edited body gives usage %+v", again.Usage)
	}

	old := recorded
	u := *recorded.Usage
	u.CacheReadInputTokens = 0
	old.Usage = &u
	got, err := c.DenormalizeResponse(old)
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.DenormalizeResponse(recorded)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("an old recording's usage was rewritten:\n got %s\nwant %s", got, want)
	}
}
