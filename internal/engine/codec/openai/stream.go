package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/sse"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// done is the data of the event that ends a Chat Completions stream. It is the one event whose data
// is not JSON.
const done = "[DONE]"

// chunkData is the Data of a stream chunk: one SSE event, with its name when it had one, and its
// data as JSON — or Done for the data: [DONE] terminator. Data is omitted for an event that carried
// none.
type chunkData struct {
	Event string          `json:"event,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
	Done  bool            `json:"done,omitempty"`
}

// marshal writes the chunk without the HTML escaping json.Marshal would apply to the data, so the
// chunk holds the event's bytes as the server sent them, up to whitespace.
func (cd chunkData) Marshal() json.RawMessage {
	o := jsonobj.New()
	if cd.Event != "" {
		// JSON text is UTF-8: a name that is not is kept with U+FFFD for its bad bytes, written as the
		// character itself, so a rebuilt stream normalizes to the same chunk.
		o.Set("event", jsonobj.Quote(strings.ToValidUTF8(cd.Event, "\uFFFD")))
	}
	if cd.Data != nil {
		o.Set("data", cd.Data)
	}
	if cd.Done {
		o.Set("done", json.RawMessage("true"))
	}
	return o.Marshal()
}

// NormalizeStream maps a text/event-stream body of POST /v1/chat/completions (stream: true) to the
// completion the stream assembles and one chunk per event, in order, the [DONE] terminator and error
// events included, so RebuildStream can play the stream back exactly. Chunk offsets are the caller's
// to fill; they are left 0.
//
// The completion is assembled as the SDK's ChatCompletionAccumulator assembles it, over raw JSON so
// members this codec does not model pass through: choices and their tool calls are keyed by their
// index, content, refusal, tool-call names and arguments (and audio data and transcripts) are
// concatenated, and the chunk's object "chat.completion.chunk" becomes "chat.completion". Other
// members take the latest value that is not null (id: the first), and the per-chunk obfuscation
// padding is dropped. usage is the last non-null usage, which with stream_options.include_usage is
// the final chunk's (the SDK adds the usages of all chunks up; the API sends one). Assembly stops at
// [DONE] or at an error event (data with an "error" member), as the SDK's stream does; the chunks keep
// what follows. A stream that ends between events, e.g. without [DONE], assembles what it got.
//
// Errors: ErrTruncated when the body ends inside an event; ErrNotJSON when an event's data is neither
// JSON nor [DONE]; ErrWrongType, ErrMissing or ErrIndex, with the field, when a chunk cannot be
// applied. Each is reported at the byte where the event begins.
func (Codec) NormalizeStream(sse []byte) (session.Response, []session.Chunk, error) {
	const op = "NormalizeStream"
	acc := newAccumulator()
	chunks, err := eventChunks(op, sse, func() { acc.stopped = true }, acc.apply)
	if err != nil {
		return session.Response{}, nil, err
	}
	resp, err := splitCompletion(op, acc.completion())
	if err != nil {
		return session.Response{}, nil, err
	}
	return resp, chunks, nil
}

// eventChunks splits a streamed body into one chunk per event, calling onDone at the [DONE]
// terminator and apply with each event's compact JSON data; an error apply returns is placed at the
// event's first byte.
func eventChunks(op string, body []byte, onDone func(), apply func(data json.RawMessage) *CodecError) ([]session.Chunk, error) {
	events, err := parseSSE(op, body)
	if err != nil {
		return nil, err
	}
	chunks := make([]session.Chunk, 0, len(events))
	for _, ev := range events {
		cd := chunkData{Event: ev.Name}
		switch {
		case ev.Data == nil:
		case string(ev.Data) == done:
			cd.Done = true
			onDone()
		default:
			var ok bool
			if cd.Data, ok = jsonobj.CompactValid(ev.Data); !ok {
				return nil, &CodecError{Codec: codecName, Op: op, Offset: ev.Offset, Err: fmt.Errorf("%w: data of the event is neither JSON nor %s", ErrNotJSON, done)}
			}
			if err := apply(cd.Data); err != nil {
				err.Op, err.Offset = op, ev.Offset
				return nil, err
			}
		}
		chunks = append(chunks, session.Chunk{Data: cd.Marshal()})
	}
	return chunks, nil
}

// RebuildStream plays chunks back as a text/event-stream body: for each, an "event:" line when it
// has a name, a single "data:" line with its data (or [DONE]), and the blank line that completes it —
// the layout the API sends. Chunks that are not in this codec's shape are skipped, as the SDK would
// skip an event without data.
func (Codec) RebuildStream(chunks []session.Chunk) []byte {
	var b bytes.Buffer
	for _, c := range chunks {
		var cd chunkData
		if json.Unmarshal(c.Data, &cd) != nil || (cd.Event == "" && len(cd.Data) == 0 && !cd.Done) {
			continue
		}
		if cd.Event != "" {
			b.WriteString("event: ")
			b.WriteString(cd.Event)
			b.WriteByte('\n')
		}
		switch {
		case cd.Done:
			b.WriteString("data: " + done + "\n")
		case len(cd.Data) > 0:
			// Compact JSON has no line breaks, so one data line carries it whole.
			b.WriteString("data: ")
			b.Write(jsonobj.Compact(cd.Data))
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// parseSSE splits a streamed body into events as the OpenAI SDK: an event with an empty data line is dispatched, so it is kept (package sse);
// a body that ends inside an event is ErrTruncated at the event's first byte.
func parseSSE(op string, body []byte) ([]sse.Event, error) {
	events, err := sse.Parse(body, true)
	var cut *sse.TruncatedError
	if errors.As(err, &cut) {
		return nil, &CodecError{Codec: codecName, Op: op, Offset: cut.Offset, Err: ErrTruncated}
	}
	return events, err
}
