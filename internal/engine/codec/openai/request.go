package openai

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// systemRoles are the roles of a system prompt: "developer" is what newer models call it.
var systemRoles = map[string]bool{"system": true, "developer": true}

// NormalizeRequest maps a POST /v1/chat/completions body to the neutral request.
//
//   - model and messages are required.
//   - The first message, when its role is system or developer, is the system prompt and follows the
//     package's system rule: Request.System holds its text and, unless it was a plain
//     {"role":"system","content":"<non-empty text>"}, Params["system"] holds the message itself.
//   - Every other message keeps its role, and its content as the wire had it when content is all it
//     has; a message with more (tool_calls, tool_call_id, name, refusal, audio, ...) or whose
//     content is an object gets Content = an object of all its members but role, in wire order.
//   - Every other member (tools, tool_choice, response_format, temperature, stream, ...) goes into
//     Params as it was. A top-level "system" member is refused: the API has none, and its place in
//     Params is the system prompt's.
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
	if _, ok := top.Get("system"); ok {
		return session.Request{}, fieldError(op, "system", ErrUnknownField)
	}
	msgs, err := messageObjects(op, top)
	if err != nil {
		return session.Request{}, err
	}
	if len(msgs) > 0 && systemRoles[roleOf(msgs[0])] {
		sys := msgs[0]
		msgs = msgs[1:]
		req.System = systemText(sys)
		if !plainSystem(sys, req.System) {
			req.Params = map[string]json.RawMessage{"system": sys.Marshal()}
		}
	}
	req.Messages = make([]session.Message, 0, len(msgs))
	for _, m := range msgs {
		req.Messages = append(req.Messages, neutralMessage(m))
	}
	for _, k := range top.Keys {
		if k == "model" || k == "messages" {
			continue
		}
		if req.Params == nil {
			req.Params = map[string]json.RawMessage{}
		}
		req.Params[k] = top.Vals[k]
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

// messageObjects reads the messages member: an array of objects, each with a non-empty string role.
func messageObjects(op string, top *jsonobj.Object) ([]*jsonobj.Object, error) {
	raw, ok := top.Get("messages")
	if !ok {
		return nil, fieldError(op, "messages", ErrMissing)
	}
	items, ok := jsonobj.SplitArray(raw)
	if !ok {
		return nil, fieldError(op, "messages", ErrWrongType)
	}
	msgs := make([]*jsonobj.Object, 0, len(items))
	for i, item := range items {
		path := fmt.Sprintf("messages[%d]", i)
		m, err := jsonobj.Parse(item)
		if err != nil {
			return nil, fieldError(op, path, ErrWrongType)
		}
		role, err := requiredString(op, m, "role", path+".role")
		if err != nil {
			return nil, err
		}
		if role == "" {
			// No role is no message; DenormalizeRequest could not send it back.
			return nil, fieldError(op, path+".role", ErrMissing)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

func roleOf(m *jsonobj.Object) string {
	var s string
	raw, _ := m.Get("role")
	_ = json.Unmarshal(raw, &s)
	return s
}

// neutralMessage applies the content rule: content alone stays content, anything more becomes an
// object of every member but role. The wire's content is never an object, so an object Content is
// unambiguous.
func neutralMessage(m *jsonobj.Object) session.Message {
	role := roleOf(m)
	content, hasContent := m.Get("content")
	if m.Len() == 1 || (m.Len() == 2 && hasContent && jsonobj.Kind(content) != '{') {
		return session.Message{Role: role, Content: content}
	}
	m.Del("role")
	return session.Message{Role: role, Content: m.Marshal()}
}

// systemText is the text of a system message: a string content is its own text, and an array of
// content parts contributes the text of its text parts, joined by a blank line. The text is what a
// reader, a token estimate or a fork's system override works with; it cannot say whether the wire had
// a string or parts, the developer role, or a name, so the message itself is kept in Params["system"]
// whenever it is anything but a plain system message with non-empty text.
func systemText(m *jsonobj.Object) string {
	raw, _ := m.Get("content")
	switch jsonobj.Kind(raw) {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(raw, &parts)
		var texts []string
		for _, p := range parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, "\n\n")
	}
	return ""
}

// plainSystem reports whether the text alone says all of a system message: {"role":"system",
// "content": text} with text non-empty.
func plainSystem(m *jsonobj.Object, text string) bool {
	content, ok := m.Get("content")
	return m.Len() == 2 && ok && jsonobj.Kind(content) == '"' && text != "" && roleOf(m) == "system"
}

// DenormalizeRequest builds the wire body for a neutral request: model, messages (the system prompt
// first), then the params in key order. It is the inverse of NormalizeRequest: normalizing its output
// gives req back for any req NormalizeRequest produced, and denormalizing a normalized body gives the
// same JSON.
//
// System is the authority on the system prompt's text. While it still equals the text of the message
// kept in Params["system"], that message is sent unchanged. Once it differs — a fork overrode it — the
// kept message keeps its role (developer stays developer) and other members, and takes the new text
// in place of its string content or of the text of its lone text part, or as a plain string
// otherwise. Without a kept message it is sent as {"role":"system","content":System}. An empty System
// sends no system message.
func (Codec) DenormalizeRequest(req session.Request) ([]byte, error) {
	const op = "DenormalizeRequest"
	sys, err := denormalizeSystem(op, req)
	if err != nil {
		return nil, err
	}
	msgs, err := denormalizeMessages(op, sys, req.Messages)
	if err != nil {
		return nil, err
	}
	body := jsonobj.New()
	body.Set("model", jsonobj.Quote(req.Model))
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
		case k == "system": // placed by denormalizeSystem
		case !jsonscan.Valid(v):
			return nil, fieldError(op, "params."+k, ErrNotJSON)
		default:
			body.Set(k, jsonobj.Compact(v))
		}
	}
	return body.Marshal(), nil
}

func denormalizeMessages(op string, sys json.RawMessage, msgs []session.Message) (json.RawMessage, error) {
	b := []byte{'['}
	if sys != nil {
		b = append(b, sys...)
	}
	for i, m := range msgs {
		path := fmt.Sprintf("messages[%d]", i)
		if m.Role == "" {
			return nil, fieldError(op, path+".role", ErrMissing)
		}
		o := jsonobj.New()
		o.Set("role", jsonobj.Quote(m.Role))
		switch {
		case m.Content == nil:
		case !jsonscan.Valid(m.Content):
			return nil, fieldError(op, path+".content", ErrNotJSON)
		case jsonobj.Kind(jsonobj.Compact(m.Content)) == '{':
			members, _ := jsonobj.Parse(m.Content)
			for _, k := range members.Keys {
				if k == "role" {
					return nil, fieldError(op, path+".content.role", ErrReserved)
				}
				o.Set(k, members.Vals[k])
			}
		default:
			o.Set("content", jsonobj.Compact(m.Content))
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, o.Marshal()...)
	}
	return append(b, ']'), nil
}

// denormalizeSystem applies the system rule of DenormalizeRequest: the system message to send first,
// or nil for none.
func denormalizeSystem(op string, req session.Request) (json.RawMessage, error) {
	raw, hasKept := req.Params["system"]
	var kept *jsonobj.Object
	if hasKept {
		if !jsonscan.Valid(raw) {
			return nil, fieldError(op, "params.system", ErrNotJSON)
		}
		var err error
		if kept, err = jsonobj.Parse(raw); err != nil {
			return nil, fieldError(op, "params.system", ErrWrongType)
		}
		if systemText(kept) == req.System {
			return kept.Marshal(), nil
		}
	}
	if req.System == "" {
		return nil, nil
	}
	if kept == nil {
		kept = jsonobj.New()
		kept.Set("role", jsonobj.Quote("system"))
	}
	kept.Set("content", retext(kept, req.System))
	return kept.Marshal(), nil
}

// retext is the content of a system message that now says text: the text of a lone text part
// replaced (keeping the part's other members), or text as a plain string.
func retext(m *jsonobj.Object, text string) json.RawMessage {
	raw, _ := m.Get("content")
	var parts []json.RawMessage
	if jsonobj.Kind(raw) == '[' && json.Unmarshal(raw, &parts) == nil && len(parts) == 1 {
		if part, err := jsonobj.Parse(parts[0]); err == nil {
			if t, _ := part.Get("type"); string(t) == `"text"` {
				part.Set("text", jsonobj.Quote(text))
				return append(append(json.RawMessage{'['}, part.Marshal()...), ']')
			}
		}
	}
	return jsonobj.Quote(text)
}
