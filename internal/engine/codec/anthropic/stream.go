package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/sse"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// chunkData is the Data of a stream chunk: one SSE event, by name, with its data as JSON. Data is
// omitted for an event that carried none.
type chunkData struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// marshal writes the chunk without the HTML escaping json.Marshal would apply to the data, so the
// chunk holds the event's bytes as the server sent them, up to whitespace.
func (cd chunkData) Marshal() json.RawMessage {
	o := jsonobj.New()
	o.Set("event", jsonobj.Quote(cd.Event))
	if cd.Data != nil {
		o.Set("data", cd.Data)
	}
	return o.Marshal()
}

// NormalizeStream maps a text/event-stream body of POST /v1/messages to the response the stream
// assembles and one chunk per event, in order, pings and errors included, so RebuildStream can play
// the stream back exactly. Chunk offsets are the caller's to fill; they are left 0.
//
// The response is assembled as the SDK's Message.Accumulate assembles it: message_start gives the
// envelope, content_block_start/delta add blocks and apply text, partial JSON, thinking, signature and
// citation deltas, message_delta merges its non-null members and usage. Events the SDK skips (ping,
// unnamed events) are skipped, an error event ends the assembly (the chunks keep it, so a replay
// fails as the recording did), and events of types this codec does not know are kept as chunks and
// otherwise ignored. A stream that ends between events, e.g. without message_stop, assembles what it
// got.
//
// Errors: ErrTruncated when the body ends inside an event; ErrNotJSON when an event's data is not
// JSON, whatever the event; ErrWrongType or ErrBlockIndex, with the field, when a known event cannot
// be applied. Each is reported at the byte where the event begins.
func (Codec) NormalizeStream(sse []byte) (session.Response, []session.Chunk, error) {
	const op = "NormalizeStream"
	events, err := parseSSE(op, sse)
	if err != nil {
		return session.Response{}, nil, err
	}
	chunks := make([]session.Chunk, 0, len(events))
	acc := newAccumulator()
	for _, ev := range events {
		data, err := eventData(op, ev)
		if err != nil {
			return session.Response{}, nil, err
		}
		chunks = append(chunks, session.Chunk{Data: chunkData{Event: ev.Name, Data: data}.Marshal()})
		if err := acc.apply(ev.Name, data); err != nil {
			err.Op, err.Offset = op, ev.Offset
			return session.Response{}, nil, err
		}
	}
	resp, err := splitMessage(op, acc.message())
	if err != nil {
		return session.Response{}, nil, err
	}
	return resp, chunks, nil
}

// eventData validates and compacts an event's data. Data must be JSON for every event, known or not:
// a chunk holds it as JSON, and the SDK would fail on it anyway.
func eventData(op string, ev sse.Event) (json.RawMessage, error) {
	if ev.Data == nil {
		return nil, nil
	}
	data, ok := jsonobj.CompactValid(ev.Data)
	if !ok {
		return nil, &CodecError{Codec: codecName, Op: op, Offset: ev.Offset, Err: fmt.Errorf("%w: data of event %q", ErrNotJSON, ev.Name)}
	}
	return data, nil
}

// RebuildStream plays chunks back as a text/event-stream body: for each, an "event:" line when it
// has a name, a single "data:" line with its data, and the blank line that completes it — the layout
// the API sends. Chunks that are not in this codec's shape are skipped, as the SDK would skip an event
// without a name or data.
func (Codec) RebuildStream(chunks []session.Chunk) []byte {
	var b bytes.Buffer
	for _, c := range chunks {
		var cd chunkData
		if json.Unmarshal(c.Data, &cd) != nil || (cd.Event == "" && len(cd.Data) == 0) {
			continue
		}
		if cd.Event != "" {
			b.WriteString("event: ")
			b.WriteString(cd.Event)
			b.WriteByte('\n')
		}
		if len(cd.Data) > 0 {
			// Compact JSON has no line breaks, so one data line carries it whole.
			b.WriteString("data: ")
			b.Write(jsonobj.Compact(cd.Data))
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// parseSSE splits a streamed body into events as the Anthropic SDK: an event whose data lines are all empty is skipped (package sse);
// a body that ends inside an event is ErrTruncated at the event's first byte.
func parseSSE(op string, body []byte) ([]sse.Event, error) {
	events, err := sse.Parse(body, false)
	var cut *sse.TruncatedError
	if errors.As(err, &cut) {
		return nil, &CodecError{Codec: codecName, Op: op, Offset: cut.Offset, Err: ErrTruncated}
	}
	return events, err
}
