package anthropic_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/codec/anthropic"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// sse joins events into a text/event-stream body in the API's layout.
func sse(events ...string) string { return strings.Join(events, "\n\n") + "\n\n" }

func event(name, data string) string { return "event: " + name + "\ndata: " + data }

// Streams in the shape the API sends them (see the SDK's MessageStreamEventUnion), spacing included.
var (
	toolUseStream = sse(
		event("message_start", `{"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"output_tokens":2,"service_tier":"standard"}}}`),
		event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		event("ping", `{"type": "ping"}`),
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay"}}`),
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", let me check"}}`),
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the weather in San Francisco <&> for you."}}`),
		event("content_block_stop", `{"type":"content_block_stop","index":0}`),
		event("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}`),
		event("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`),
		event("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}`),
		event("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisco, CA\""}}`),
		event("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":", \"unit\": \"fahrenheit\"}"}}`),
		event("content_block_stop", `{"type":"content_block_stop","index":1}`),
		event("ping", `{"type": "ping"}`),
		event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}`),
		event("message_stop", `{"type":"message_stop"}`),
	)

	thinkingStream = sse(
		event("message_start", `{"type": "message_start", "message": {"id": "msg_01ThinkingAndCitations", "type": "message", "role": "assistant", "model": "claude-opus-4-1", "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 1200, "output_tokens": 1}}}`),
		event("content_block_start", `{"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}`),
		event("content_block_delta", `{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "The document says"}}`),
		event("content_block_delta", `{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": " the grass is green."}}`),
		event("content_block_delta", `{"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}}`),
		event("content_block_stop", `{"type": "content_block_stop", "index": 0}`),
		event("content_block_start", `{"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "", "citations": []}}`),
		event("content_block_delta", `{"type": "content_block_delta", "index": 1, "delta": {"type": "citations_delta", "citation": {"type": "char_location", "cited_text": "The grass is green.", "document_index": 0, "document_title": "Facts", "start_char_index": 0, "end_char_index": 20}}}`),
		event("content_block_delta", `{"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "The grass is green."}}`),
		event("content_block_stop", `{"type": "content_block_stop", "index": 1}`),
		event("message_delta", `{"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"input_tokens": 1200, "cache_read_input_tokens": 300, "output_tokens": 160}}`),
		event("message_stop", `{"type": "message_stop"}`),
	)

	futureEventStream = sse(
		event("message_start", `{"type":"message_start","message":{"id":"msg_01Future","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`),
		event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		event("content_block_annotation", `{"type":"content_block_annotation","index":0,"note":{"kind":"future"}}`),
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"sparkle_delta","sparkle":"*"}}`),
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Still here."}}`),
		event("content_block_stop", `{"type":"content_block_stop","index":0}`),
		event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null,"future_detail":{"x":1}},"usage":{"output_tokens":4}}`),
		event("message_stop", `{"type":"message_stop"}`),
	)

	overloadedStream = sse(
		event("message_start", `{"type":"message_start","message":{"id":"msg_01Overloaded","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`),
		event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Partial"}}`),
		event("error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`),
	)
)

func TestStreamsRebuildForTheSDK(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantEvents []string
		wantStop   string
		wantUsage  *session.Usage
		// wantContent is the assembled content, as JSON.
		wantContent string
		complete    bool // the stream reached message_stop
	}{
		{
			name: "text and a tool call streamed in pieces, with pings",
			body: toolUseStream,
			wantEvents: []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
				"content_block_delta", "content_block_stop", "content_block_start", "content_block_delta", "content_block_delta",
				"content_block_delta", "content_block_delta", "content_block_stop", "ping", "message_delta", "message_stop"},
			wantStop:  "tool_use",
			wantUsage: &session.Usage{InputTokens: 472 + 2048, OutputTokens: 89, CacheReadInputTokens: 2048},
			wantContent: `[{"type":"text","text":"Okay, let me check the weather in San Francisco <&> for you."},` +
				`{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{"location":"San Francisco, CA","unit":"fahrenheit"}}]`,
			complete: true,
		},
		{
			name: "thinking with a signature and a cited text block",
			body: thinkingStream,
			wantEvents: []string{"message_start", "content_block_start", "content_block_delta", "content_block_delta",
				"content_block_delta", "content_block_stop", "content_block_start", "content_block_delta", "content_block_delta",
				"content_block_stop", "message_delta", "message_stop"},
			wantStop:  "end_turn",
			wantUsage: &session.Usage{InputTokens: 1200 + 300, OutputTokens: 160, CacheReadInputTokens: 300},
			wantContent: `[{"type":"thinking","thinking":"The document says the grass is green.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"},` +
				`{"type":"text","text":"The grass is green.","citations":[{"type":"char_location","cited_text":"The grass is green.","document_index":0,"document_title":"Facts","start_char_index":0,"end_char_index":20}]}]`,
			complete: true,
		},
		{
			name: "events and deltas of types the codec does not know pass through",
			body: futureEventStream,
			wantEvents: []string{"message_start", "content_block_start", "content_block_annotation", "content_block_delta",
				"content_block_delta", "content_block_stop", "message_delta", "message_stop"},
			wantStop:    "end_turn",
			wantUsage:   &session.Usage{InputTokens: 5, OutputTokens: 4},
			wantContent: `[{"type":"text","text":"Still here."}]`,
			complete:    true,
		},
		{
			name:        "an error event ends the stream where the server ended it",
			body:        overloadedStream,
			wantEvents:  []string{"message_start", "content_block_start", "content_block_delta", "error"},
			wantUsage:   &session.Usage{InputTokens: 10, OutputTokens: 1},
			wantContent: `[{"type":"text","text":"Partial"}]`,
		},
	}
	var c anthropic.Codec
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, chunks, err := c.NormalizeStream([]byte(tt.body))
			if err != nil {
				t.Fatalf("NormalizeStream: %v", err)
			}
			if got := chunkEvents(t, chunks); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("chunk events = %v\nwant %v", got, tt.wantEvents)
			}
			assertJSONEqual(t, resp.Content, []byte(tt.wantContent))
			if resp.StopReason != tt.wantStop {
				t.Errorf("StopReason = %q, want %q", resp.StopReason, tt.wantStop)
			}
			if !reflect.DeepEqual(resp.Usage, tt.wantUsage) {
				t.Errorf("Usage = %+v, want %+v", resp.Usage, tt.wantUsage)
			}

			original := consumeStream(t, []byte(tt.body))
			rebuilt := c.RebuildStream(chunks)
			assertSameStream(t, consumeStream(t, rebuilt), original)

			// The assembled response is the Message the SDK accumulates from the stream.
			final, err := c.DenormalizeResponse(resp)
			if err != nil {
				t.Fatalf("DenormalizeResponse: %v", err)
			}
			decoded := newMessage(t, final)
			if g, w := typedView(t, decoded), typedView(t, &original.acc); g != w {
				t.Fatalf("assembled response differs from the SDK's accumulation\n got: %s\nwant: %s", g, w)
			}
			if tt.complete {
				// The SDK brings its raw JSON up to date only at message_stop.
				assertJSONEqual(t, final, []byte(original.acc.RawJSON()))
			}

			again, againChunks, err := c.NormalizeStream(rebuilt)
			if err != nil {
				t.Fatalf("NormalizeStream of the rebuilt stream: %v", err)
			}
			if !reflect.DeepEqual(againChunks, chunks) || !reflect.DeepEqual(again, resp) {
				t.Fatal("normalizing the rebuilt stream does not give the same chunks and response")
			}
		})
	}
}

