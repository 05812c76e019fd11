package openai_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// The matcher and the fork engine take the codec as a replay.Codec.
var _ replay.Codec = openai.Codec{}

func TestCodecIsNamedAfterItsProvider(t *testing.T) {
	if got := (openai.Codec{}).Name(); got != "openai" || openai.Provider != "openai" {
		t.Fatalf("Name() = %q", got)
	}
}

func TestStripVolatile(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	tests := []struct {
		name       string
		params     map[string]json.RawMessage
		wantParams map[string]json.RawMessage
	}{
		{
			name: "drops transport, caller identity and storage members and keeps the rest",
			params: map[string]json.RawMessage{
				"stream": raw(`true`), "stream_options": raw(`{"include_usage":true}`), "user": raw(`"u"`),
				"safety_identifier": raw(`"h"`), "prompt_cache_key": raw(`"s"`), "metadata": raw(`{"trace":"1"}`), "store": raw(`true`),
				"tools": raw(`[]`), "temperature": raw(`0.2`), "system": raw(`{"role":"developer","content":"x"}`),
			},
			wantParams: map[string]json.RawMessage{"tools": raw(`[]`), "temperature": raw(`0.2`), "system": raw(`{"role":"developer","content":"x"}`)},
		},
		{
			name:   "leaves no empty params behind",
			params: map[string]json.RawMessage{"stream": raw(`false`)},
		},
		{
			name: "a request without params stays without",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := session.Request{Model: "m", Params: tt.params}
			before := len(tt.params)
			got := openai.Codec{}.StripVolatile(req)
			if diff := cmp.Diff(tt.wantParams, got.Params); diff != "" {
				t.Errorf("Params (-want +got):\n%s", diff)
			}
			if len(tt.params) != before {
				t.Error("StripVolatile modified the caller's params")
			}
		})
	}
}

func TestVolatilePathsMaskSamplingAndBudgets(t *testing.T) {
	paths := openai.Codec{}.VolatilePaths()
	for _, p := range []string{"params.temperature", "params.top_p", "params.seed", "params.max_tokens", "params.max_completion_tokens", "params.reasoning_effort"} {
		if !slices.Contains(paths, p) {
			t.Errorf("VolatilePaths() lacks %s", p)
		}
	}
	for _, p := range paths {
		switch p {
		case "params.stream", "params.tools", "params.tool_choice", "params.response_format", "params.n", "params.system", "messages", "system":
			t.Errorf("VolatilePaths() masks %s, which says what is asked", p)
		}
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		resp session.Response
		want *session.Usage
	}{
		{
			name: "the neutral usage when the response has one",
			resp: session.Response{Usage: &session.Usage{InputTokens: 7, OutputTokens: 3}, Raw: json.RawMessage(`{"usage":{"prompt_tokens":1,"completion_tokens":1}}`)},
			want: &session.Usage{InputTokens: 7, OutputTokens: 3},
		},
		{
			name: "the wire usage in raw otherwise, cached tokens being part of the prompt already",
			resp: session.Response{Raw: json.RawMessage(`{"usage":{"prompt_tokens":2050,"completion_tokens":10,"total_tokens":2060,"prompt_tokens_details":{"cached_tokens":2048}}}`)},
			want: &session.Usage{InputTokens: 2050, OutputTokens: 10, CacheReadInputTokens: 2048},
		},
		{
			name: "nothing when neither says",
			resp: session.Response{Raw: json.RawMessage(`{"id":"chatcmpl-1","usage":null}`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := openai.Codec{}.Usage(tt.resp)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("Usage (-want +got):\n%s", diff)
			}
			if got != nil && got == tt.resp.Usage {
				t.Fatal("Usage returned the response's own pointer")
			}
		})
	}
}
