package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
)

// accumulator assembles the final Message of a stream from its events, over raw JSON so that members
// this codec does not model pass through untouched. It follows the SDK's Message.Accumulate, which is
// what an agent using the SDK ends up holding.
type accumulator struct {
	env    *jsonobj.Object // the message_start message with message_delta merged in; content comes from blocks
	blocks []*block        // in index order
	done   bool            // an error event ended the stream
}

func newAccumulator() *accumulator { return &accumulator{} }

// streamEvent is the data of a Messages stream event; which members are set depends on Type.
type streamEvent struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	Message      json.RawMessage `json:"message"`
	ContentBlock json.RawMessage `json:"content_block"`
	Delta        json.RawMessage `json:"delta"`
	Usage        json.RawMessage `json:"usage"`
}

// assembled are the event types that change the assembled message.
var assembled = map[string]bool{
	"message_start": true, "message_delta": true, "message_stop": true,
	"content_block_start": true, "content_block_delta": true, "content_block_stop": true,
}

// apply folds one event into the message. The returned error names the field; the caller adds the
// operation and offset.
func (a *accumulator) apply(name string, data json.RawMessage) *CodecError {
	switch {
	case a.done || name == "ping" || name == "" || data == nil:
		// The SDK skips pings, unnamed events and empty data, and stops at an error.
		return nil
	case name == "error":
		a.done = true
		return nil
	}
	var head struct {
		Type string `json:"type"`
	}
	if jsonobj.Kind(data) != '{' || json.Unmarshal(data, &head) != nil {
		// The SDK cannot decode such data into an event and fails the stream; an event it never
		// decodes (one this codec does not know either) is only kept as a chunk.
		if assembled[name] {
			return &CodecError{Codec: codecName, Field: "type", Err: ErrWrongType}
		}
		return nil
	}
	if !assembled[head.Type] {
		return nil // like the SDK, go by the data's type, and ignore types it does not assemble
	}
	var ev streamEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return decodeError(err)
	}
	switch ev.Type {
	case "message_start":
		return a.start(ev.Message)
	case "message_delta":
		return a.delta(ev.Delta, ev.Usage)
	case "content_block_start":
		return a.startBlock(ev.Index, ev.ContentBlock)
	case "content_block_delta":
		if err := a.checkIndex(ev.Index); err != nil {
			return err
		}
		return a.blocks[ev.Index].apply(ev.Delta)
	case "content_block_stop":
		return a.checkIndex(ev.Index)
	}
	return nil // message_stop: the message is complete, which message() does not need to be told
}

// decodeError names the member a known event could not be decoded at.
func decodeError(err error) *CodecError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &CodecError{Codec: codecName, Field: te.Field, Err: ErrWrongType}
	}
	return &CodecError{Codec: codecName, Err: ErrWrongType}
}

// start begins the message anew, as the SDK does for every message_start.
func (a *accumulator) start(msg json.RawMessage) *CodecError {
	if jsonobj.IsNull(msg) {
		return &CodecError{Codec: codecName, Field: "message", Err: ErrMissing}
	}
	env, err := jsonobj.Parse(msg)
	if err != nil {
		return &CodecError{Codec: codecName, Field: "message", Err: ErrWrongType}
	}
	a.env, a.blocks = env, nil
	return nil
}

// delta merges message_delta's members and usage into the message, skipping the nulls it sends for
// what it does not update. Usage counts are cumulative totals, so they replace rather than add.
func (a *accumulator) delta(delta, usage json.RawMessage) *CodecError {
	env := a.envelope()
	if err := mergeInto(env, delta); err != nil {
		err.Field = "delta"
		return err
	}
	if jsonobj.IsNull(usage) {
		return nil
	}
	u := jsonobj.New()
	if raw, _ := env.Get("usage"); jsonobj.Kind(raw) == '{' {
		if kept, err := jsonobj.Parse(raw); err == nil {
			u = kept
		}
	}
	if err := mergeInto(u, usage); err != nil {
		err.Field = "usage"
		return err
	}
	env.Set("usage", u.Marshal())
	return nil
}

func mergeInto(dst *jsonobj.Object, src json.RawMessage) *CodecError {
	if jsonobj.IsNull(src) {
		return nil
	}
	o, err := jsonobj.Parse(src)
	if err != nil {
		return &CodecError{Codec: codecName, Err: ErrWrongType}
	}
	for _, k := range o.Keys {
		if v := o.Vals[k]; !jsonobj.IsNull(v) {
			dst.Set(k, v)
		}
	}
	return nil
}

