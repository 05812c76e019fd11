package openai

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// NormalizeStream maps a text/event-stream body of POST /v1/responses (stream: true) to the
// response it assembles and one chunk per event, in order, in the Chat Completions codec's chunk
// shape ({"event": name, "data": json}), so RebuildStream plays it back exactly.
//
// The response is the one the terminal event carries (response.completed, response.incomplete or
// response.failed), with its output filled from the output_item.done events when it has none, as
// the SDK's accumulator does. A stream that ends without a terminal event assembles what it got:
// the latest response snapshot (response.created, response.in_progress) with the output items as
// their added and done events and the text, refusal and argument deltas left them. An error event
// ends the assembly, as it ends the SDK's stream.
//
// Errors: ErrTruncated when the body ends inside an event; ErrNotJSON when an event's data is not
// JSON; ErrWrongType, with the field, when an event cannot be applied. Each is reported at the byte
// where the event begins.
func (ResponsesCodec) NormalizeStream(sse []byte) (session.Response, []session.Chunk, error) {
	const op = "NormalizeStream"
	acc := &responseAccumulator{items: map[int64]*jsonobj.Object{}}
	chunks, err := eventChunks(op, sse, func() { acc.stopped = true }, func(data json.RawMessage) *CodecError {
		if acc.stopped {
			return nil
		}
		if field, err := acc.apply(data); err != nil {
			return &CodecError{Codec: codecName, Field: field, Err: err}
		}
		return nil
	})
	if err != nil {
		return session.Response{}, nil, err
	}
	resp, err := splitResponse(op, acc.response())
	if err != nil {
		return session.Response{}, nil, err
	}
	return resp, chunks, nil
}

// RebuildStream plays chunks back as a text/event-stream body, "event:" and "data:" lines as the API
// sends them (the Chat Completions codec's layout).
func (ResponsesCodec) RebuildStream(chunks []session.Chunk) []byte {
	return Codec{}.RebuildStream(chunks)
}

// responseAccumulator assembles a Responses stream over raw JSON, so members this codec does not
// model pass through.
type responseAccumulator struct {
	snapshot *jsonobj.Object // the latest response object an event carried
	final    bool            // snapshot is a terminal event's
	items    map[int64]*jsonobj.Object
	done     map[int64]bool // items whose output_item.done arrived
	stopped  bool
}

// streamEvent is the part of an event's data the accumulator reads.
type streamEvent struct {
	Type         string          `json:"type"`
	Response     json.RawMessage `json:"response"`
	OutputIndex  int64           `json:"output_index"`
	ContentIndex int64           `json:"content_index"`
	Item         json.RawMessage `json:"item"`
	Part         json.RawMessage `json:"part"`
	Delta        *string         `json:"delta"`
}

// apply folds one event's data in; on error it returns the field at fault.
func (a *responseAccumulator) apply(data json.RawMessage) (string, error) {
	var ev streamEvent
	if jsonobj.Kind(data) != '{' || json.Unmarshal(data, &ev) != nil {
		return "", ErrWrongType
	}
	if raw, _ := jsonobj.Parse(data); ev.Type == "error" || raw != nil && !jsonobj.IsNull(raw.Vals["error"]) {
		a.stopped = true // the API's error event ends the stream, and the SDK's at any error member
		return "", nil
	}
	switch ev.Type {
	case "response.created", "response.in_progress", "response.queued",
		"response.completed", "response.incomplete", "response.failed":
		r, err := jsonobj.Parse(ev.Response)
		if err != nil {
			return "response", ErrWrongType
		}
		a.snapshot = r
		if ev.Type == "response.completed" || ev.Type == "response.incomplete" || ev.Type == "response.failed" {
			a.final, a.stopped = true, true
		}
	case "response.output_item.added", "response.output_item.done":
		item, err := jsonobj.Parse(ev.Item)
		if err != nil {
			return "item", ErrWrongType
		}
		a.items[ev.OutputIndex] = item
		if ev.Type == "response.output_item.done" {
			if a.done == nil {
				a.done = map[int64]bool{}
			}
			a.done[ev.OutputIndex] = true
		}
	case "response.content_part.added":
		if item := a.open(ev.OutputIndex); item != nil && jsonobj.Kind(ev.Part) == '{' {
			return "part", setContentPart(item, ev.ContentIndex, jsonobj.Compact(ev.Part))
		}
	case "response.output_text.delta", "response.refusal.delta":
		member := "text"
		if ev.Type == "response.refusal.delta" {
			member = "refusal"
		}
		if item := a.open(ev.OutputIndex); item != nil && ev.Delta != nil {
			return "delta", appendToPart(item, ev.ContentIndex, member, *ev.Delta)
		}
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta", "response.mcp_call_arguments.delta":
		member := "arguments"
		if ev.Type == "response.custom_tool_call_input.delta" {
			member = "input"
		}
		if item := a.open(ev.OutputIndex); item != nil && ev.Delta != nil {
			return "delta", appendString(item, member, *ev.Delta)
		}
	}
	return "", nil
}

