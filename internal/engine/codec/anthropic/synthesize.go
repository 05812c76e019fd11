package anthropic

import (
	"encoding/json"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
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
	msg, err := jsonobj.Parse(body)
	if err != nil {
		return nil, fieldError(op, "raw", ErrWrongType)
	}
	content, _ := msg.Get("content")
	var blocks []json.RawMessage
	if err := json.Unmarshal(content, &blocks); err != nil {
		return nil, fieldError(op, "content", ErrWrongType)
	}
	stopReason, stopSequence := orNull(msg, "stop_reason"), orNull(msg, "stop_sequence")
	usage, hasUsage := msg.Get("usage")
	msg.Set("content", json.RawMessage("[]"))
	if _, ok := msg.Get("stop_reason"); ok {
		msg.Set("stop_reason", json.RawMessage("null"))
	}
	if _, ok := msg.Get("stop_sequence"); ok {
		msg.Set("stop_sequence", json.RawMessage("null"))
	}

	chunks := []session.Chunk{streamChunk("message_start", member{"message", msg.Marshal()})}
	for i, raw := range blocks {
		block, err := jsonobj.Parse(raw)
		if err != nil {
			return nil, fieldError(op, "content", ErrWrongType)
		}
		index := number(int64(i))
		deltas := blockDeltas(block)
		chunks = append(chunks, streamChunk("content_block_start", member{"index", index}, member{"content_block", block.Marshal()}))
		for _, d := range deltas {
			chunks = append(chunks, streamChunk("content_block_delta", member{"index", index}, member{"delta", d}))
		}
		chunks = append(chunks, streamChunk("content_block_stop", member{"index", index}))
	}
	delta := jsonobj.New()
	delta.Set("stop_reason", stopReason)
	delta.Set("stop_sequence", stopSequence)
	end := []member{{"delta", delta.Marshal()}}
	if hasUsage {
		end = append(end, member{"usage", usage})
	}
	chunks = append(chunks, streamChunk("message_delta", end...), streamChunk("message_stop"))
	return chunks, nil
}

// blockDeltas empties the streamed members of a content block's start and returns the deltas that
// put them back, as the API streams them.
func blockDeltas(block *jsonobj.Object) []json.RawMessage {
	var typ string
	if raw, _ := block.Get("type"); jsonobj.Kind(raw) == '"' {
		_ = json.Unmarshal(raw, &typ)
	}
	var deltas []json.RawMessage
	// take empties a string member and returns its value.
	take := func(key string) string {
		raw, _ := block.Get(key)
		var s string
		if jsonobj.Kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
			return ""
		}
		block.Set(key, jsonobj.Quote(""))
		return s
	}
	add := func(deltaType, key, value string) {
		if value != "" {
			d := jsonobj.New()
			d.Set("type", jsonobj.Quote(deltaType))
			d.Set(key, jsonobj.Quote(value))
			deltas = append(deltas, d.Marshal())
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
		if input, _ := block.Get("input"); jsonobj.Kind(input) == '{' && string(jsonobj.Compact(input)) != "{}" {
			block.Set("input", json.RawMessage("{}"))
			add("input_json_delta", "partial_json", string(jsonobj.Compact(input)))
		}
	}
	return deltas
}

func orNull(o *jsonobj.Object, key string) json.RawMessage {
	if raw, ok := o.Get(key); ok {
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
	data := jsonobj.New()
	data.Set("type", jsonobj.Quote(name))
	for _, m := range members {
		data.Set(m.key, m.val)
	}
	return session.Chunk{Data: chunkData{Event: name, Data: data.Marshal()}.Marshal()}
}
