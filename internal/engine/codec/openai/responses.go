package openai

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// ResponsesProvider is the provider name recorded on model calls made through the Responses API.
const ResponsesProvider = "openai-responses"

// ResponsesCodec maps the OpenAI Responses API (POST /v1/responses) to and from the engine's neutral
// session types. It has no state; the zero value is ready to use and safe for concurrent use.
//
// Requests: model is Model; instructions, when a non-empty string, is System; input items are
// Messages. An item with a role keeps it, and its content alone when that is all it has (the chat
// rule: otherwise Content is an object of its members but role). An item without a role (a
// function_call, function_call_output, reasoning or item_reference item) is a message whose Role is
// its type and whose Content is the item itself, whole; an object Content whose "type" equals the
// message's Role is such an item, so the two cases cannot be confused. Every other member goes to
// Params. Params["input"] keeps the wire's input when it was not a non-empty array (a string, [],
// null), and Params["instructions"] the wire's instructions when they were not a non-empty string, so
// that a body comes back as it was sent.
//
// Responses: Content is the output array, StopReason the status, Usage the token counts, and Raw the
// response object without its output.
type ResponsesCodec struct{}

// Name implements replay.Codec.
func (ResponsesCodec) Name() string { return ResponsesProvider }

// responsesVolatile vary between otherwise identical calls without changing the answer: the
// transport (stream, stream_options, background), who the end user is (user, safety_identifier,
// prompt_cache_key), and storage bookkeeping (metadata, store).
var responsesVolatile = []string{
	"stream", "stream_options", "background", "user", "safety_identifier", "prompt_cache_key", "metadata", "store",
}

// StripVolatile implements replay.Codec: req without the volatile params. previous_response_id is
// kept: it says which conversation the input continues, and a replayed agent sends the recorded id.
func (ResponsesCodec) StripVolatile(req session.Request) session.Request {
	if req.Params == nil {
		return req
	}
	req.Params = maps.Clone(req.Params)
	for _, k := range responsesVolatile {
		delete(req.Params, k)
	}
	if len(req.Params) == 0 {
		req.Params = nil
	}
	return req
}

// VolatilePaths implements replay.Codec: structural fingerprints mask the sampling parameters, the
// output budgets and the reasoning settings.
func (ResponsesCodec) VolatilePaths() []string {
	return []string{
		"params.temperature",
		"params.top_p",
		"params.top_logprobs",
		"params.max_output_tokens",
		"params.max_tool_calls",
		"params.reasoning",
	}
}

// NormalizeRequest maps a POST /v1/responses body to the neutral request (see ResponsesCodec).
// model is required; input, when given, is a string or an array of objects, each with a non-empty
// string role or type.
func (ResponsesCodec) NormalizeRequest(body []byte) (session.Request, error) {
	const op = "NormalizeRequest"
	top, err := parseBody(op, body)
	if err != nil {
		return session.Request{}, err
	}
	var req session.Request
	if req.Model, err = requiredString(op, top, "model", "model"); err != nil {
		return session.Request{}, err
	}
	params := map[string]json.RawMessage{}
	if raw, ok := top.Get("instructions"); ok {
		var s string
		if jsonobj.Kind(raw) == '"' && json.Unmarshal(raw, &s) == nil && s != "" {
			req.System = s
		} else {
			params["instructions"] = raw
		}
	}
	if raw, ok := top.Get("input"); ok {
		if req.Messages, err = inputMessages(op, raw); err != nil {
			return session.Request{}, err
		}
		if jsonobj.Kind(raw) != '[' || len(req.Messages) == 0 {
			params["input"] = raw
		}
	}
	for _, k := range top.Keys {
		if k != "model" && k != "instructions" && k != "input" {
			params[k] = top.Vals[k]
		}
	}
	if len(params) > 0 {
		req.Params = params
	}
	return req, nil
}

