package replay

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Codec holds what a provider's wire format means for matching and forking: which request fields are
// volatile (never part of a fingerprint, or masked in structural mode) and how overrides apply.
type Codec interface {
	// Name is the provider name recorded on model calls.
	Name() string
	// StripVolatile returns a copy of req without fields that vary between identical calls.
	StripVolatile(req session.Request) session.Request
	// VolatilePaths are the dot paths structural fingerprints mask.
	VolatilePaths() []string
}

// GenericCodec is the codec for provider-neutral requests. Streaming is a transport choice and
// metadata identifies the caller, so neither takes part in a fingerprint; structural mode additionally
// ignores sampling parameters.
type GenericCodec struct {
	Provider string
}

// Name implements Codec.
func (c GenericCodec) Name() string {
	if c.Provider == "" {
		return "generic"
	}
	return c.Provider
}

// StripVolatile implements Codec.
func (GenericCodec) StripVolatile(req session.Request) session.Request {
	if req.Params == nil {
		return req
	}
	req.Params = maps.Clone(req.Params)
	delete(req.Params, "stream")
	delete(req.Params, "metadata")
	return req
}

// VolatilePaths implements Codec.
func (GenericCodec) VolatilePaths() []string {
	return []string{"params.temperature", "params.top_p", "params.top_k", "params.max_tokens", "params.seed"}
}

// Overrides change the live requests of a fork's tail.
type Overrides struct {
	// System replaces the system prompt.
	System *string
	// Model replaces the model.
	Model *string
	// Params are merged into the request's parameters (a null value removes one).
	Params map[string]json.RawMessage
	// RequestPatches are RFC 6902 operations applied to the request's JSON form, in order.
	RequestPatches []PatchOperation
	// Transform, when set, rewrites each tail request last; step is the request's global step.
	Transform func(req session.Request, step int64) (session.Request, error)
}

// PatchOperation is one RFC 6902 operation over a request's JSON form.
type PatchOperation struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Empty reports whether o changes nothing.
func (o Overrides) Empty() bool {
	return o.System == nil && o.Model == nil && len(o.Params) == 0 && len(o.RequestPatches) == 0 && o.Transform == nil
}

// Apply returns req with the overrides applied: system, model, params, patches, then Transform.
func (o Overrides) Apply(req session.Request, step int64) (session.Request, error) {
	if o.System != nil {
		req.System = *o.System
	}
	if o.Model != nil {
		req.Model = *o.Model
	}
	if len(o.Params) > 0 {
		params := maps.Clone(req.Params)
		if params == nil {
			params = map[string]json.RawMessage{}
		}
		for k, v := range o.Params {
			if string(v) == "null" {
				delete(params, k)
				continue
			}
			params[k] = v
		}
		req.Params = params
	}
	if len(o.RequestPatches) > 0 {
		doc, err := json.Marshal(req)
		if err != nil {
			return req, err
		}
		for i, op := range o.RequestPatches {
			if doc, err = applyPatch(doc, op); err != nil {
				return req, fmt.Errorf("request patch %d (%s %s): %w", i, op.Op, op.Path, err)
			}
		}
		var patched session.Request
		if err := json.Unmarshal(doc, &patched); err != nil {
			return req, fmt.Errorf("request patches produced an invalid request: %w", err)
		}
		req = patched
	}
	if o.Transform != nil {
		return o.Transform(req, step)
	}
	return req, nil
}
