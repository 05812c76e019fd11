package openai

import (
	"encoding/json"
	"strconv"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// NormalizeResponse maps a chat.completion body (the response of POST /v1/chat/completions) to the
// neutral response: Content is the first choice's message as it was (role, content, refusal,
// tool_calls, annotations, audio, ...), StopReason its finish_reason ("" while null), Usage the token
// counts. Raw keeps everything else — id, object, created, model, service_tier, system_fingerprint,
// the detailed usage, the first choice without its message, every further choice (n > 1) whole, and
// any member a newer API adds — which is the envelope DenormalizeResponse puts the message back into.
// The message is not repeated in Raw, so a large answer is stored once. A completion without choices
// has no Content.
func (Codec) NormalizeResponse(body []byte) (session.Response, error) {
	const op = "NormalizeResponse"
	c, err := parseBody(op, body)
	if err != nil {
		return session.Response{}, err
	}
	return splitCompletion(op, c)
}

// splitCompletion splits a parsed chat.completion into the first choice's message and the envelope.
// It consumes c.
func splitCompletion(op string, c *jsonobj.Object) (session.Response, error) {
	choices, err := choicesOf(op, c, "choices")
	if err != nil {
		return session.Response{}, err
	}
	var resp session.Response
	if len(choices) > 0 {
		first, err := jsonobj.Parse(choices[0])
		if err != nil {
			return session.Response{}, fieldError(op, "choices[0]", ErrWrongType)
		}
		if msg, ok := first.Get("message"); ok {
			if jsonobj.Kind(msg) != '{' {
				return session.Response{}, fieldError(op, "choices[0].message", ErrWrongType)
			}
			resp.Content = msg
			first.Del("message")
		}
		if resp.StopReason, err = finishReasonOf(op, first, "choices[0].finish_reason"); err != nil {
			return session.Response{}, err
		}
		choices[0] = first.Marshal()
		c.Set("choices", joinArray(choices))
	}
	if resp.Usage, err = usageOf(op, c); err != nil {
		return session.Response{}, err
	}
	resp.Raw = c.Marshal()
	return resp, nil
}

// choicesOf reads the choices array of a completion; field is its path, for errors.
func choicesOf(op string, c *jsonobj.Object, field string) ([]json.RawMessage, error) {
	raw, ok := c.Get("choices")
	if !ok {
		return nil, fieldError(op, field, ErrMissing)
	}
	var choices []json.RawMessage
	if jsonobj.Kind(raw) != '[' || json.Unmarshal(raw, &choices) != nil {
		return nil, fieldError(op, field, ErrWrongType)
	}
	return choices, nil
}

func finishReasonOf(op string, choice *jsonobj.Object, field string) (string, error) {
	raw, _ := choice.Get("finish_reason")
	if jsonobj.IsNull(raw) {
		return "", nil
	}
	var s string
	if jsonobj.Kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fieldError(op, field, ErrWrongType)
	}
	return s, nil
}

// wireUsage is the part of the wire usage the neutral Usage is computed from. prompt_tokens already
// counts the cached tokens and completion_tokens the reasoning tokens; the details only break them
// down.
type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// usageMember decodes the usage member of o into w; present is false when there is none (absent or
// null). Both APIs spell it as an object.
func usageMember(op string, o *jsonobj.Object, w any) (present bool, err error) {
	raw, _ := o.Get("usage")
	if jsonobj.IsNull(raw) {
		return false, nil
	}
	if jsonobj.Kind(raw) != '{' || json.Unmarshal(raw, w) != nil {
		return false, fieldError(op, "usage", ErrWrongType)
	}
	return true, nil
}

// usageOf reads the usage member of a completion; nil when there is none.
func usageOf(op string, c *jsonobj.Object) (*session.Usage, error) {
	var w wireUsage
	if present, err := usageMember(op, c, &w); !present || err != nil {
		return nil, err
	}
	u := &session.Usage{InputTokens: w.PromptTokens, OutputTokens: w.CompletionTokens}
	if w.PromptTokensDetails != nil {
		u.CacheReadInputTokens = w.PromptTokensDetails.CachedTokens
	}
	return u, nil
}

