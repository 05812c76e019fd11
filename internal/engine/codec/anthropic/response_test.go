package anthropic_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/codec/anthropic"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Message bodies in the shape api.anthropic.com returns them (see the SDK's Message type), formatted
// as the server formats them.
const (
	toolUseMessage = `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",` +
		`"content":[{"type":"text","text":"I'll look up the weather in Paris <now> & report back."},` +
		`{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"location":"Paris, France","unit":"celsius"}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"stop_details":null,"container":null,` +
		`"usage":{"input_tokens":412,"cache_creation_input_tokens":1536,"cache_read_input_tokens":2048,` +
		`"cache_creation":{"ephemeral_5m_input_tokens":1536,"ephemeral_1h_input_tokens":0},"output_tokens":87,"service_tier":"standard"}}`

	stopSequenceMessage = `{
  "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
  "type": "message",
  "role": "assistant",
  "model": "claude-haiku-4-5",
  "content": [
    {"type": "thinking", "thinking": "The user wants a list.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
    {"type": "text", "text": "1. Apples\n2. Pears\n", "citations": null}
  ],
  "stop_reason": "stop_sequence",
  "stop_sequence": "</list>",
  "usage": {"input_tokens": 25, "output_tokens": 31},
  "future_member": {"kept": [1, 2.50, true]}
}`
)

func TestResponsesRoundTripThroughTheSDK(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantStop  string
		wantUsage session.Usage
		wantTypes []string
	}{
		{
			name:      "text and tool use with cache tokens counted as input",
			body:      toolUseMessage,
			wantStop:  "tool_use",
			wantUsage: session.Usage{InputTokens: 412 + 1536 + 2048, OutputTokens: 87, CacheCreationInputTokens: 1536, CacheReadInputTokens: 2048},
			wantTypes: []string{"text", "tool_use"},
		},
		{
			name:      "thinking, a stop sequence and members a newer API adds",
			body:      stopSequenceMessage,
			wantStop:  "stop_sequence",
			wantUsage: session.Usage{InputTokens: 25, OutputTokens: 31},
			wantTypes: []string{"thinking", "text"},
		},
	}
	var c anthropic.Codec
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			original := newMessage(t, []byte(tt.body))

			resp, err := c.NormalizeResponse([]byte(tt.body))
			if err != nil {
				t.Fatalf("NormalizeResponse: %v", err)
			}
			if resp.StopReason != tt.wantStop {
				t.Errorf("StopReason = %q, want %q", resp.StopReason, tt.wantStop)
			}
			if resp.Usage == nil || *resp.Usage != tt.wantUsage {
				t.Errorf("Usage = %+v, want %+v", resp.Usage, tt.wantUsage)
			}
			if got := blockTypes(t, resp.Content); !reflect.DeepEqual(got, tt.wantTypes) {
				t.Errorf("content block types = %v, want %v", got, tt.wantTypes)
			}
			if strings.Contains(string(resp.Raw), `"content"`) {
				t.Errorf("Raw repeats the content: %s", resp.Raw)
			}

			rebuilt, err := c.DenormalizeResponse(resp)
			if err != nil {
				t.Fatalf("DenormalizeResponse: %v", err)
			}
			assertJSONEqual(t, rebuilt, []byte(tt.body))
			assertSameMessage(t, newMessage(t, rebuilt), original)

			again, err := c.NormalizeResponse(rebuilt)
			if err != nil {
				t.Fatalf("NormalizeResponse of the rebuilt body: %v", err)
			}
			if !reflect.DeepEqual(again, resp) {
				t.Fatalf("neutral response changed over a wire round trip\n got: %+v\nwant: %+v", again, resp)
			}
		})
	}
}

func blockTypes(t *testing.T, content json.RawMessage) []string {
	t.Helper()
	var blocks []struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(content, &blocks); err != nil {
		t.Fatalf("content is not a block array: %v\n%s", err, content)
	}
	types := make([]string, len(blocks))
	for i, b := range blocks {
		types[i] = b.Type
	}
	return types
}

