// Package jsonobj is the ordered JSON object the provider codecs rebuild wire bodies with: members
// keep the order the server sent, values are compact raw JSON, strings are quoted without HTML
// escaping. It does no I/O and holds no state.
package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
)

// Object is a JSON object that remembers the order of its keys. Rebuilt bodies keep the layout the
// wire had, which makes them easy to compare by eye with the original and keeps the SDK's raw JSON of
// a rebuilt body in the order the server sent. Keys and Vals are read directly; change them only
// through the methods, which keep the two in step.
type Object struct {
	Keys []string
	Vals map[string]json.RawMessage
}

// ErrNotObject is returned by Parse for input that is not one JSON object.
var ErrNotObject = errors.New("not a JSON object")

// New is an empty object.
func New() *Object { return &Object{Vals: map[string]json.RawMessage{}} }

// Parse reads a JSON object. Member values are compacted, so the neutral form does not depend on the
// wire's whitespace. A duplicate key keeps its first position and its last value, as encoding/json
// would decode it.
func Parse(raw []byte) (*Object, error) {
	if !jsonscan.Valid(raw) {
		return decodeObject(raw) // for the decoder's error
	}
	return ParseValid(raw)
}

// ParseValid is Parse for a document the caller has just checked with jsonscan.Valid (json.Valid's
// verdict). It does not check again: given anything else, it may accept what Parse refuses.
func ParseValid(raw []byte) (*Object, error) {
	if o, ok := scanObject(raw); ok {
		return o, nil
	}
	return decodeObject(raw)
}

// decodeObject is Parse through encoding/json's decoder: the reference the scan is held to.
func decodeObject(raw []byte) (*Object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, ErrNotObject
	}
	o := New()
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
		o.Set(key, Compact(v))
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ErrNotObject
	}
	return o, nil
}

// Get is a member's value and whether it is present.
func (o *Object) Get(key string) (json.RawMessage, bool) {
	v, ok := o.Vals[key]
	return v, ok
}

// Set replaces a member in place, or appends it when the key is new.
func (o *Object) Set(key string, v json.RawMessage) {
	if _, ok := o.Vals[key]; !ok {
		o.Keys = append(o.Keys, key)
	}
	o.Vals[key] = v
}

// SetAfter adds a new member right after the first of anchors present, or at the end; an existing
// member is replaced in place.
func (o *Object) SetAfter(key string, v json.RawMessage, anchors ...string) {
	if _, ok := o.Vals[key]; ok {
		o.Vals[key] = v
		return
	}
	at := len(o.Keys)
	for _, a := range anchors {
		if i := o.Index(a); i >= 0 {
			at = i + 1
			break
		}
	}
	o.Keys = append(o.Keys, "")
	copy(o.Keys[at+1:], o.Keys[at:])
	o.Keys[at] = key
	o.Vals[key] = v
}

// Del removes a member, keeping the order of the others.
func (o *Object) Del(key string) {
	i := o.Index(key)
	if i < 0 {
		return
	}
	delete(o.Vals, key)
	o.Keys = append(o.Keys[:i], o.Keys[i+1:]...)
}

// Index is the position of a member, -1 when absent.
func (o *Object) Index(key string) int {
	for i, k := range o.Keys {
		if k == key {
			return i
		}
	}
	return -1
}

// Len is the number of members.
func (o *Object) Len() int { return len(o.Keys) }

// Marshal writes the object compactly, members in order. Values are written as they are held, so
// they must be valid JSON.
func (o *Object) Marshal() json.RawMessage {
	b := []byte{'{'}
	for i, k := range o.Keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, Quote(k)...)
		b = append(b, ':')
		b = append(b, o.Vals[k]...)
	}
	return append(b, '}')
}

// Quote encodes s as a JSON string without HTML escaping: the server leaves <, > and & literal, and
// so do the codecs, so rebuilt bodies differ from recorded ones as little as possible.
func Quote(s string) json.RawMessage {
	if plainASCII(s) { // what the encoder writes as it is, quoted: the usual key or value
		b := make(json.RawMessage, 0, len(s)+2)
		return append(append(append(b, '"'), s...), '"')
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}

// plainASCII reports whether s is printable ASCII without a quote or a backslash: the encoder escapes only
// those, control characters, invalid UTF-8 and U+2028 and U+2029 (HTML escaping aside).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Compact strips insignificant whitespace from valid JSON; string contents and escapes are kept.
// Anything else is copied as it is.
func Compact(raw []byte) json.RawMessage {
	if c, ok := CompactValid(raw); ok {
		return c
	}
	return append(json.RawMessage(nil), raw...)
}

// CompactValid checks raw and compacts it in one pass: the compacted copy, or false when raw is not
// JSON (json.Valid's verdict).
func CompactValid(raw []byte) (json.RawMessage, bool) {
	switch valid, compact := jsonscan.Check(raw, 0); {
	case !valid:
		return nil, false
	case compact: // as recorded answers and SDK requests are: only a copy to make
		return bytes.Clone(raw), true
	}
	var b bytes.Buffer
	_ = json.Compact(&b, raw) // valid, so it cannot fail
	return b.Bytes(), true
}

// IsNull reports whether raw is absent or the JSON null.
func IsNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// Kind names the JSON type of a compact value by its first byte.
func Kind(raw json.RawMessage) byte {
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
