package openai_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

func TestInputTheCodecCannotMapIsATypedErrorThatSaysWhere(t *testing.T) {
	var c openai.Codec
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

	first := chunk("c", `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]`, ``)
	at := func(body, marker string) int64 { return int64(strings.Index(body, marker)) }
	cutMidEvent := toolStream[:strings.Index(toolStream, `ation\": \"Par`)]
	cutBeforeBlankLine := toolStream[:len(toolStream)-1]
	notJSON := sse(first, `{"id":"c",`, "[DONE]")
	notObject := sse(first, `[1,2]`)
	emptyData := "data: " + first + "\n\ndata:\n\n"
	choicesNotArray := sse(`{"id":"c","choices":{"index":0}}`)
	choiceWithoutIndex := sse(first, chunk("c", `[{"delta":{"content":"x"}}]`, ``))
	negativeChoice := sse(chunk("c", `[{"index":-1,"delta":{}}]`, ``))
	contentNotString := sse(first, chunk("c", `[{"index":0,"delta":{"content":["x"]}}]`, ``))
	toolIndexNotNumber := sse(first, chunk("c", `[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a"},{"index":"1"}]}}]`, ``))
	toolIndexNegative := sse(first, chunk("c", `[{"index":0,"delta":{"tool_calls":[{"index":-2}]}}]`, ``))
	functionNotObject := sse(first,
		chunk("c", `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]}}]`, ``),
		chunk("c", `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":"args"}]}}]`, ``))

	tests := []struct {
		name       string
		call       func() error
		wantOp     string
		wantField  string
		wantOffset int64
		wantErr    error
	}{
		{"a request body that is not JSON", normalizeRequest(`{"model": x}`), "NormalizeRequest", "", 10, openai.ErrNotJSON},
		{"a request body that ends early", normalizeRequest(`{"model": "m",`), "NormalizeRequest", "", 14, openai.ErrNotJSON},
		{"an empty request body", normalizeRequest(``), "NormalizeRequest", "", 0, openai.ErrNotJSON},
		{"a request body that is not an object", normalizeRequest(`  ["model"]`), "NormalizeRequest", "", 2, openai.ErrWrongType},
		{"a request without model", normalizeRequest(`{"messages":[]}`), "NormalizeRequest", "model", -1, openai.ErrMissing},
		{"a model that is not a string", normalizeRequest(`{"model":4,"messages":[]}`), "NormalizeRequest", "model", -1, openai.ErrWrongType},
		{"a request without messages", normalizeRequest(`{"model":"m"}`), "NormalizeRequest", "messages", -1, openai.ErrMissing},
		{"messages that are not an array", normalizeRequest(`{"model":"m","messages":{"role":"user"}}`), "NormalizeRequest", "messages", -1, openai.ErrWrongType},
		{"a message that is not an object", normalizeRequest(`{"model":"m","messages":["hi"]}`), "NormalizeRequest", "messages[0]", -1, openai.ErrWrongType},
		{"a message without role", normalizeRequest(`{"model":"m","messages":[{"role":"user","content":"a"},{"content":"b"}]}`), "NormalizeRequest", "messages[1].role", -1, openai.ErrMissing},
		{"an empty role", normalizeRequest(`{"model":"m","messages":[{"role":"","content":"a"}]}`), "NormalizeRequest", "messages[0].role", -1, openai.ErrMissing},
		{"a role that is not a string", normalizeRequest(`{"model":"m","messages":[{"role":["user"],"content":"a"}]}`), "NormalizeRequest", "messages[0].role", -1, openai.ErrWrongType},
		{"a top-level system member", normalizeRequest(`{"model":"m","system":"Be brief.","messages":[]}`), "NormalizeRequest", "system", -1, openai.ErrUnknownField},

		{"a response body that is not JSON", normalizeResponse(`{"id": "c", }`), "NormalizeResponse", "", 12, openai.ErrNotJSON},
		{"a response without choices", normalizeResponse(`{"id":"c","object":"chat.completion"}`), "NormalizeResponse", "choices", -1, openai.ErrMissing},
		{"choices that are not an array", normalizeResponse(`{"choices":{}}`), "NormalizeResponse", "choices", -1, openai.ErrWrongType},
		{"a choice that is not an object", normalizeResponse(`{"choices":[null]}`), "NormalizeResponse", "choices[0]", -1, openai.ErrWrongType},
		{"a message that is not an object", normalizeResponse(`{"choices":[{"index":0,"message":"hi"}]}`), "NormalizeResponse", "choices[0].message", -1, openai.ErrWrongType},
		{"a finish reason that is not a string", normalizeResponse(`{"choices":[{"index":0,"message":{},"finish_reason":1}]}`), "NormalizeResponse", "choices[0].finish_reason", -1, openai.ErrWrongType},
		{"usage counts that are not integers", normalizeResponse(`{"choices":[],"usage":{"prompt_tokens":"many"}}`), "NormalizeResponse", "usage", -1, openai.ErrWrongType},

		{"a stream cut in the middle of an event", normalizeStream(cutMidEvent), "NormalizeStream", "", int64(strings.LastIndex(cutMidEvent, "data: ")), openai.ErrTruncated},
		{"a stream cut before the blank line that ends its last event", normalizeStream(cutBeforeBlankLine), "NormalizeStream", "", at(cutBeforeBlankLine, "data: [DONE]"), openai.ErrTruncated},
		{"event data that is neither JSON nor [DONE]", normalizeStream(notJSON), "NormalizeStream", "", at(notJSON, `data: {"id":"c",`+"\n"), openai.ErrNotJSON},
		{"an empty data line, which the SDK fails on", normalizeStream(emptyData), "NormalizeStream", "", at(emptyData, "data:\n"), openai.ErrNotJSON},
		{"event data that is not an object", normalizeStream(notObject), "NormalizeStream", "", at(notObject, "data: [1,2]"), openai.ErrWrongType},
		{"choices that are not an array", normalizeStream(choicesNotArray), "NormalizeStream", "choices", 0, openai.ErrWrongType},
		{"a choice without its index", normalizeStream(choiceWithoutIndex), "NormalizeStream", "choices[0].index", at(choiceWithoutIndex, `data: {"id":"c","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_s","choices":[{"delta"`), openai.ErrMissing},
		{"a negative choice index", normalizeStream(negativeChoice), "NormalizeStream", "choices[0].index", 0, openai.ErrIndex},
		{"content that is not a string", normalizeStream(contentNotString), "NormalizeStream", "choices[0].delta.content", at(contentNotString, `data: {"id":"c","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_s","choices":[{"index":0,"delta":{"content":[`), openai.ErrWrongType},
		{"a tool call index that is not a number", normalizeStream(toolIndexNotNumber), "NormalizeStream", "choices[0].delta.tool_calls[1].index", at(toolIndexNotNumber, `data: {"id":"c","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_s","choices":[{"index":0,"delta":{"tool_calls"`), openai.ErrWrongType},
		{"a tool call index below -1", normalizeStream(toolIndexNegative), "NormalizeStream", "choices[0].delta.tool_calls[0].index", at(toolIndexNegative, `data: {"id":"c","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_s","choices":[{"index":0,"delta":{"tool_calls"`), openai.ErrIndex},
		{"a tool call function that stops being an object", normalizeStream(functionNotObject), "NormalizeStream", "choices[0].delta.tool_calls[0].function", at(functionNotObject, `data: {"id":"c","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_s","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":"args"`), openai.ErrWrongType},

		{"params holding the model", denormalizeRequest(session.Request{Model: "m", Params: map[string]json.RawMessage{"model": json.RawMessage(`"other"`)}}), "DenormalizeRequest", "params.model", -1, openai.ErrReserved},
		{"a param that is not JSON", denormalizeRequest(session.Request{Model: "m", Params: map[string]json.RawMessage{"tools": json.RawMessage(`[{`)}}), "DenormalizeRequest", "params.tools", -1, openai.ErrNotJSON},
		{"a kept system message that is not an object", denormalizeRequest(session.Request{Model: "m", Params: map[string]json.RawMessage{"system": json.RawMessage(`"Be brief."`)}}), "DenormalizeRequest", "params.system", -1, openai.ErrWrongType},
		{"a message without role", denormalizeRequest(session.Request{Model: "m", Messages: []session.Message{{Role: "user"}, {Content: json.RawMessage(`"x"`)}}}), "DenormalizeRequest", "messages[1].role", -1, openai.ErrMissing},
		{"message content that is not JSON", denormalizeRequest(session.Request{Model: "m", Messages: []session.Message{{Role: "user", Content: json.RawMessage(`hi`)}}}), "DenormalizeRequest", "messages[0].content", -1, openai.ErrNotJSON},
		{"a content object naming a role", denormalizeRequest(session.Request{Model: "m", Messages: []session.Message{{Role: "user", Content: json.RawMessage(`{"role":"tool","content":"x"}`)}}}), "DenormalizeRequest", "messages[0].content.role", -1, openai.ErrReserved},
		{"response content that is not JSON", denormalizeResponse(session.Response{Content: json.RawMessage(`{]`)}), "DenormalizeResponse", "content", -1, openai.ErrNotJSON},
		{"response content that is not a message object", denormalizeResponse(session.Response{Content: json.RawMessage(`"Hi"`)}), "DenormalizeResponse", "content", -1, openai.ErrWrongType},
		{"a raw envelope that is not an object", denormalizeResponse(session.Response{Content: json.RawMessage(`{}`), Raw: json.RawMessage(`[1]`)}), "DenormalizeResponse", "raw", -1, openai.ErrWrongType},
		{"a raw envelope without choices", denormalizeResponse(session.Response{Content: json.RawMessage(`{}`), Raw: json.RawMessage(`{"id":"c"}`)}), "DenormalizeResponse", "raw.choices", -1, openai.ErrMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var ce *openai.CodecError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T), want a *CodecError", err, err)
			}
			if ce.Op != tt.wantOp || ce.Field != tt.wantField || ce.Offset != tt.wantOffset {
				t.Errorf("Op %q Field %q Offset %d, want %q %q %d (%v)", ce.Op, ce.Field, ce.Offset, tt.wantOp, tt.wantField, tt.wantOffset, err)
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
	err := &openai.CodecError{Codec: "openai", Op: "NormalizeStream", Field: "choices[0].delta.tool_calls[1].index", Offset: 120, Err: openai.ErrIndex}
	if got, want := err.Error(), "openai codec: NormalizeStream: byte 120: choices[0].delta.tool_calls[1].index: choice or tool call index out of range"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	err = &openai.CodecError{Codec: "openai", Op: "NormalizeRequest", Field: "messages[2].role", Offset: -1, Err: openai.ErrMissing}
	if got, want := err.Error(), "openai codec: NormalizeRequest: messages[2].role: required member is missing"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