func TestEditedResponsesReachTheSDKAsEdited(t *testing.T) {
	var c anthropic.Codec
	resp, err := c.NormalizeResponse([]byte(toolUseMessage))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a new stop reason and usage replace the recorded ones", func(t *testing.T) {
		edited := resp
		edited.StopReason = "end_turn"
		edited.Usage = &session.Usage{InputTokens: 100, OutputTokens: 5}
		body, err := c.DenormalizeResponse(edited)
		if err != nil {
			t.Fatal(err)
		}
		msg := newMessage(t, body)
		if msg.StopReason != "end_turn" || msg.Usage.InputTokens != 100 || msg.Usage.OutputTokens != 5 ||
			msg.Usage.CacheReadInputTokens != 0 || msg.Usage.CacheCreationInputTokens != 0 {
			t.Fatalf("SDK sees stop %q usage %+v", msg.StopReason, msg.Usage)
		}
		if msg.ID != "msg_01XFDUDYJgAACzvnptvVoYEL" || msg.Usage.ServiceTier != "standard" {
			t.Fatalf("the rest of the envelope was lost: id %q, service tier %q", msg.ID, msg.Usage.ServiceTier)
		}
		if again, _ := c.NormalizeResponse(body); !reflect.DeepEqual(again.Usage, edited.Usage) || again.StopReason != "end_turn" {
			t.Fatalf("normalizing the edited body gives %+v", again)
		}
	})

	t.Run("an edited usage with a cache split reaches the SDK split", func(t *testing.T) {
		edited := resp
		edited.Usage = &session.Usage{InputTokens: 100, OutputTokens: 5, CacheCreationInputTokens: 10, CacheReadInputTokens: 60}
		body, err := c.DenormalizeResponse(edited)
		if err != nil {
			t.Fatal(err)
		}
		if u := newMessage(t, body).Usage; u.InputTokens != 30 || u.CacheCreationInputTokens != 10 || u.CacheReadInputTokens != 60 || u.OutputTokens != 5 {
			t.Fatalf("SDK sees usage %+v, want 30 uncached + 10 written + 60 read", u)
		}
		if again, _ := c.NormalizeResponse(body); !reflect.DeepEqual(again.Usage, edited.Usage) {
			t.Fatalf("normalizing the edited body gives usage %+v", again.Usage)
		}
	})

	t.Run("a usage recorded without its cache split serves the recorded bytes", func(t *testing.T) {
		old := resp
		u := *resp.Usage
		u.CacheCreationInputTokens, u.CacheReadInputTokens = 0, 0
		old.Usage = &u
		body, err := c.DenormalizeResponse(old)
		if err != nil {
			t.Fatal(err)
		}
		want, err := c.DenormalizeResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		if string(body) != string(want) {
			t.Fatalf("an old recording's usage was rewritten:\n got %s\nwant %s", body, want)
		}
	})

	t.Run("a cleared stop reason is sent as null", func(t *testing.T) {
		edited := resp
		edited.StopReason = ""
		body, err := c.DenormalizeResponse(edited)
		if err != nil {
			t.Fatal(err)
		}
		if msg := newMessage(t, body); msg.StopReason != "" || msg.JSON.StopReason.Raw() != "null" {
			t.Fatalf("stop_reason = %q (raw %s), want null", msg.StopReason, msg.JSON.StopReason.Raw())
		}
	})

	t.Run("a stub without raw decodes as an assistant message", func(t *testing.T) {
		stub := session.Response{
			Content:    json.RawMessage(`[{"type":"text","text":"stubbed answer"}]`),
			StopReason: "end_turn",
			Usage:      &session.Usage{InputTokens: 3, OutputTokens: 2},
		}
		body, err := c.DenormalizeResponse(stub)
		if err != nil {
			t.Fatal(err)
		}
		msg := newMessage(t, body)
		if msg.Role != "assistant" || msg.Type != "message" || len(msg.Content) != 1 ||
			msg.Content[0].Text != "stubbed answer" || msg.StopReason != "end_turn" || msg.Usage.OutputTokens != 2 {
			t.Fatalf("SDK decoded %s", typedView(t, msg))
		}
	})
}