// open is the output item at index that deltas still grow, nil when there is none or it is done.
func (a *responseAccumulator) open(index int64) *jsonobj.Object {
	if a.done[index] {
		return nil
	}
	return a.items[index]
}

// response is the assembled response object.
func (a *responseAccumulator) response() *jsonobj.Object {
	r := a.snapshot
	if r == nil {
		r = jsonobj.New()
		r.Set("object", jsonobj.Quote("response"))
	}
	if out, _ := r.Get("output"); a.final && jsonobj.Kind(out) == '[' {
		return r // the terminal event's output is authoritative, even when empty
	}
	indexes := make([]int64, 0, len(a.items))
	for i := range a.items {
		if !a.final || a.done[i] {
			indexes = append(indexes, i)
		}
	}
	sort.Slice(indexes, func(i, j int) bool { return indexes[i] < indexes[j] })
	items := make([]json.RawMessage, 0, len(indexes))
	for _, i := range indexes {
		items = append(items, a.items[i].Marshal())
	}
	r.SetAfter("output", joinArray(items), "model", "status", "object")
	return r
}

// setContentPart puts part at index i of item's content array (appending when i is its length).
func setContentPart(item *jsonobj.Object, i int64, part json.RawMessage) error {
	parts, err := contentParts(item)
	if err != nil {
		return err
	}
	switch {
	case i == int64(len(parts)):
		parts = append(parts, part)
	case i >= 0 && i < int64(len(parts)):
		parts[i] = part
	default:
		return ErrIndex
	}
	item.Set("content", joinArray(parts))
	return nil
}

// appendToPart appends delta to the string member of item's content part i.
func appendToPart(item *jsonobj.Object, i int64, member, delta string) error {
	parts, err := contentParts(item)
	if err != nil {
		return err
	}
	if i < 0 || i >= int64(len(parts)) {
		return ErrIndex
	}
	part, err := jsonobj.Parse(parts[i])
	if err != nil {
		return ErrWrongType
	}
	if err := appendString(part, member, delta); err != nil {
		return err
	}
	parts[i] = part.Marshal()
	item.Set("content", joinArray(parts))
	return nil
}

func contentParts(item *jsonobj.Object) ([]json.RawMessage, error) {
	raw, _ := item.Get("content")
	if jsonobj.IsNull(raw) {
		return nil, nil
	}
	var parts []json.RawMessage
	if jsonobj.Kind(raw) != '[' || json.Unmarshal(raw, &parts) != nil {
		return nil, ErrWrongType
	}
	return parts, nil
}

// appendString appends s to the string member of o (a missing or null member is "").
func appendString(o *jsonobj.Object, member, s string) error {
	var cur string
	if raw, _ := o.Get(member); !jsonobj.IsNull(raw) {
		if jsonobj.Kind(raw) != '"' || json.Unmarshal(raw, &cur) != nil {
			return ErrWrongType
		}
	}
	o.Set(member, jsonobj.Quote(cur+s))
	return nil
}

// member is one member of an event's data.
type member struct {
	key   string
	value json.RawMessage
}

