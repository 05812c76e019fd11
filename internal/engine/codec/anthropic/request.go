package anthropic

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// NormalizeRequest maps a POST /v1/messages body to the neutral request.
//
//   - model and messages are required; each message keeps its role and, verbatim, its content (a
//     string or an array of blocks). A message member other than role and content is refused.
//   - system follows the package's system rule: Request.System holds its text and, unless the wire
//     value was a non-empty string, Params["system"] holds the wire value itself.
//   - every other member (max_tokens, temperature, tools, tool_choice, stop_sequences, metadata,
//     stream, thinking, ...) goes into Params as it was.
//
// Raw values are compacted; nothing else about them changes.
func (Codec) NormalizeRequest(body []byte) (session.Request, error) {
	const op = "NormalizeRequest"
	top, err := parseBody(op, body)
	if err != nil {
		return session.Request{}, err
	}
	var req session.Request
	if req.Model, err = requiredString(op, top, "model", "model"); err != nil {
		return session.Request{}, err
	}
	if req.Messages, err = normalizeMessages(op, top); err != nil {
		return session.Request{}, err
	}
	for _, k := range top.Keys {
		v := top.Vals[k]
		switch k {
		case "model", "messages":
			continue
		case "system":
			req.System = systemText(v)
			if jsonobj.Kind(v) == '"' && req.System != "" {
				continue // the text alone says it all
			}
		}
		if req.Params == nil {
			req.Params = map[string]json.RawMessage{}
		}
		req.Params[k] = v
	}
	return req, nil
}

// requiredString reads the string member key of o; field is its path, for errors.
func requiredString(op string, o *jsonobj.Object, key, field string) (string, error) {
	raw, ok := o.Get(key)
	if !ok {
		return "", fieldError(op, field, ErrMissing)
	}
	s, ok := jsonobj.String(raw)
	if !ok {
		return "", fieldError(op, field, ErrWrongType)
	}
	return s, nil
}

func normalizeMessages(op string, top *jsonobj.Object) ([]session.Message, error) {
	raw, ok := top.Get("messages")
	if !ok {
		return nil, fieldError(op, "messages", ErrMissing)
	}
	items, ok := jsonobj.SplitArray(raw)
	if !ok {
		return nil, fieldError(op, "messages", ErrWrongType)
	}
	msgs := make([]session.Message, 0, len(items))
	for i, item := range items {
		m, err := normalizeMessage(op, fmt.Sprintf("messages[%d]", i), item)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

func normalizeMessage(op, path string, raw json.RawMessage) (session.Message, error) {
	o, err := jsonobj.Parse(raw)
	if err != nil {
		return session.Message{}, fieldError(op, path, ErrWrongType)
	}
	for _, k := range o.Keys {
		if k != "role" && k != "content" {
			return session.Message{}, fieldError(op, path+"."+k, ErrUnknownField)
		}
	}
	role, err := requiredString(op, o, "role", path+".role")
	if err != nil {
		return session.Message{}, err
	}
	content, _ := o.Get("content")
	return session.Message{Role: role, Content: content}, nil
}

// systemText is the text of a wire system value: a string is its own text, and an array of blocks
// contributes the text of its text blocks, joined by a blank line. The text is what a reader, a
// token estimate or a fork's system override works with; it cannot say whether the wire had a string
// or blocks, how the text was split, or where cache_control breakpoints sat, so the wire value itself
// is kept in Params["system"] whenever it is anything but a non-empty string.
func systemText(raw json.RawMessage) string {
	switch jsonobj.Kind(raw) {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	case '[':
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(raw, &blocks)
		var texts []string
		for _, b := range blocks {
			if b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
		return strings.Join(texts, "\n\n")
	}
	return ""
}

// DenormalizeRequest builds the wire body for a neutral request: model, system, messages, then the
// params in key order. It is the inverse of NormalizeRequest: normalizing its output gives req back
// for any req NormalizeRequest produced, and denormalizing a normalized body gives the same JSON.
//
// System is the authority on the system prompt's text. While it still equals the text of
// Params["system"], the kept wire value is sent unchanged, blocks and cache_control included. Once it
// differs — a fork overrode it — it is sent as text: replacing the text of a lone text block (which
// keeps that block's cache_control), or as a plain string otherwise. An empty System sends no system.
func (Codec) DenormalizeRequest(req session.Request) ([]byte, error) {
	const op = "DenormalizeRequest"
	msgs, err := denormalizeMessages(op, req.Messages)
	if err != nil {
		return nil, err
	}
	body := jsonobj.New()
	body.Set("model", jsonobj.Quote(req.Model))
	if sys, ok := denormalizeSystem(req); ok {
		body.Set("system", sys)
	}
	body.Set("messages", msgs)
	keys := make([]string, 0, len(req.Params))
	for k := range req.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := req.Params[k]
		switch {
		case k == "model" || k == "messages":
			return nil, fieldError(op, "params."+k, ErrReserved)
		case !jsonscan.Valid(v):
			return nil, fieldError(op, "params."+k, ErrNotJSON)
		case k != "system": // placed by denormalizeSystem
			body.Set(k, jsonobj.Compact(v))
		}
	}
	return body.Marshal(), nil
}

func denormalizeMessages(op string, msgs []session.Message) (json.RawMessage, error) {
	b := []byte{'['}
	for i, m := range msgs {
		path := fmt.Sprintf("messages[%d]", i)
		if m.Role == "" {
			return nil, fieldError(op, path+".role", ErrMissing)
		}
		o := jsonobj.New()
		o.Set("role", jsonobj.Quote(m.Role))
		if m.Content != nil {
			content, ok := jsonobj.CompactValid(m.Content)
			if !ok {
				return nil, fieldError(op, path+".content", ErrNotJSON)
			}
			o.Set("content", content)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, o.Marshal()...)
	}
	return append(b, ']'), nil
}

// denormalizeSystem applies the system rule of DenormalizeRequest; ok is false when no system member
// is to be sent.
func denormalizeSystem(req session.Request) (json.RawMessage, bool) {
	kept, hasKept := req.Params["system"]
	if hasKept && systemText(kept) == req.System {
		return jsonobj.Compact(kept), true
	}
	if req.System == "" {
		return nil, false
	}
	if hasKept {
		if block, ok := retextLoneBlock(kept, req.System); ok {
			return block, true
		}
	}
	return jsonobj.Quote(req.System), true
}

// retextLoneBlock replaces the text of a system array holding exactly one text block, keeping the
// block's other members (cache_control above all) where they were.
func retextLoneBlock(kept json.RawMessage, text string) (json.RawMessage, bool) {
	var items []json.RawMessage
	if jsonobj.Kind(kept) != '[' || json.Unmarshal(kept, &items) != nil || len(items) != 1 {
		return nil, false
	}
	block, err := jsonobj.Parse(items[0])
	if err != nil {
		return nil, false
	}
	if t, _ := block.Get("type"); string(t) != `"text"` {
		return nil, false
	}
	block.Set("text", jsonobj.Quote(text))
	return append(append(json.RawMessage{'['}, block.Marshal()...), ']'), true
}
