package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Codec holds what a provider's wire format means for matching and forking: which request fields are
// volatile (never part of a fingerprint, or masked in structural mode) and how overrides apply.
type Codec interface {
	// Name is the provider name recorded on model calls.
	Name() string
	// StripVolatile returns a copy of req without fields that vary between identical calls. What it
	// strips from the request's head (everything but the messages) must follow from the head alone: a
	// lane keeps the canonical form of an unchanged head from one request to the next.
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

// PatchError is a request patch that does not apply to a request: which one, and why.
type PatchError struct {
	// Index is the patch's place in Overrides.RequestPatches.
	Index int
	Op    PatchOperation
	Err   error
}

func (e *PatchError) Error() string {
	return fmt.Sprintf("request patch %d (%s %s): %v", e.Index, e.Op.Op, e.Op.Path, e.Err)
}

func (e *PatchError) Unwrap() error { return e.Err }

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
				return req, &PatchError{Index: i, Op: op, Err: err}
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

// patchOptions are github.com/evanphx/json-patch/v5's options held to RFC 6902: no negative indexes,
// and strings written as they are.
var patchOptions = func() *jsonpatch.ApplyOptions {
	o := jsonpatch.NewApplyOptions()
	o.SupportNegativeIndices = false
	o.EscapeHTML = false
	return o
}()

// applyPatch applies one RFC 6902 add, remove, replace or test operation to a JSON document with
// github.com/evanphx/json-patch/v5. Where the library is more lenient than the RFC the operation is
// checked here first: an array index must be "0" or digits without a sign or leading zero (RFC 6901
// §4; the library also takes "01" and "+1"), the target of remove, replace and test must exist, and
// test compares numbers by value (RFC 6902 §4.6; the library compares their text and takes a missing
// member as null), so test is evaluated here and never reaches the library.
func applyPatch(doc []byte, op PatchOperation) ([]byte, error) {
	switch op.Op {
	case "add", "replace", "test":
		if len(op.Value) == 0 {
			return nil, fmt.Errorf("%s needs a value", op.Op)
		}
		if !json.Valid(op.Value) {
			return nil, errors.New("value is not JSON")
		}
	case "remove":
		// RFC 6902 §4: members an operation does not define, such as a value here, are ignored.
	default:
		return nil, fmt.Errorf("unsupported op %q (use add, remove, replace or test)", op.Op)
	}
	target, err := locate(doc, op)
	if err != nil {
		return nil, err
	}
	if op.Op == "test" {
		if !sameJSON(target, op.Value) {
			return nil, fmt.Errorf("test failed: %s is %s", op.Path, target)
		}
		return doc, nil
	}
	ops := []map[string]any{{"op": op.Op, "path": op.Path}}
	if op.Op != "remove" {
		ops[0]["value"] = op.Value
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return nil, err
	}
	return patch.ApplyWithOptions(doc, patchOptions)
}

// locate resolves op.Path in doc as RFC 6901 does, refusing an array index that is not canonical and
// a remove, replace or test of a location that does not exist. It returns the JSON at the location
// when there is one.
func locate(doc []byte, op PatchOperation) (json.RawMessage, error) {
	if op.Path == "" {
		if op.Op == "remove" {
			return nil, errors.New("cannot remove the whole document")
		}
		return doc, nil
	}
	if !strings.HasPrefix(op.Path, "/") {
		return nil, fmt.Errorf("path %q is not a JSON Pointer (it must start with '/')", op.Path)
	}
	tokens := strings.Split(op.Path[1:], "/")
	cur := json.RawMessage(doc)
	for i, tok := range tokens {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		last := i == len(tokens)-1
		var obj map[string]json.RawMessage
		var arr []json.RawMessage
		switch {
		case json.Unmarshal(cur, &obj) == nil && obj != nil:
			next, ok := obj[tok]
			if !ok {
				if last && op.Op == "add" {
					return nil, nil
				}
				return nil, fmt.Errorf("%s: %q does not exist (%s)", op.Op, tok, members(obj))
			}
			cur = next
		case json.Unmarshal(cur, &arr) == nil && arr != nil:
			if last && op.Op == "add" && tok == "-" {
				return nil, nil
			}
			n, err := arrayIndex(tok)
			if err != nil {
				return nil, err
			}
			if last && op.Op == "add" && n <= len(arr) {
				return nil, nil
			}
			if n >= len(arr) {
				return nil, fmt.Errorf("index %d is past the end (%d elements)", n, len(arr))
			}
			cur = arr[n]
		default:
			return nil, fmt.Errorf("cannot address %q inside %s", tok, cur)
		}
	}
	return cur, nil
}

// maxListedMembers bounds how many member names a patch error lists.
const maxListedMembers = 16

// members names the members of the object a path went through, so that an error says what the
// patch could have addressed instead. The names are the request's structure, never its values.
func members(obj map[string]json.RawMessage) string {
	if len(obj) == 0 {
		return "the object there is empty"
	}
	names := slices.Sorted(maps.Keys(obj))
	more := ""
	if len(names) > maxListedMembers {
		more = fmt.Sprintf(" and %d more", len(names)-maxListedMembers)
		names = names[:maxListedMembers]
	}
	return "the object there has " + strings.Join(names, ", ") + more
}

// arrayIndex parses an RFC 6901 array index: "0" or a number without a sign or leading zero.
func arrayIndex(tok string) (int, error) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') || strings.TrimLeft(tok, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not an array index", tok)
	}
	return strconv.Atoi(tok)
}

// sameJSON compares two JSON values as RFC 6902 test does: numbers by value, objects regardless of
// member order.
func sameJSON(a, b []byte) bool {
	ca, errA := fingerprint.CanonicalizeJSON(a)
	cb, errB := fingerprint.CanonicalizeJSON(b)
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}
