package openai

import (
	"encoding/json"
	"fmt"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// SynthesizeStream writes a response as a stream that assembles to it, in NormalizeStream's chunk
// shape and the API's layout: every chunk carries the completion's envelope (object
// "chat.completion.chunk", usage null while the stream runs); per choice, one chunk whose delta is
// the whole message — content and refusal in one piece each, every tool call with its index and its
// arguments whole — with the choice's other members and finish_reason null, then one with an empty
// delta and the finish_reason; then, when the completion has usage, the usage chunk with no choices;
// then [DONE]. Offsets are left 0.
//
// It is for a recorded response whose own stream cannot be kept: the SDK accumulates the same
// completion from these chunks as it decodes from DenormalizeResponse's body. Errors are
// DenormalizeResponse's, or ErrWrongType for a choice, message or tool call that is not an object or
// a content or refusal that is neither a string nor null.
func (c Codec) SynthesizeStream(resp session.Response) ([]session.Chunk, error) {
	const op = "SynthesizeStream"
	body, err := c.DenormalizeResponse(resp)
	if err != nil {
		return nil, err
	}
	completion, err := jsonobj.Parse(body)
	if err != nil {
		return nil, fieldError(op, "raw", ErrWrongType)
	}
	choices, err := choicesOf(op, completion, "raw.choices")
	if err != nil {
		return nil, err
	}
	usage, hasUsage := completion.Get("usage")
	// chunk writes the envelope with the given choices, and usage null while the stream runs.
	chunk := func(choices json.RawMessage, last bool) session.Chunk {
		o := jsonobj.New()
		for _, k := range completion.Keys {
			v := completion.Vals[k]
			switch {
			case k == "choices":
				v = choices
			case k == "usage" && !last:
				v = json.RawMessage("null")
			case k == "object" && string(v) == `"chat.completion"`:
				v = jsonobj.Quote("chat.completion.chunk")
			}
			o.Set(k, v)
		}
		return session.Chunk{Data: chunkData{Data: o.Marshal()}.Marshal()}
	}

	var chunks []session.Chunk
	for p, raw := range choices {
		first, finish, err := choiceDeltas(op, p, raw)
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, chunk(joinArray([]json.RawMessage{first}), false))
		if finish != nil {
			chunks = append(chunks, chunk(joinArray([]json.RawMessage{finish}), false))
		}
	}
	if (hasUsage && !jsonobj.IsNull(usage)) || len(choices) == 0 {
		chunks = append(chunks, chunk(json.RawMessage("[]"), true))
	}
	chunks = append(chunks, session.Chunk{Data: chunkData{Done: true}.Marshal()})
	return chunks, nil
}

// choiceDeltas writes a completion choice as the two chunk choices that stream it: the first with
// the message as its delta and the choice's other members in place, finish_reason null; the second,
// nil when there is no finish_reason, with an empty delta and the finish_reason.
func choiceDeltas(op string, p int, raw json.RawMessage) (first, finish json.RawMessage, err error) {
	path := fmt.Sprintf("raw.choices[%d]", p)
	choice, perr := jsonobj.Parse(raw)
	if perr != nil {
		return nil, nil, fieldError(op, path, ErrWrongType)
	}
	if _, ok := choice.Get("index"); !ok {
		// Every chunk choice names its choice; a choice without an index is streamed as its position.
		indexed := jsonobj.New()
		indexed.Set("index", number(int64(p)))
		for _, k := range choice.Keys {
			indexed.Set(k, choice.Vals[k])
		}
		choice = indexed
	}
	msgPath := path + ".message"
	if p == 0 {
		msgPath = "content"
	}
	out := jsonobj.New()
	var reason json.RawMessage
	for _, k := range choice.Keys {
		v := choice.Vals[k]
		switch k {
		case "message":
			delta, err := messageDelta(op, msgPath, v)
			if err != nil {
				return nil, nil, err
			}
			out.Set("delta", delta)
		case "finish_reason":
			reason = v
			out.Set(k, json.RawMessage("null"))
		default:
			out.Set(k, v)
		}
	}
	if jsonobj.IsNull(reason) {
		return out.Marshal(), nil, nil
	}
	end := jsonobj.New()
	index, _ := choice.Get("index")
	end.Set("index", index)
	if _, ok := choice.Get("message"); ok {
		end.Set("delta", json.RawMessage("{}"))
	}
	end.Set("finish_reason", reason)
	return out.Marshal(), end.Marshal(), nil
}

// messageDelta is a message as one delta: its members as they are, each tool call with its index.
func messageDelta(op, path string, raw json.RawMessage) (json.RawMessage, error) {
	msg, err := jsonobj.Parse(raw)
	if err != nil {
		return nil, fieldError(op, path, ErrWrongType)
	}
	for _, k := range []string{"content", "refusal"} {
		if v, ok := msg.Get(k); ok && !jsonobj.IsNull(v) && jsonobj.Kind(v) != '"' {
			return nil, fieldError(op, path+"."+k, ErrWrongType)
		}
	}
	calls, _ := msg.Get("tool_calls")
	if jsonobj.Kind(calls) != '[' {
		return msg.Marshal(), nil
	}
	var items []json.RawMessage
	_ = json.Unmarshal(calls, &items)
	for j, item := range items {
		call, err := jsonobj.Parse(item)
		if err != nil {
			return nil, fieldError(op, fmt.Sprintf("%s.tool_calls[%d]", path, j), ErrWrongType)
		}
		indexed := jsonobj.New()
		indexed.Set("index", number(int64(j)))
		for _, k := range call.Keys {
			if k != "index" {
				indexed.Set(k, call.Vals[k])
			}
		}
		items[j] = indexed.Marshal()
	}
	msg.Set("tool_calls", joinArray(items))
	return msg.Marshal(), nil
}
