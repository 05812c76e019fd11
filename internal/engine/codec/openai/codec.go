package openai

import (
	"maps"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Provider is the provider name recorded on model calls made through this codec.
const Provider = "openai"

// Codec maps the OpenAI Chat Completions API (POST /v1/chat/completions) to and from the engine's
// neutral session types. It has no state; the zero value is ready to use and safe for concurrent use.
type Codec struct{}

// Name implements replay.Codec.
func (Codec) Name() string { return Provider }

// volatileParams vary between otherwise identical calls without changing the answer (the API
// reference's own descriptions, as the SDK's ChatCompletionNewParams carries them):
//
//   - stream and stream_options choose the transport: whether the answer comes as chunks, and whether
//     they carry a final usage chunk and obfuscation padding;
//   - user, safety_identifier and prompt_cache_key identify the end user or session, for abuse
//     detection and cache routing;
//   - metadata tags a stored completion for querying it later, and store says whether to store it.
var volatileParams = []string{
	"stream", "stream_options", "user", "safety_identifier", "prompt_cache_key", "metadata", "store",
}

// StripVolatile implements replay.Codec: it returns req without the volatile params (stream,
// stream_options, user, safety_identifier, prompt_cache_key, metadata, store). The caller's Params map
// is not modified.
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
// answer is sampled and how long it may get, but not what is asked: the sampling parameters
// (temperature, top_p, the frequency and presence penalties, logit_bias, seed), the output budgets
// (max_tokens and its successor max_completion_tokens) and the reasoning and verbosity levels. The
// paths are into the neutral request's JSON form.
func (Codec) VolatilePaths() []string {
	return []string{
		"params.temperature",
		"params.top_p",
		"params.frequency_penalty",
		"params.presence_penalty",
		"params.logit_bias",
		"params.seed",
		"params.max_tokens",
		"params.max_completion_tokens",
		"params.reasoning_effort",
		"params.verbosity",
	}
}

// Usage returns the token accounting of a response: its Usage when set, otherwise what the wire usage
// kept in Raw says. Input is prompt_tokens, which includes the cached tokens; output is
// completion_tokens, which includes the reasoning tokens. Cost is left 0: prices are not part of the
// wire format.
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