// DenormalizeResponse rebuilds a chat.completion body from a neutral response: the envelope kept in
// Raw with Content put back as the first choice's message. The neutral fields are the authority, so a
// response a fork stubbed or edited comes out as edited: a StopReason that differs from the first
// choice's finish_reason replaces it, and a Usage whose counts differ replaces prompt_tokens,
// completion_tokens and total_tokens and zeroes the breakdown of a count that changed, since the
// neutral form no longer says how it splits. Without Raw, the envelope is the minimum the SDK needs:
// object "chat.completion" and one choice with index 0.
func (Codec) DenormalizeResponse(resp session.Response) ([]byte, error) {
	const op = "DenormalizeResponse"
	env, err := envelope(op, resp.Raw)
	if err != nil {
		return nil, err
	}
	choices, err := choicesOf(op, env, "raw.choices")
	if err != nil {
		return nil, err
	}
	if len(choices) == 0 && (resp.Content != nil || resp.StopReason != "") {
		choices = []json.RawMessage{json.RawMessage(`{"index":0,"finish_reason":null}`)}
	}
	if len(choices) > 0 {
		first, err := jsonobj.Parse(choices[0])
		if err != nil {
			return nil, fieldError(op, "raw.choices[0]", ErrWrongType)
		}
		if resp.Content != nil {
			msg, ok := jsonobj.CompactValid(resp.Content)
			if !ok {
				return nil, fieldError(op, "content", ErrNotJSON)
			}
			if jsonobj.Kind(msg) != '{' {
				return nil, fieldError(op, "content", ErrWrongType)
			}
			first.SetAfter("message", msg, "index")
		}
		if cur, _ := finishReasonOf(op, first, ""); cur != resp.StopReason {
			first.SetAfter("finish_reason", nullableString(resp.StopReason), "logprobs", "message", "index")
		}
		choices[0] = first.Marshal()
		env.Set("choices", joinArray(choices))
	}
	if resp.Usage != nil {
		reconcileUsage(op, env, *resp.Usage)
	}
	return env.Marshal(), nil
}

func envelope(op string, raw json.RawMessage) (*jsonobj.Object, error) {
	if len(raw) == 0 {
		env := jsonobj.New()
		env.Set("object", jsonobj.Quote("chat.completion"))
		env.Set("choices", json.RawMessage(`[{"index":0,"finish_reason":null}]`))
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

// reconcileUsage makes the envelope's usage say u, leaving it alone when it already does.
func reconcileUsage(op string, env *jsonobj.Object, u session.Usage) {
	cur, err := usageOf(op, env)
	// A neutral usage without the cached count (recorded before it was kept, or edited) agrees with the
	// envelope when the totals do, so an old recording is served unchanged.
	if err == nil && cur != nil && cur.InputTokens == u.InputTokens && cur.OutputTokens == u.OutputTokens &&
		cur.CostMicroUSD == u.CostMicroUSD && (u.CacheReadInputTokens == 0 || cur.CacheReadInputTokens == u.CacheReadInputTokens) {
		return
	}
	usage := jsonobj.New()
	if raw, _ := env.Get("usage"); jsonobj.Kind(raw) == '{' {
		if kept, err := jsonobj.Parse(raw); err == nil {
			usage = kept
		}
	}
	if cur == nil || cur.InputTokens != u.InputTokens || cur.CacheReadInputTokens != u.CacheReadInputTokens {
		zeroCounts(usage, "prompt_tokens_details")
		if u.CacheReadInputTokens > 0 && u.CacheReadInputTokens <= u.InputTokens {
			details := jsonobj.New()
			if raw, _ := usage.Get("prompt_tokens_details"); jsonobj.Kind(raw) == '{' {
				if kept, err := jsonobj.Parse(raw); err == nil {
					details = kept
				}
			}
			details.Set("cached_tokens", number(u.CacheReadInputTokens))
			usage.Set("prompt_tokens_details", details.Marshal())
		}
	}
	if cur == nil || cur.OutputTokens != u.OutputTokens {
		zeroCounts(usage, "completion_tokens_details")
	}
	usage.Set("completion_tokens", number(u.OutputTokens))
	usage.Set("prompt_tokens", number(u.InputTokens))
	usage.Set("total_tokens", number(u.InputTokens+u.OutputTokens))
	env.SetAfter("usage", usage.Marshal(), "choices")
}

// zeroCounts sets every number in the breakdown object key of usage to 0.
func zeroCounts(usage *jsonobj.Object, key string) {
	raw, _ := usage.Get(key)
	details, err := jsonobj.Parse(raw)
	if jsonobj.Kind(raw) != '{' || err != nil {
		return
	}
	for _, k := range details.Keys {
		if jsonobj.Kind(details.Vals[k]) == '0' {
			details.Set(k, number(0))
		}
	}
	usage.Set(key, details.Marshal())
}

func number(n int64) json.RawMessage { return json.RawMessage(strconv.FormatInt(n, 10)) }

// joinArray writes JSON values as an array.
func joinArray(items []json.RawMessage) json.RawMessage {
	b := []byte{'['}
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}
