package openai

import (
	"encoding/json"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// NormalizeResponse maps a response object (the answer of POST /v1/responses) to the neutral
// response: Content is its output array as it was, StopReason its status, Usage its token counts
// (input_tokens with the cached ones, output_tokens with the reasoning ones). Raw keeps the rest —
// id, created_at, model, instructions, tools, the detailed usage and any member a newer API adds —
// which is the envelope DenormalizeResponse puts the output back into. An output that is not an
// array (absent, null) stays in Raw and Content is nil.
func (ResponsesCodec) NormalizeResponse(body []byte) (session.Response, error) {
	const op = "NormalizeResponse"
	r, err := parseBody(op, body)
	if err != nil {
		return session.Response{}, err
	}
	return splitResponse(op, r)
}

// splitResponse splits a parsed response object into its output and the envelope. It consumes r.
func splitResponse(op string, r *jsonobj.Object) (session.Response, error) {
	var resp session.Response
	out, _ := r.Get("output")
	switch jsonobj.Kind(out) {
	case '[':
		resp.Content = out
		r.Del("output")
	case 0, 'n':
	default:
		return session.Response{}, fieldError(op, "output", ErrWrongType)
	}
	if raw, _ := r.Get("status"); !jsonobj.IsNull(raw) {
		if jsonobj.Kind(raw) != '"' || json.Unmarshal(raw, &resp.StopReason) != nil {
			return session.Response{}, fieldError(op, "status", ErrWrongType)
		}
	}
	var err error
	if resp.Usage, err = responsesUsageOf(op, r); err != nil {
		return session.Response{}, err
	}
	resp.Raw = r.Marshal()
	return resp, nil
}

// responsesWireUsage is the part of a response's usage the neutral Usage is computed from.
type responsesWireUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

func responsesUsageOf(op string, r *jsonobj.Object) (*session.Usage, error) {
	var w responsesWireUsage
	if present, err := usageMember(op, r, &w); !present || err != nil {
		return nil, err
	}
	u := &session.Usage{InputTokens: w.InputTokens, OutputTokens: w.OutputTokens}
	if w.InputTokensDetails != nil {
		u.CacheReadInputTokens = w.InputTokensDetails.CachedTokens
	}
	return u, nil
}

// DenormalizeResponse rebuilds a response object from a neutral response: the envelope kept in Raw
// with Content put back as output (after model). The neutral fields are the authority, so a
// response a fork stubbed or edited comes out as edited: a StopReason that differs from status
// replaces it, and a Usage whose counts differ replaces input_tokens, output_tokens and
// total_tokens. Without Raw, the envelope is {"object":"response"}.
func (ResponsesCodec) DenormalizeResponse(resp session.Response) ([]byte, error) {
	const op = "DenormalizeResponse"
	env := jsonobj.New()
	if len(resp.Raw) > 0 {
		if !jsonscan.Valid(resp.Raw) {
			return nil, fieldError(op, "raw", ErrNotJSON)
		}
		var err error
		if env, err = jsonobj.Parse(resp.Raw); err != nil {
			return nil, fieldError(op, "raw", ErrWrongType)
		}
	} else {
		env.Set("object", jsonobj.Quote("response"))
	}
	if resp.Content != nil {
		out, ok := jsonobj.CompactValid(resp.Content)
		if !ok {
			return nil, fieldError(op, "content", ErrNotJSON)
		}
		if jsonobj.Kind(out) != '[' {
			return nil, fieldError(op, "content", ErrWrongType)
		}
		env.SetAfter("output", out, "model", "status", "object")
	}
	var status string
	if raw, _ := env.Get("status"); jsonobj.Kind(raw) == '"' {
		_ = json.Unmarshal(raw, &status)
	}
	if status != resp.StopReason {
		env.SetAfter("status", nullableString(resp.StopReason), "created_at", "object")
	}
	if resp.Usage != nil {
		cur, err := responsesUsageOf(op, env)
		if err != nil || cur == nil || cur.InputTokens != resp.Usage.InputTokens || cur.OutputTokens != resp.Usage.OutputTokens {
			usage := jsonobj.New()
			if raw, _ := env.Get("usage"); jsonobj.Kind(raw) == '{' {
				if kept, err := jsonobj.Parse(raw); err == nil {
					usage = kept
				}
			}
			usage.Set("input_tokens", number(resp.Usage.InputTokens))
			usage.Set("output_tokens", number(resp.Usage.OutputTokens))
			usage.Set("total_tokens", number(resp.Usage.InputTokens+resp.Usage.OutputTokens))
			env.Set("usage", usage.Marshal())
		}
	}
	return env.Marshal(), nil
}

// Usage implements the codec's token accounting: the response's Usage when set, otherwise what the
// usage kept in Raw says. Cost is left 0.
func (ResponsesCodec) Usage(resp session.Response) *session.Usage {
	if resp.Usage != nil {
		u := *resp.Usage
		return &u
	}
	env, err := jsonobj.Parse(resp.Raw)
	if len(resp.Raw) == 0 || err != nil {
		return nil
	}
	u, _ := responsesUsageOf("Usage", env)
	return u
}

// ResponseID is the id of a response object, "" when it has none.
func (ResponsesCodec) ResponseID(resp session.Response) string {
	env, err := jsonobj.Parse(resp.Raw)
	if len(resp.Raw) == 0 || err != nil {
		return ""
	}
	var id string
	raw, _ := env.Get("id")
	_ = json.Unmarshal(raw, &id)
	return id
}