// startBlock adds a content block. Blocks start in index order with no gaps, even when deltas of
// earlier blocks interleave; anything else would put a delta on the wrong block.
func (a *accumulator) startBlock(index int, raw json.RawMessage) *CodecError {
	if index != len(a.blocks) {
		return &CodecError{Codec: codecName, Field: "index", Err: ErrBlockIndex}
	}
	obj, err := jsonobj.Parse(raw)
	if err != nil {
		return &CodecError{Codec: codecName, Field: "content_block", Err: ErrWrongType}
	}
	a.blocks = append(a.blocks, newBlock(obj))
	return nil
}

func (a *accumulator) checkIndex(index int) *CodecError {
	if index < 0 || index >= len(a.blocks) {
		return &CodecError{Codec: codecName, Field: "index", Err: ErrBlockIndex}
	}
	return nil
}

func (a *accumulator) envelope() *jsonobj.Object {
	if a.env == nil {
		a.env = jsonobj.New()
	}
	return a.env
}

// message is the assembled Message: the envelope with its content replaced by the blocks.
func (a *accumulator) message() *jsonobj.Object {
	env := a.envelope()
	content := []byte{'['}
	for i, b := range a.blocks {
		if i > 0 {
			content = append(content, ',')
		}
		content = append(content, b.finish()...)
	}
	env.Set("content", append(content, ']'))
	return env
}

// block is a content block under construction: its content_block_start object and the deltas that
// arrived for it.
type block struct {
	obj *jsonobj.Object
	// strs holds the text, thinking and signature members with their deltas appended.
	strs map[string]*bytes.Buffer
	// input is the tool input as the SDK builds it: the start block's input, replaced by the first
	// piece of partial JSON when it is the empty object {}, and extended by every later piece.
	input     []byte
	citations []json.RawMessage
	cited     bool // citations holds the start block's citations and the deltas'
}

func newBlock(obj *jsonobj.Object) *block {
	in, _ := obj.Get("input")
	return &block{obj: obj, strs: map[string]*bytes.Buffer{}, input: append([]byte(nil), in...)}
}

type blockDelta struct {
	Type        string          `json:"type"`
	Text        string          `json:"text"`
	PartialJSON string          `json:"partial_json"`
	Thinking    string          `json:"thinking"`
	Signature   string          `json:"signature"`
	Citation    json.RawMessage `json:"citation"`
}

func (b *block) apply(raw json.RawMessage) *CodecError {
	var d blockDelta
	if jsonobj.Kind(raw) != '{' {
		return &CodecError{Codec: codecName, Field: "delta", Err: ErrWrongType}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		err := decodeError(err)
		err.Field = "delta." + err.Field
		return err
	}
	switch d.Type {
	case "text_delta":
		b.appendString("text", d.Text)
	case "thinking_delta":
		b.appendString("thinking", d.Thinking)
	case "signature_delta":
		b.appendString("signature", d.Signature)
	case "input_json_delta":
		b.appendInput(d.PartialJSON)
	case "citations_delta":
		if jsonobj.Kind(d.Citation) != '{' {
			return &CodecError{Codec: codecName, Field: "delta.citation", Err: ErrWrongType}
		}
		b.cite(d.Citation)
	}
	return nil // a delta type this codec does not know changes nothing, as in the SDK
}

func (b *block) appendString(key, s string) {
	buf, ok := b.strs[key]
	if !ok {
		buf = &bytes.Buffer{}
		var cur string
		if raw, _ := b.obj.Get(key); jsonobj.Kind(raw) == '"' {
			_ = json.Unmarshal(raw, &cur)
		}
		buf.WriteString(cur)
		b.strs[key] = buf
	}
	buf.WriteString(s)
}

func (b *block) appendInput(partial string) {
	if partial == "" {
		return
	}
	if string(b.input) == "{}" {
		b.input = []byte(partial)
		return
	}
	b.input = append(b.input, partial...)
}

func (b *block) cite(c json.RawMessage) {
	if !b.cited {
		if raw, _ := b.obj.Get("citations"); jsonobj.Kind(raw) == '[' {
			_ = json.Unmarshal(raw, &b.citations)
		}
		b.cited = true
	}
	b.citations = append(b.citations, c)
}

// finish writes the deltas into the block, in the order the SDK does. Empty text is left as the start
// block had it, and input that did not assemble into JSON (a cut-off tool call) keeps the start
// block's input.
func (b *block) finish() json.RawMessage {
	for _, k := range []string{"text", "thinking", "signature"} {
		if buf, ok := b.strs[k]; ok && buf.Len() > 0 {
			b.obj.Set(k, jsonobj.Quote(buf.String()))
		}
	}
	if input, ok := jsonobj.CompactValid(b.input); ok {
		b.obj.Set("input", input)
	}
	if len(b.citations) > 0 {
		cs := []byte{'['}
		for i, c := range b.citations {
			if i > 0 {
				cs = append(cs, ',')
			}
			cs = append(cs, jsonobj.Compact(c)...)
		}
		b.obj.Set("citations", append(cs, ']'))
	}
	return b.obj.Marshal()
}
