package anthropic_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/codec/anthropic"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// The matcher and the fork engine take the codec as a replay.Codec.
var _ replay.Codec = anthropic.Codec{}

func TestCodecIsNamedAfterItsProvider(t *testing.T) {
	if got := (anthropic.Codec{}).Name(); got != "anthropic" || anthropic.Provider != "anthropic" {
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
			name:       "drops stream and metadata and keeps the rest",
			params:     map[string]json.RawMessage{"stream": raw(`true`), "metadata": raw(`{"user_id":"u"}`), "max_tokens": raw(`64`)},
			wantParams: map[string]json.RawMessage{"max_tokens": raw(`64`)},
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
			got := anthropic.Codec{}.StripVolatile(req)
			if !reflect.DeepEqual(got.Params, tt.wantParams) {
				t.Errorf("Params = %v, want %v", got.Params, tt.wantParams)
			}
			if len(tt.params) != before {
				t.Error("StripVolatile modified the caller's params")
			}
		})
	}
}

func TestVolatilePathsMaskSamplingAndBudgets(t *testing.T) {
	paths := anthropic.Codec{}.VolatilePaths()
	for _, p := range []string{"params.temperature", "params.top_p", "params.top_k", "params.max_tokens", "params.thinking.budget_tokens"} {
		if !slices.Contains(paths, p) {
			t.Errorf("VolatilePaths() lacks %s", p)
		}
	}
	for _, p := range paths {
		if p == "params.stream" || p == "params.metadata" || p == "messages" || p == "system" {
			t.Errorf("VolatilePaths() masks %s, which is not a sampling knob", p)
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
			resp: session.Response{Usage: &session.Usage{InputTokens: 7, OutputTokens: 3}, Raw: json.RawMessage(`{"usage":{"input_tokens":1,"output_tokens":1}}`)},
			want: &session.Usage{InputTokens: 7, OutputTokens: 3},
		},
		{
			name: "the wire usage in raw otherwise, cache tokens counted as input",
			resp: session.Response{Raw: json.RawMessage(`{"usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":4}}`)},
			want: &session.Usage{InputTokens: 60, OutputTokens: 4, CacheCreationInputTokens: 20, CacheReadInputTokens: 30},
		},
		{
			name: "nothing when neither says",
			resp: session.Response{Raw: json.RawMessage(`{"id":"msg_1"}`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := anthropic.Codec{}.Usage(tt.resp)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Usage = %+v, want %+v", got, tt.want)
			}
			if got != nil && got == tt.resp.Usage {
				t.Fatal("Usage returned the response's own pointer")
			}
		})
	}
}