// SynthesizeStream writes a response as the stream that assembles to it, in NormalizeStream's chunk
// shape and the API's event sequence: response.created (the response in progress, without output),
// then per output item its output_item.added (a message without content, a function call without
// arguments), a message's content parts each as content_part.added, one output_text.delta (or
// refusal.delta) with the whole text, the matching .done and content_part.done, a function call's
// arguments as one function_call_arguments.delta and .done, then output_item.done with the item
// whole; last the terminal event for the status (response.completed, response.incomplete or
// response.failed) with the whole response. Every event carries its sequence_number. It is for a
// recorded response whose own stream cannot be kept.
func (c ResponsesCodec) SynthesizeStream(resp session.Response) ([]session.Chunk, error) {
	const op = "SynthesizeStream"
	body, err := c.DenormalizeResponse(resp)
	if err != nil {
		return nil, err
	}
	full, err := jsonobj.Parse(body)
	if err != nil {
		return nil, fieldError(op, "raw", ErrWrongType)
	}
	var items []json.RawMessage
	if out, _ := full.Get("output"); jsonobj.Kind(out) == '[' {
		_ = json.Unmarshal(out, &items)
	}
	var chunks []session.Chunk
	seq := int64(0)
	emit := func(typ string, members ...member) {
		o := jsonobj.New()
		o.Set("type", jsonobj.Quote(typ))
		for _, m := range members {
			o.Set(m.key, m.value)
		}
		o.Set("sequence_number", number(seq))
		seq++
		chunks = append(chunks, session.Chunk{Data: chunkData{Event: typ, Data: o.Marshal()}.Marshal()})
	}
	started, _ := jsonobj.Parse(body)
	started.Set("status", jsonobj.Quote("in_progress"))
	started.Set("output", json.RawMessage("[]"))
	if _, ok := started.Get("usage"); ok {
		started.Set("usage", json.RawMessage("null"))
	}
	emit("response.created", member{"response", started.Marshal()})
	for i, raw := range items {
		item, err := jsonobj.Parse(raw)
		if err != nil {
			return nil, fieldError(op, fmt.Sprintf("content[%d]", i), ErrWrongType)
		}
		oi := number(int64(i))
		id, _ := item.Get("id")
		if id == nil {
			id = json.RawMessage(`""`)
		}
		var typ string
		t, _ := item.Get("type")
		_ = json.Unmarshal(t, &typ)
		added, _ := jsonobj.Parse(raw)
		if _, ok := added.Get("status"); ok {
			added.Set("status", jsonobj.Quote("in_progress"))
		}
		switch typ {
		case "message":
			added.Set("content", json.RawMessage("[]"))
		case "function_call":
			added.Set("arguments", json.RawMessage(`""`))
		}
		emit("response.output_item.added", member{"output_index", oi}, member{"item", added.Marshal()})
		switch typ {
		case "message":
			parts, err := contentParts(item)
			if err != nil {
				return nil, fieldError(op, fmt.Sprintf("content[%d].content", i), err)
			}
			for ci, p := range parts {
				part, err := jsonobj.Parse(p)
				if err != nil {
					return nil, fieldError(op, fmt.Sprintf("content[%d].content[%d]", i, ci), ErrWrongType)
				}
				var ptyp string
				pt, _ := part.Get("type")
				_ = json.Unmarshal(pt, &ptyp)
				textKey, delta := "text", "response.output_text"
				if ptyp == "refusal" {
					textKey, delta = "refusal", "response.refusal"
				}
				text, _ := part.Get(textKey)
				empty, _ := jsonobj.Parse(p)
				empty.Set(textKey, json.RawMessage(`""`))
				cix := number(int64(ci))
				emit("response.content_part.added", member{"item_id", id}, member{"output_index", oi}, member{"content_index", cix}, member{"part", empty.Marshal()})
				if jsonobj.Kind(text) == '"' {
					emit(delta+".delta", member{"item_id", id}, member{"output_index", oi}, member{"content_index", cix}, member{"delta", text})
					emit(delta+".done", member{"item_id", id}, member{"output_index", oi}, member{"content_index", cix}, member{textKey, text})
				}
				emit("response.content_part.done", member{"item_id", id}, member{"output_index", oi}, member{"content_index", cix}, member{"part", p})
			}
		case "function_call":
			if args, _ := item.Get("arguments"); jsonobj.Kind(args) == '"' {
				emit("response.function_call_arguments.delta", member{"item_id", id}, member{"output_index", oi}, member{"delta", args})
				emit("response.function_call_arguments.done", member{"item_id", id}, member{"output_index", oi}, member{"arguments", args})
			}
		}
		emit("response.output_item.done", member{"output_index", oi}, member{"item", raw})
	}
	terminal := "response.completed"
	switch resp.StopReason {
	case "incomplete":
		terminal = "response.incomplete"
	case "failed":
		terminal = "response.failed"
	}
	emit(terminal, member{"response", body})
	return chunks, nil
}
