package anthropic_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/codec/anthropic"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

func TestSynthesizedStreamsAccumulateToTheResponseInTheSDK(t *testing.T) {
	var c anthropic.Codec
	fromStream := func(body string) session.Response {
		resp, _, err := c.NormalizeStream([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	fromMessage := func(body string) session.Response {
		resp, err := c.NormalizeResponse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	tests := []struct {
		name       string
		resp       session.Response
		wantEvents []string
	}{
		{
			name: "text and a tool call",
			resp: fromStream(toolUseStream),
			wantEvents: []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop",
				"content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"},
		},
		{
			name: "thinking with a signature and a cited text block",
			resp: fromStream(thinkingStream),
			wantEvents: []string{"message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
				"content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"},
		},
		{
			name: "a stop sequence, blocks without deltas and an empty tool input",
			resp: fromMessage(`{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
				`{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},` +
				`{"type":"text","text":""},{"type":"tool_use","id":"toolu_2","name":"now","input":{}}],` +
				`"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":3,"cache_read_input_tokens":4,"output_tokens":5}}`),
			wantEvents: []string{"message_start", "content_block_start", "content_block_stop", "content_block_start", "content_block_stop",
				"content_block_start", "content_block_stop", "message_delta", "message_stop"},
		},
		{
			name:       "no content and no envelope",
			resp:       session.Response{Content: []byte(`[]`), StopReason: "end_turn"},
			wantEvents: []string{"message_start", "message_delta", "message_stop"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := c.SynthesizeStream(tt.resp)
			if err != nil {
				t.Fatal(err)
			}
			if got := chunkEvents(t, chunks); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events = %v\nwant %v", got, tt.wantEvents)
			}
			body, err := c.DenormalizeResponse(tt.resp)
			if err != nil {
				t.Fatal(err)
			}
			streamed := consumeStream(t, c.RebuildStream(chunks))
			if streamed.err != nil {
				t.Fatalf("the SDK failed the stream: %v", streamed.err)
			}
			assertSameMessage(t, &streamed.acc, newMessage(t, body))

			again, _, err := c.NormalizeStream(c.RebuildStream(chunks))
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.resp.Raw) == 0 {
				again.Raw = nil // the stream has an envelope where the response had none; the SDK saw the same Message
			}
			if !reflect.DeepEqual(again, tt.resp) {
				t.Fatalf("the stream assembles to\n%+v\nwant\n%+v", again, tt.resp)
			}
		})
	}
}

func TestSynthesizeStreamRejectsContentThatIsNotBlocks(t *testing.T) {
	for _, content := range []string{`[1]`, `{"type":"text"}`, `not json`} {
		_, err := anthropic.Codec{}.SynthesizeStream(session.Response{Content: []byte(content)})
		var ce *anthropic.CodecError
		if !errors.As(err, &ce) {
			t.Errorf("SynthesizeStream(%s) error = %v, want a *CodecError", content, err)
		}
	}
}