// inputMessages maps the wire's input to messages: a string is one user message, an array one
// message per item, null none.
func inputMessages(op string, raw json.RawMessage) ([]session.Message, error) {
	switch jsonobj.Kind(raw) {
	case '"':
		return []session.Message{{Role: "user", Content: raw}}, nil
	case 'n':
		return nil, nil
	case '[':
	default:
		return nil, fieldError(op, "input", ErrWrongType)
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, fieldError(op, "input", ErrWrongType)
	}
	msgs := make([]session.Message, 0, len(items))
	for i, item := range items {
		m, err := itemMessage(op, fmt.Sprintf("input[%d]", i), item)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// itemMessage maps one input item to a message.
func itemMessage(op, path string, item json.RawMessage) (session.Message, error) {
	o, err := jsonobj.Parse(item)
	if err != nil {
		return session.Message{}, fieldError(op, path, ErrWrongType)
	}
	if _, hasRole := o.Get("role"); hasRole {
		role, err := requiredString(op, o, "role", path+".role")
		if err != nil {
			return session.Message{}, err
		}
		if role == "" {
			return session.Message{}, fieldError(op, path+".role", ErrMissing)
		}
		if typ, _ := o.Get("type"); string(typ) == string(jsonobj.Quote(role)) {
			// {"type": "x", "role": "x"} would read back as a role-less item of type x.
			return session.Message{}, fieldError(op, path+".role", fmt.Errorf("%w: a role equal to the item's type", ErrWrongType))
		}
		return neutralMessage(o), nil
	}
	typ, err := requiredString(op, o, "type", path+".type")
	if err != nil {
		return session.Message{}, fmt.Errorf("%w (an input item has a role or a type)", err)
	}
	if typ == "" {
		return session.Message{}, fieldError(op, path+".type", ErrMissing)
	}
	return session.Message{Role: typ, Content: o.Marshal()}, nil
}

// DenormalizeRequest builds the wire body for a neutral request: model, instructions, input, then
// the params in key order. It is the inverse of NormalizeRequest. A System that differs from what
// the kept instructions say (a fork overrode it) is sent as the instructions string; Messages that
// no longer say what the kept string or empty input said are sent as items.
func (ResponsesCodec) DenormalizeRequest(req session.Request) ([]byte, error) {
	const op = "DenormalizeRequest"
	body := jsonobj.New()
	body.Set("model", jsonobj.Quote(req.Model))
	kept, hasKept := req.Params["instructions"]
	switch {
	case req.System != "":
		body.Set("instructions", jsonobj.Quote(req.System))
	case hasKept && !jsonscan.Valid(kept):
		return nil, fieldError(op, "params.instructions", ErrNotJSON)
	case hasKept:
		body.Set("instructions", jsonobj.Compact(kept))
	}
	input, err := denormalizeInput(op, req)
	if err != nil {
		return nil, err
	}
	if input != nil {
		body.Set("input", input)
	}
	keys := make([]string, 0, len(req.Params))
	for k := range req.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := req.Params[k]
		switch {
		case k == "model":
			return nil, fieldError(op, "params."+k, ErrReserved)
		case k == "instructions" || k == "input": // placed above
		case !jsonscan.Valid(v):
			return nil, fieldError(op, "params."+k, ErrNotJSON)
		default:
			body.Set(k, jsonobj.Compact(v))
		}
	}
	return body.Marshal(), nil
}

// denormalizeInput is the wire's input for req, nil for none.
func denormalizeInput(op string, req session.Request) (json.RawMessage, error) {
	if kept, ok := req.Params["input"]; ok {
		if kept, ok = jsonobj.CompactValid(kept); !ok {
			return nil, fieldError(op, "params.input", ErrNotJSON)
		}
		switch {
		case jsonobj.Kind(kept) == '"' && len(req.Messages) == 1 && req.Messages[0].Role == "user" &&
			string(jsonobj.Compact(req.Messages[0].Content)) == string(kept):
			return kept, nil
		case jsonobj.Kind(kept) != '"' && len(req.Messages) == 0:
			return kept, nil
		}
	}
	if len(req.Messages) == 0 {
		return nil, nil
	}
	items := make([]json.RawMessage, 0, len(req.Messages))
	for i, m := range req.Messages {
		item, err := messageItem(op, fmt.Sprintf("messages[%d]", i), m)
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	return joinArray(items), nil
}

// messageItem is the input item a message stands for.
func messageItem(op, path string, m session.Message) (json.RawMessage, error) {
	if m.Role == "" {
		return nil, fieldError(op, path+".role", ErrMissing)
	}
	var content json.RawMessage // nil stays nil
	if m.Content != nil {
		var ok bool
		if content, ok = jsonobj.CompactValid(m.Content); !ok {
			return nil, fieldError(op, path+".content", ErrNotJSON)
		}
	}
	if jsonobj.Kind(content) == '{' {
		members, err := jsonobj.Parse(content)
		if err != nil {
			return nil, fieldError(op, path+".content", ErrWrongType)
		}
		if typ, _ := members.Get("type"); string(typ) == string(jsonobj.Quote(m.Role)) {
			return members.Marshal(), nil // a role-less item, whole
		}
	}
	msgs, err := denormalizeMessages(op, nil, []session.Message{m})
	if ce, ok := err.(*CodecError); ok {
		ce.Field = path + strings.TrimPrefix(ce.Field, "messages[0]")
	}
	if err != nil {
		return nil, err
	}
	return msgs[1 : len(msgs)-1], nil
}
