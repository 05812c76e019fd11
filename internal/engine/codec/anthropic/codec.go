package anthropic

import (
	"maps"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Provider is the provider name recorded on model calls made through this codec.
const Provider = "anthropic"

// Codec maps the Anthropic Messages API (POST /v1/messages) to and from the engine's neutral
// session types. It has no state; the zero value is ready to use and safe for concurrent use.
type Codec struct{}

// Name implements replay.Codec.
func (Codec) Name() string { return Provider }

// volatileParams vary between otherwise identical calls without changing the answer: streaming is a
// transport choice, and metadata.user_id identifies the caller to the provider.
var volatileParams = []string{"stream", "metadata"}

// StripVolatile implements replay.Codec: it returns req without stream and metadata. The caller's
// Params map is not modified.
func (Codec) StripVolatile(req session.Request) session.Request {
	if req.Params == nil {
		return req
	}
	req.Params = maps.Clone(req.Params)
	for _, k := range volatileParams {
		delete(req.Params, k)
	}
	if len(req.Params) == 0 {
		req.Params = nil
	}
	return req
}

// VolatilePaths implements replay.Codec. Structural fingerprints mask the knobs that tune how an
// answer is sampled and how long it may get, but not what is asked: the sampling parameters, the
// output budget and the extended-thinking budget. The paths are into the neutral request's JSON form.
func (Codec) VolatilePaths() []string {
	return []string{
		"params.temperature",
		"params.top_p",
		"params.top_k",
		"params.max_tokens",
		"params.thinking.budget_tokens",
	}
}

// Usage returns the token accounting of a response: its Usage when set, otherwise what the wire usage
// kept in Raw says. Cache writes and reads count as input, because they are input tokens the call
// consumed. Cost is left 0: prices are not part of the wire format.
func (Codec) Usage(resp session.Response) *session.Usage {
	if resp.Usage != nil {
		u := *resp.Usage
		return &u
	}
	if len(resp.Raw) == 0 {
		return nil
	}
	env, err := jsonobj.Parse(resp.Raw)
	if err != nil {
		return nil
	}
	u, err := usageOf("Usage", env)
	if err != nil {
		return nil
	}
	return u
}
