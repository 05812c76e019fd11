package anthropic_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/codec/anthropic"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

func TestInputTheCodecCannotMapIsATypedErrorThatSaysWhere(t *testing.T) {
	var c anthropic.Codec
	normalizeRequest := func(body string) func() error {
		return func() error { _, err := c.NormalizeRequest([]byte(body)); return err }
	}
	normalizeResponse := func(body string) func() error {
		return func() error { _, err := c.NormalizeResponse([]byte(body)); return err }
	}
	normalizeStream := func(body string) func() error {
		return func() error { _, _, err := c.NormalizeStream([]byte(body)); return err }
	}
	denormalizeRequest := func(req session.Request) func() error {
		return func() error { _, err := c.DenormalizeRequest(req); return err }
	}
	denormalizeResponse := func(resp session.Response) func() error {
		return func() error { _, err := c.DenormalizeResponse(resp); return err }
	}

	start := event("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`)
	textStart := event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	at := func(body, marker string) int64 { return int64(strings.Index(body, marker)) }
	cutMidEvent := toolUseStream[:strings.Index(toolUseStream, `"text":" the weather`)]
	cutBeforeBlankLine := toolUseStream[:len(toolUseStream)-1]
	unknownInvalid := sse(start, "event: annotation\ndata: {not json", event("message_stop", `{"type":"message_stop"}`))
	knownInvalid := sse(start, `event: content_block_start`+"\n"+`data: {"type":"content_block_start",`)
	deltaWithoutBlock := sse(start, event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`))
	blockOutOfOrder := sse(start, event("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`))
	indexNotNumber := sse(start, textStart, event("content_block_stop", `{"type":"content_block_stop","index":"0"}`))
	startWithoutMessage := sse(event("message_start", `{"type":"message_start"}`))

	tests := []struct {
		name       string
		call       func() error
		wantOp     string
		wantField  string
		wantOffset int64
		wantErr    error
	}{
		{"a request body that is not JSON", normalizeRequest(`{"model": x}`), "NormalizeRequest", "", 10, anthropic.ErrNotJSON},
		{"a request body that ends early", normalizeRequest(`{"model": "m",`), "NormalizeRequest", "", 14, anthropic.ErrNotJSON},
		{"an empty request body", normalizeRequest(``), "NormalizeRequest", "", 0, anthropic.ErrNotJSON},
		{"a request body that is not an object", normalizeRequest(`  ["model"]`), "NormalizeRequest", "", 2, anthropic.ErrWrongType},
		{"a request without model", normalizeRequest(`{"messages":[]}`), "NormalizeRequest", "model", -1, anthropic.ErrMissing},
		{"a model that is not a string", normalizeRequest(`{"model":4,"messages":[]}`), "NormalizeRequest", "model", -1, anthropic.ErrWrongType},
		{"a request without messages", normalizeRequest(`{"model":"m"}`), "NormalizeRequest", "messages", -1, anthropic.ErrMissing},
		{"messages that are not an array", normalizeRequest(`{"model":"m","messages":{"role":"user"}}`), "NormalizeRequest", "messages", -1, anthropic.ErrWrongType},
		{"a message that is not an object", normalizeRequest(`{"model":"m","messages":["hi"]}`), "NormalizeRequest", "messages[0]", -1, anthropic.ErrWrongType},
		{"a message without role", normalizeRequest(`{"model":"m","messages":[{"role":"user","content":"a"},{"content":"b"}]}`), "NormalizeRequest", "messages[1].role", -1, anthropic.ErrMissing},
		{"a message with a member the neutral form cannot hold", normalizeRequest(`{"model":"m","messages":[{"role":"user","content":"a","name":"bob"}]}`), "NormalizeRequest", "messages[0].name", -1, anthropic.ErrUnknownField},

		{"a response body that is not JSON", normalizeResponse(`{"id": "msg_1", }`), "NormalizeResponse", "", 16, anthropic.ErrNotJSON},
		{"a response without content", normalizeResponse(`{"id":"msg_1","type":"message"}`), "NormalizeResponse", "content", -1, anthropic.ErrMissing},
		{"a stop reason that is not a string", normalizeResponse(`{"content":[],"stop_reason":1}`), "NormalizeResponse", "stop_reason", -1, anthropic.ErrWrongType},
		{"usage counts that are not integers", normalizeResponse(`{"content":[],"usage":{"input_tokens":"many"}}`), "NormalizeResponse", "usage", -1, anthropic.ErrWrongType},

		{"a stream cut in the middle of an event", normalizeStream(cutMidEvent), "NormalizeStream", "", int64(strings.LastIndex(cutMidEvent, "event: ")), anthropic.ErrTruncated},
		{"a stream cut before the blank line that ends its last event", normalizeStream(cutBeforeBlankLine), "NormalizeStream", "", at(cutBeforeBlankLine, "event: message_stop"), anthropic.ErrTruncated},
		{"an unknown event type carrying invalid JSON", normalizeStream(unknownInvalid), "NormalizeStream", "", at(unknownInvalid, "event: annotation"), anthropic.ErrNotJSON},
		{"a known event carrying invalid JSON", normalizeStream(knownInvalid), "NormalizeStream", "", at(knownInvalid, "event: content_block_start"), anthropic.ErrNotJSON},
		{"a delta for a block that never started", normalizeStream(deltaWithoutBlock), "NormalizeStream", "index", at(deltaWithoutBlock, "event: content_block_delta"), anthropic.ErrBlockIndex},
		{"a block started out of order", normalizeStream(blockOutOfOrder), "NormalizeStream", "index", at(blockOutOfOrder, "event: content_block_start"), anthropic.ErrBlockIndex},
		{"a block index that is not a number", normalizeStream(indexNotNumber), "NormalizeStream", "index", at(indexNotNumber, "event: content_block_stop"), anthropic.ErrWrongType},
		{"a message_start without its message", normalizeStream(startWithoutMessage), "NormalizeStream", "message", 0, anthropic.ErrMissing},

		{"params holding the model", denormalizeRequest(session.Request{Model: "m", Params: map[string]json.RawMessage{"model": json.RawMessage(`"other"`)}}), "DenormalizeRequest", "params.model", -1, anthropic.ErrReserved},
		{"a param that is not JSON", denormalizeRequest(session.Request{Model: "m", Params: map[string]json.RawMessage{"tools": json.RawMessage(`[{`)}}), "DenormalizeRequest", "params.tools", -1, anthropic.ErrNotJSON},
		{"a message without role", denormalizeRequest(session.Request{Model: "m", Messages: []session.Message{{Role: "user"}, {Content: json.RawMessage(`"x"`)}}}), "DenormalizeRequest", "messages[1].role", -1, anthropic.ErrMissing},
		{"message content that is not JSON", denormalizeRequest(session.Request{Model: "m", Messages: []session.Message{{Role: "user", Content: json.RawMessage(`hi`)}}}), "DenormalizeRequest", "messages[0].content", -1, anthropic.ErrNotJSON},
		{"response content that is not JSON", denormalizeResponse(session.Response{Content: json.RawMessage(`[{]`)}), "DenormalizeResponse", "content", -1, anthropic.ErrNotJSON},
		{"a raw envelope that is not an object", denormalizeResponse(session.Response{Content: json.RawMessage(`[]`), Raw: json.RawMessage(`[1]`)}), "DenormalizeResponse", "raw", -1, anthropic.ErrWrongType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var ce *anthropic.CodecError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T), want a *CodecError", err, err)
			}
			if ce.Op != tt.wantOp || ce.Field != tt.wantField || ce.Offset != tt.wantOffset {
				t.Errorf("Op %q Field %q Offset %d, want %q %q %d", ce.Op, ce.Field, ce.Offset, tt.wantOp, tt.wantField, tt.wantOffset)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want it to match %v", err, tt.wantErr)
			}
			if tt.wantField != "" && !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("message %q does not name the field", err)
			}
		})
	}
}

func TestCodecErrorMessagesNameTheOffsetAndField(t *testing.T) {
	err := &anthropic.CodecError{Codec: "anthropic", Op: "NormalizeStream", Field: "index", Offset: 120, Err: anthropic.ErrBlockIndex}
	if got, want := err.Error(), "anthropic codec: NormalizeStream: byte 120: index: content block index out of sequence"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	err = &anthropic.CodecError{Codec: "anthropic", Op: "NormalizeRequest", Field: "messages[2].role", Offset: -1, Err: anthropic.ErrMissing}
	if got, want := err.Error(), "anthropic codec: NormalizeRequest: messages[2].role: required member is missing"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
