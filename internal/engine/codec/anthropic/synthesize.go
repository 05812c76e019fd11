package anthropic

import (
	"encoding/json"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// SynthesizeStream writes a response as a stream that assembles to it, in NormalizeStream's chunk
// shape: message_start with the envelope, then per content block its start, one delta carrying its
// streamed member whole (text, a tool_use block's input as JSON, thinking and signature) and its stop,
// then message_delta with the stop reason, stop sequence and usage, and message_stop. Blocks of other
// types start whole and get no delta. Offsets are left 0.
//
// It is for a recorded response whose own stream cannot be kept: the SDK accumulates the same Message
// from these chunks as it decodes from DenormalizeResponse's body. Errors are DenormalizeResponse's,
// or ErrWrongType for content that is not an array of objects.
func (c Codec) SynthesizeStream(resp session.Response) ([]session.Chunk, error) {
	const op = "SynthesizeStream"
	body, err := c.DenormalizeResponse(resp)
	if err != nil {
		return nil, err
	}
	msg, err := parseObject(body)
	if err != nil {
		return nil, fieldError(op, "raw", ErrWrongType)
	}
	content, _ := msg.get("content")
	var blocks []json.RawMessage
	if err := json.Unmarshal(content, &blocks); err != nil {
		return nil, fieldError(op, "content", ErrWrongType)
	}
	stopReason, stopSequence := orNull(msg, "stop_reason"), orNull(msg, "stop_sequence")
	usage, hasUsage := msg.get("usage")
	msg.set("content", json.RawMessage("[]"))
	if _, ok := msg.get("stop_reason"); ok {
		msg.set("stop_reason", json.RawMessage("null"))
	}
	if _, ok := msg.get("stop_sequence"); ok {
		msg.set("stop_sequence", json.RawMessage("null"))
	}

	chunks := []session.Chunk{streamChunk("message_start", member{"message", msg.marshal()})}
	for i, raw := range blocks {
		block, err := parseObject(raw)
		if err != nil {
			return nil, fieldError(op, "content", ErrWrongType)
		}
		index := number(int64(i))
		deltas := blockDeltas(block)
		chunks = append(chunks, streamChunk("content_block_start", member{"index", index}, member{"content_block", block.marshal()}))
		for _, d := range deltas {
			chunks = append(chunks, streamChunk("content_block_delta", member{"index", index}, member{"delta", d}))
		}
		chunks = append(chunks, streamChunk("content_block_stop", member{"index", index}))
	}
	delta := newObject()
	delta.set("stop_reason", stopReason)
	delta.set("stop_sequence", stopSequence)
	end := []member{{"delta", delta.marshal()}}
	if hasUsage {
		end = append(end, member{"usage", usage})
	}
	chunks = append(chunks, streamChunk("message_delta", end...), streamChunk("message_stop"))
	return chunks, nil
}

// blockDeltas empties the streamed members of a content block's start and returns the deltas that
// put them back, as the API streams them.
func blockDeltas(block *object) []json.RawMessage {
	var typ string
	if raw, _ := block.get("type"); kind(raw) == '"' {
		_ = json.Unmarshal(raw, &typ)
	}
	var deltas []json.RawMessage
	// take empties a string member and returns its value.
	take := func(key string) string {
		raw, _ := block.get(key)
		var s string
		if kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
			return ""
		}
		block.set(key, quote(""))
		return s
	}
	add := func(deltaType, key, value string) {
		if value != "" {
			d := newObject()
			d.set("type", quote(deltaType))
			d.set(key, quote(value))
			deltas = append(deltas, d.marshal())
		}
	}
	switch typ {
	case "text":
		add("text_delta", "text", take("text"))
	case "thinking":
		thinking, signature := take("thinking"), take("signature")
		add("thinking_delta", "thinking", thinking)
		add("signature_delta", "signature", signature)
	case "tool_use":
		if input, _ := block.get("input"); kind(input) == '{' && string(compact(input)) != "{}" {
			block.set("input", json.RawMessage("{}"))
			add("input_json_delta", "partial_json", string(compact(input)))
		}
	}
	return deltas
}

func orNull(o *object, key string) json.RawMessage {
	if raw, ok := o.get(key); ok {
		return raw
	}
	return json.RawMessage("null")
}

type member struct {
	key string
	val json.RawMessage
}

// streamChunk is the chunk of the event name, whose data has its type (the name) and the members.
func streamChunk(name string, members ...member) session.Chunk {
	data := newObject()
	data.set("type", quote(name))
	for _, m := range members {
		data.set(m.key, m.val)
	}
	return session.Chunk{Data: chunkData{Event: name, Data: data.marshal()}.marshal()}
}
