package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
)

// applyPatch applies one RFC 6902 add, remove, replace or test operation to a JSON document.
func applyPatch(doc []byte, op PatchOperation) ([]byte, error) {
	var root any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, err
	}
	tokens, err := parsePointer(op.Path)
	if err != nil {
		return nil, err
	}
	var value any
	switch op.Op {
	case "add", "replace", "test":
		if len(op.Value) == 0 {
			return nil, fmt.Errorf("%s needs a value", op.Op)
		}
		d := json.NewDecoder(bytes.NewReader(op.Value))
		d.UseNumber()
		if err := d.Decode(&value); err != nil {
			return nil, fmt.Errorf("value: %w", err)
		}
	case "remove":
		// RFC 6902 §4: members an operation does not define are ignored.
	default:
		return nil, fmt.Errorf("unsupported op %q (use add, remove, replace or test)", op.Op)
	}
	if len(tokens) == 0 {
		switch op.Op {
		case "remove":
			return nil, errors.New("cannot remove the whole document")
		case "test":
			if !patchEqual(root, value) {
				return nil, errors.New("test failed: the document differs")
			}
			return doc, nil
		}
		return json.Marshal(value)
	}
	parent, err := walkPointer(root, tokens[:len(tokens)-1])
	if err != nil {
		return nil, err
	}
	last := tokens[len(tokens)-1]
	root, err = applyAt(root, parent, tokens[:len(tokens)-1], last, op.Op, value)
	if err != nil {
		return nil, err
	}
	return json.Marshal(root)
}

// applyAt performs op on the member last of container parent, reached by path from root, and returns
// the (possibly new) root: a JSON array grows by reallocation, so its parent must be updated.
func applyAt(root, parent any, path []string, last, op string, value any) (any, error) {
	switch c := parent.(type) {
	case map[string]any:
		_, exists := c[last]
		switch op {
		case "add":
			c[last] = value
		case "replace":
			if !exists {
				return nil, fmt.Errorf("replace: %q does not exist", last)
			}
			c[last] = value
		case "remove":
			if !exists {
				return nil, fmt.Errorf("remove: %q does not exist", last)
			}
			delete(c, last)
		case "test":
			if !exists || !patchEqual(c[last], value) {
				return nil, fmt.Errorf("test failed at %q", last)
			}
		}
		return root, nil
	case []any:
		idx := len(c)
		if last != "-" {
			n, err := arrayIndex(last)
			if err != nil {
				return nil, err
			}
			idx = n
		}
		var updated []any
		switch op {
		case "add":
			if idx > len(c) {
				return nil, fmt.Errorf("index %d is past the end (%d elements)", idx, len(c))
			}
			updated = append(append(append([]any{}, c[:idx]...), value), c[idx:]...)
		case "replace", "remove", "test":
			if idx >= len(c) {
				return nil, fmt.Errorf("index %d is past the end (%d elements)", idx, len(c))
			}
			switch op {
			case "replace":
				c[idx] = value
				return root, nil
			case "test":
				if !patchEqual(c[idx], value) {
					return nil, fmt.Errorf("test failed at index %d", idx)
				}
				return root, nil
			}
			updated = append(append([]any{}, c[:idx]...), c[idx+1:]...)
		}
		return setAt(root, path, updated)
	default:
		return nil, fmt.Errorf("cannot address %q inside a %T", last, parent)
	}
}

// setAt replaces the value at path in root.
func setAt(root any, path []string, v any) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	parent, err := walkPointer(root, path[:len(path)-1])
	if err != nil {
		return nil, err
	}
	last := path[len(path)-1]
	switch c := parent.(type) {
	case map[string]any:
		c[last] = v
	case []any:
		n, _ := arrayIndex(last)
		c[n] = v
	}
	return root, nil
}

func walkPointer(v any, tokens []string) (any, error) {
	for _, t := range tokens {
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return nil, fmt.Errorf("%q does not exist", t)
			}
			v = next
		case []any:
			n, err := arrayIndex(t)
			if err != nil || n >= len(c) {
				return nil, fmt.Errorf("%q is not an index of a %d-element array", t, len(c))
			}
			v = c[n]
		default:
			return nil, fmt.Errorf("cannot address %q inside a %T", t, v)
		}
	}
	return v, nil
}

// parsePointer splits an RFC 6901 JSON Pointer into unescaped tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("path %q is not a JSON Pointer (it must start with '/')", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, part := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// arrayIndex parses an RFC 6901 array index: "0" or a number without a sign or leading zero.
func arrayIndex(tok string) (int, error) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') || strings.TrimLeft(tok, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not an array index", tok)
	}
	return strconv.Atoi(tok)
}

// patchEqual compares two JSON values as RFC 6902 test does: numbers by value, objects regardless of
// member order.
func patchEqual(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return false
	}
	cx, errA := fingerprint.CanonicalizeJSON(x)
	cy, errB := fingerprint.CanonicalizeJSON(y)
	return errA == nil && errB == nil && bytes.Equal(cx, cy)
}
