package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// object is a JSON object that remembers the order of its keys. Rebuilt bodies keep the layout the
// wire had, which makes them easy to compare by eye with the original and keeps the SDK's raw JSON of
// a rebuilt completion in the order the server sent.
//
// This file is a copy of the anthropic codec's object.go, to be factored into a package both share.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

var errNotObject = errors.New("not a JSON object")

func newObject() *object { return &object{vals: map[string]json.RawMessage{}} }

// parseObject reads a JSON object whose validity the caller has already checked. Member values are
// compacted, so the neutral form does not depend on the wire's whitespace. A duplicate key keeps its
// first position and its last value, as encoding/json would decode it.
func parseObject(raw []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotObject
	}
	o := newObject()
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o.set(key, compact(v))
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject
	}
	return o, nil
}

func (o *object) get(key string) (json.RawMessage, bool) {
	v, ok := o.vals[key]
	return v, ok
}

// set replaces a member in place, or appends it when the key is new.
func (o *object) set(key string, v json.RawMessage) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

// setAfter adds a new member right after the first of anchors present, or at the end; an existing
// member is replaced in place.
func (o *object) setAfter(key string, v json.RawMessage, anchors ...string) {
	if _, ok := o.vals[key]; ok {
		o.vals[key] = v
		return
	}
	at := len(o.keys)
	for _, a := range anchors {
		if i := o.index(a); i >= 0 {
			at = i + 1
			break
		}
	}
	o.keys = append(o.keys, "")
	copy(o.keys[at+1:], o.keys[at:])
	o.keys[at] = key
	o.vals[key] = v
}

func (o *object) del(key string) {
	i := o.index(key)
	if i < 0 {
		return
	}
	delete(o.vals, key)
	o.keys = append(o.keys[:i], o.keys[i+1:]...)
}

func (o *object) index(key string) int {
	for i, k := range o.keys {
		if k == key {
			return i
		}
	}
	return -1
}

func (o *object) len() int { return len(o.keys) }

// marshal writes the object compactly, members in order. Values are written as they are held, so
// they must be valid JSON.
func (o *object) marshal() json.RawMessage {
	b := []byte{'{'}
	for i, k := range o.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, quote(k)...)
		b = append(b, ':')
		b = append(b, o.vals[k]...)
	}
	return append(b, '}')
}

// quote encodes s as a JSON string without HTML escaping: the server leaves <, > and & literal, and
// so does this codec, so rebuilt bodies differ from recorded ones as little as possible.
func quote(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}

// compact strips insignificant whitespace from valid JSON; string contents and escapes are kept.
func compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return append(json.RawMessage(nil), raw...)
	}
	return b.Bytes()
}

// isNull reports whether raw is absent or the JSON null.
func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// kind names the JSON type of a compact value by its first byte.
func kind(raw json.RawMessage) byte {
	if len(raw) == 0 {
		return 0
	}
	switch c := raw[0]; c {
	case '{', '[', '"', 'n':
		return c
	case 't', 'f':
		return 'b'
	default:
		return '0'
	}
}