func chunkEvents(t *testing.T, chunks []session.Chunk) []string {
	t.Helper()
	names := make([]string, len(chunks))
	for i, ch := range chunks {
		var d struct {
			Event string          `json:"event"`
			Data  json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(ch.Data, &d); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if ch.OffsetMs != 0 {
			t.Errorf("chunk %d has offset %d; offsets are the caller's", i, ch.OffsetMs)
		}
		if !json.Valid(d.Data) {
			t.Errorf("chunk %d data is not JSON: %s", i, ch.Data)
		}
		names[i] = d.Event
	}
	return names
}

func TestChunksHoldEachEventByNameWithItsData(t *testing.T) {
	_, chunks, err := anthropic.Codec{}.NormalizeStream([]byte(toolUseStream))
	if err != nil {
		t.Fatal(err)
	}
	assertJSONEqual(t, chunks[2].Data, []byte(`{"event":"ping","data":{"type":"ping"}}`))
	if !strings.Contains(string(chunks[5].Data), `San Francisco <&> for you`) {
		t.Errorf("chunk data was escaped: %s", chunks[5].Data)
	}
	assertJSONEqual(t, chunks[9].Data, []byte(`{"event":"content_block_delta","data":{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}}`))
}

// The SSE format allows layouts the API does not use; the SDK decodes them alike, and so must the codec.
func TestStreamLayoutsTheSDKAcceptsNormalizeAlike(t *testing.T) {
	canonical := sse(
		event("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}`),
		event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`),
		event("content_block_stop", `{"type":"content_block_stop","index":0}`),
		event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`),
		event("message_stop", `{"type":"message_stop"}`),
	)
	tests := []struct {
		name string
		body string
	}{
		{
			name: "CRLF line endings",
			body: strings.ReplaceAll(canonical, "\n", "\r\n"),
		},
		{
			name: "comments, id and retry fields, no space after the colon, extra blank lines",
			body: ": keep-alive\n\n\n" + strings.ReplaceAll(strings.ReplaceAll(canonical, "data: ", "id: 7\ndata:"), "event: ", ": note\nretry: 10\nevent:"),
		},
		{
			name: "data split over several lines",
			body: strings.Replace(canonical, `data: {"type":"message_stop"}`, "data: {\ndata:   \"type\": \"message_stop\"\ndata: }", 1),
		},
	}
	var c anthropic.Codec
	wantResp, wantChunks, err := c.NormalizeStream([]byte(canonical))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, chunks, err := c.NormalizeStream([]byte(tt.body))
			if err != nil {
				t.Fatalf("NormalizeStream: %v", err)
			}
			if !reflect.DeepEqual(chunks, wantChunks) || !reflect.DeepEqual(resp, wantResp) {
				t.Fatalf("normalized differently from the canonical layout\n got: %+v", resp)
			}
			assertSameStream(t, consumeStream(t, []byte(tt.body)), consumeStream(t, []byte(canonical)))
		})
	}
}

func TestStreamsCutBetweenEventsAssembleWhatArrived(t *testing.T) {
	cut := toolUseStream[:strings.Index(toolUseStream, "event: message_delta")]
	resp, chunks, err := anthropic.Codec{}.NormalizeStream([]byte(cut))
	if err != nil {
		t.Fatalf("NormalizeStream: %v", err)
	}
	if len(chunks) != 14 || resp.StopReason != "" {
		t.Fatalf("got %d chunks and stop reason %q, want 14 and none", len(chunks), resp.StopReason)
	}
	if got := blockTypes(t, resp.Content); !reflect.DeepEqual(got, []string{"text", "tool_use"}) {
		t.Fatalf("content block types = %v", got)
	}
}
