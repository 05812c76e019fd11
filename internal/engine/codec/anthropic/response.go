package anthropic

import (
	"encoding/json"
	"strconv"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// NormalizeResponse maps a Message body (the response of POST /v1/messages) to the neutral response:
// Content is the content block array as it was, StopReason the stop_reason ("" while null), Usage the
// token counts (cache writes and reads count as input). Raw keeps everything else the message said —
// id, type, role, model, stop_sequence, the detailed usage, and any member a newer API adds — which
// is the envelope DenormalizeResponse puts the content back into. Content is not repeated in Raw, so
// a large answer is stored once.
func (Codec) NormalizeResponse(body []byte) (session.Response, error) {
	const op = "NormalizeResponse"
	msg, err := parseBody(op, body)
	if err != nil {
		return session.Response{}, err
	}
	return splitMessage(op, msg)
}

// splitMessage splits a parsed Message into content and envelope. It consumes msg.
func splitMessage(op string, msg *jsonobj.Object) (session.Response, error) {
	content, ok := msg.Get("content")
	if !ok {
		return session.Response{}, fieldError(op, "content", ErrMissing)
	}
	if jsonobj.Kind(content) != '[' {
		return session.Response{}, fieldError(op, "content", ErrWrongType)
	}
	stop, err := stopReasonOf(op, msg)
	if err != nil {
		return session.Response{}, err
	}
	usage, err := usageOf(op, msg)
	if err != nil {
		return session.Response{}, err
	}
	msg.Del("content")
	return session.Response{Content: content, StopReason: stop, Usage: usage, Raw: msg.Marshal()}, nil
}

func stopReasonOf(op string, msg *jsonobj.Object) (string, error) {
	raw, _ := msg.Get("stop_reason")
	if jsonobj.IsNull(raw) {
		return "", nil
	}
	var s string
	if jsonobj.Kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fieldError(op, "stop_reason", ErrWrongType)
	}
	return s, nil
}

// wireUsage is the part of the wire usage the neutral Usage is computed from. The cache counts are
// separate from input_tokens on the wire; the total input of a call is their sum.
type wireUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

// usageOf reads the usage member of a message; nil when there is none.
func usageOf(op string, msg *jsonobj.Object) (*session.Usage, error) {
	raw, _ := msg.Get("usage")
	if jsonobj.IsNull(raw) {
		return nil, nil
	}
	var w wireUsage
	if jsonobj.Kind(raw) != '{' || json.Unmarshal(raw, &w) != nil {
		return nil, fieldError(op, "usage", ErrWrongType)
	}
	return &session.Usage{
		InputTokens:              w.InputTokens + w.CacheCreationInputTokens + w.CacheReadInputTokens,
		OutputTokens:             w.OutputTokens,
		CacheCreationInputTokens: w.CacheCreationInputTokens,
		CacheReadInputTokens:     w.CacheReadInputTokens,
	}, nil
}

// DenormalizeResponse rebuilds a Message body from a neutral response: the envelope kept in Raw with
// Content put back after model. The neutral fields are the authority, so a response a fork stubbed or
// edited comes out as edited: a StopReason that differs from the envelope's replaces it, and a Usage
// that differs replaces the envelope's counts (split into uncached and cache counts when the neutral
// usage says how the input split, else input_tokens takes the whole input and the cache counts become
// 0). Without Raw, the
// envelope is the minimum the SDK needs: type "message" and role "assistant".
func (Codec) DenormalizeResponse(resp session.Response) ([]byte, error) {
	const op = "DenormalizeResponse"
	env, err := envelope(op, resp.Raw)
	if err != nil {
		return nil, err
	}
	content := resp.Content
	if content == nil {
		content = json.RawMessage("[]")
	}
	content, ok := jsonobj.CompactValid(content)
	if !ok {
		return nil, fieldError(op, "content", ErrNotJSON)
	}
	env.SetAfter("content", content, "model", "role", "type", "id")
	if cur, _ := stopReasonOf(op, env); cur != resp.StopReason {
		env.SetAfter("stop_reason", nullableString(resp.StopReason), "content")
	}
	if resp.Usage != nil {
		reconcileUsage(op, env, *resp.Usage)
	}
	return env.Marshal(), nil
}

func envelope(op string, raw json.RawMessage) (*jsonobj.Object, error) {
	if len(raw) == 0 {
		env := jsonobj.New()
		env.Set("type", jsonobj.Quote("message"))
		env.Set("role", jsonobj.Quote("assistant"))
		return env, nil
	}
	if !jsonscan.Valid(raw) {
		return nil, fieldError(op, "raw", ErrNotJSON)
	}
	env, err := jsonobj.ParseValid(raw)
	if err != nil {
		return nil, fieldError(op, "raw", ErrWrongType)
	}
	return env, nil
}

func nullableString(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("null")
	}
	return jsonobj.Quote(s)
}

// reconcileUsage makes the envelope's usage say u, leaving it alone when its totals already do.
func reconcileUsage(op string, env *jsonobj.Object, u session.Usage) {
	// A neutral usage without a cache split (recorded before the split was kept, or edited) agrees with
	// the envelope when the totals do, so an old recording is served unchanged.
	noSplit := u.CacheCreationInputTokens == 0 && u.CacheReadInputTokens == 0
	if cur, err := usageOf(op, env); err == nil && cur != nil &&
		cur.InputTokens == u.InputTokens && cur.OutputTokens == u.OutputTokens &&
		(noSplit || cur.CacheCreationInputTokens == u.CacheCreationInputTokens && cur.CacheReadInputTokens == u.CacheReadInputTokens) {
		return
	}
	usage := jsonobj.New()
	if raw, _ := env.Get("usage"); jsonobj.Kind(raw) == '{' {
		if kept, err := jsonobj.Parse(raw); err == nil {
			usage = kept
		}
	}
	uncached, creation, read := u.InputTokens, int64(0), int64(0)
	if split := u.CacheCreationInputTokens + u.CacheReadInputTokens; split > 0 && split <= u.InputTokens {
		uncached, creation, read = u.InputTokens-split, u.CacheCreationInputTokens, u.CacheReadInputTokens
	}
	usage.Set("input_tokens", number(uncached))
	for _, c := range []struct {
		key string
		n   int64
	}{{"cache_creation_input_tokens", creation}, {"cache_read_input_tokens", read}} {
		if _, ok := usage.Get(c.key); ok || c.n > 0 {
			usage.Set(c.key, number(c.n))
		}
	}
	usage.Set("output_tokens", number(u.OutputTokens))
	env.SetAfter("usage", usage.Marshal(), "stop_sequence", "stop_reason", "content")
}

func number(n int64) json.RawMessage { return json.RawMessage(strconv.FormatInt(n, 10)) }
