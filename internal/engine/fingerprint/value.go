package fingerprint

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
)

// builder turns a Go value into canonical nodes. It follows encoding/json's mapping (nil maps and slices
// are null, []byte is base64, Marshaler and TextMarshaler are honored, structs use their json tags), so
// Canonicalize(v) equals CanonicalizeJSON(json.Marshal(v)); the difference is that it refuses what
// encoding/json would repair or reject without saying where.
type builder struct {
	path  path
	depth int
}

func (b *builder) build(v any) (node, error) {
	switch x := v.(type) {
	case nil:
		return node{kind: kindNull}, nil
	case bool:
		return boolNode(x), nil
	case string:
		return b.str(x)
	case float64:
		return b.float(x)
	case float32:
		return b.float32(x)
	case int:
		return intNode(int64(x)), nil
	case int64:
		return intNode(int64(x)), nil
	case int32:
		return intNode(int64(x)), nil
	case int16:
		return intNode(int64(x)), nil
	case int8:
		return intNode(int64(x)), nil
	case uint:
		return uintNode(uint64(x)), nil
	case uint64:
		return uintNode(uint64(x)), nil
	case uint32:
		return uintNode(uint64(x)), nil
	case uint16:
		return uintNode(uint64(x)), nil
	case uint8:
		return uintNode(uint64(x)), nil
	case uintptr:
		return uintNode(uint64(x)), nil
	case json.Number:
		return b.jsonNumber(x)
	case json.RawMessage:
		if x == nil {
			return node{kind: kindNull}, nil // as encoding/json marshals a nil RawMessage
		}
		return parseDocument(string(x), b.path)
	case map[string]any:
		return b.stringMap(x)
	case []any:
		return b.slice(x)
	}
	return b.reflect(reflect.ValueOf(v))
}

func boolNode(v bool) node {
	if v {
		return node{kind: kindTrue}
	}
	return node{kind: kindFalse}
}

// numberNode holds a double, whose canonical text is its shortest round-trip form.
func numberNode(f float64) node { return node{kind: kindNumber, num: f} }

func (b *builder) str(s string) (node, error) {
	if !utf8.ValidString(s) {
		return node{}, &InvalidUTF8Error{Path: b.path.String(), what: badUTF8String}
	}
	text, ok := nfc(s)
	if !ok {
		return node{}, &CombiningRunError{Path: b.path.String()}
	}
	return node{kind: kindString, text: text}, nil
}

func (b *builder) float(f float64) (node, error) {
	switch {
	case math.IsNaN(f):
		return node{}, &NonFiniteError{Path: b.path.String(), value: "NaN"}
	case math.IsInf(f, 1):
		return node{}, &NonFiniteError{Path: b.path.String(), value: "+Inf"}
	case math.IsInf(f, -1):
		return node{}, &NonFiniteError{Path: b.path.String(), value: "-Inf"}
	}
	return numberNode(f), nil
}

// float32 widens through the float32's shortest decimal form, as encoding/json prints it, rather than
// exactly: float32(0.1) is meant as 0.1, not 0.100000001490116, and must match a document saying 0.1 and
// a struct field of type float32 marshalled by encoding/json.
func (b *builder) float32(f float32) (node, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return b.float(float64(f))
	}
	var buf [32]byte
	v, _ := strconv.ParseFloat(string(strconv.AppendFloat(buf[:0], float64(f), 'g', -1, 32)), 64)
	return numberNode(v), nil
}

// jsonNumber validates and converts a json.Number. An empty one is 0, as encoding/json marshals it.
func (b *builder) jsonNumber(n json.Number) (node, error) {
	if n == "" {
		return node{kind: kindNumber, text: "0"}, nil
	}
	p := parser{src: string(n), path: b.path, at: b.path}
	c := n[0]
	if c != '-' && !isDigit(c) {
		return node{}, p.invalidChar(0, "looking for beginning of json.Number")
	}
	v, err := p.number()
	if err == nil && p.pos < len(p.src) {
		err = p.invalidChar(p.pos, "after json.Number")
	}
	if err == nil {
		err = p.first
	}
	return v, err
}

// enter counts one more level of nesting. Go values can be cyclic (a map holding itself), and the limit
// turns what would be a stack overflow into an error.
func (b *builder) enter(t string) error {
	b.depth++
	if b.depth > maxDepth {
		return &UnsupportedTypeError{Path: b.path.String(), Type: t,
			reason: "it is nested more than " + strconv.Itoa(maxDepth) + " levels deep; is it cyclic?"}
	}
	return nil
}

func (b *builder) slice(s []any) (node, error) {
	if s == nil {
		return node{kind: kindNull}, nil
	}
	if err := b.enter("[]interface {}"); err != nil {
		return node{}, err
	}
	defer func() { b.depth-- }()
	elems := make([]member, len(s))
	for i, v := range s {
		b.path = append(b.path, indexSegment(i))
		n, err := b.build(v)
		b.path = b.path[:len(b.path)-1]
		if err != nil {
			return node{}, err
		}
		elems[i].val = n
	}
	return node{kind: kindArray, kids: elems}, nil
}

// objectKeys validates, normalizes and sorts the keys of a map before any value is visited, so that with
// several faulty members the error reported does not depend on Go's random map order. raw[i] holds the
// original key of the sorted member i.
func (b *builder) objectKeys(keys []string) (members []member, raw []string, err error) {
	type pair struct{ norm, raw string }
	pairs := make([]pair, len(keys))
	for i, k := range keys {
		if !utf8.ValidString(k) {
			return nil, nil, &InvalidUTF8Error{Path: b.path.String(), what: badUTF8Key}
		}
		nk, ok := nfc(k)
		if !ok {
			return nil, nil, &CombiningRunError{Path: b.path.String()}
		}
		pairs[i] = pair{nk, k}
	}
	members = make([]member, len(pairs))
	for i, p := range pairs {
		members[i].key = p.norm
		members[i].val.text = p.raw // parked here so sorting moves it along with its key
	}
	if dup, ok := sortMembers(members); !ok {
		return nil, nil, &DuplicateKeyError{Path: b.path.String(), Key: dup}
	}
	raw = make([]string, len(members))
	for i := range members {
		raw[i] = members[i].val.text
		members[i].val.text = ""
	}
	return members, raw, nil
}

func (b *builder) stringMap(m map[string]any) (node, error) {
	if m == nil {
		return node{kind: kindNull}, nil
	}
	if err := b.enter("map[string]interface {}"); err != nil {
		return node{}, err
	}
	defer func() { b.depth-- }()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	members, raw, err := b.objectKeys(keys)
	if err != nil {
		return node{}, err
	}
	for i := range members {
		if members[i].val, err = b.member(members[i].key, m[raw[i]]); err != nil {
			return node{}, err
		}
	}
	return node{kind: kindObject, kids: members}, nil
}

// member builds the value of the object member named key.
func (b *builder) member(key string, v any) (node, error) {
	b.path = append(b.path, keySegment(key))
	n, err := b.build(v)
	b.path = b.path[:len(b.path)-1]
	return n, err
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// reflect handles every type the fast path in build does not: named types, typed maps and slices,
// pointers, and anything encoding/json gives special meaning to, which is delegated to encoding/json.
func (b *builder) reflect(rv reflect.Value) (node, error) {
	if !rv.IsValid() {
		return node{kind: kindNull}, nil
	}
	t := rv.Type()
	if v, ok := marshalsItself(rv); ok {
		return b.roundTrip(v)
	}
	switch t.Kind() {
	case reflect.Bool:
		return boolNode(rv.Bool()), nil
	case reflect.String:
		return b.str(rv.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intNode(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintNode(rv.Uint()), nil
	case reflect.Float32:
		return b.float32(float32(rv.Float()))
	case reflect.Float64:
		return b.float(rv.Float())
	case reflect.Interface:
		if rv.IsNil() {
			return node{kind: kindNull}, nil
		}
		return b.nested(t, rv.Elem())
	case reflect.Pointer:
		if rv.IsNil() {
			return node{kind: kindNull}, nil
		}
		if rv.Elem().Kind() == reflect.Struct {
			// Marshal through the pointer: encoding/json then treats the fields as addressable and
			// calls pointer-receiver marshalers on them, as it would for the caller.
			return b.roundTrip(rv.Interface())
		}
		return b.nested(t, rv.Elem())
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return b.roundTrip(rv.Interface()) // encoding/json knows how to turn other keys into strings
		}
		return b.reflectMap(rv)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return b.roundTrip(rv.Interface()) // base64, or the elements' own marshalers
		}
		if rv.IsNil() {
			return node{kind: kindNull}, nil
		}
		return b.reflectArray(rv)
	case reflect.Array:
		return b.reflectArray(rv)
	case reflect.Struct:
		return b.roundTrip(rv.Interface())
	}
	return node{}, &UnsupportedTypeError{Path: b.path.String(), Type: t.String()}
}

// marshalsItself reports whether encoding/json would call a MarshalJSON or MarshalText method on rv, and
// returns the receiver to marshal.
func marshalsItself(rv reflect.Value) (any, bool) {
	t := rv.Type()
	if t.Implements(marshalerType) || t.Implements(textMarshalerType) {
		return rv.Interface(), true
	}
	if t.Kind() != reflect.Pointer && rv.CanAddr() {
		if pt := reflect.PointerTo(t); pt.Implements(marshalerType) || pt.Implements(textMarshalerType) {
			return rv.Addr().Interface(), true
		}
	}
	return nil, false
}

// nested builds the value behind a pointer or interface, counting it as a level so cycles are caught.
func (b *builder) nested(t reflect.Type, elem reflect.Value) (node, error) {
	if err := b.enter(t.String()); err != nil {
		return node{}, err
	}
	defer func() { b.depth-- }()
	return b.reflect(elem)
}

func (b *builder) reflectArray(rv reflect.Value) (node, error) {
	if err := b.enter(rv.Type().String()); err != nil {
		return node{}, err
	}
	defer func() { b.depth-- }()
	elems := make([]member, rv.Len())
	for i := range elems {
		b.path = append(b.path, indexSegment(i))
		n, err := b.reflect(rv.Index(i))
		b.path = b.path[:len(b.path)-1]
		if err != nil {
			return node{}, err
		}
		elems[i].val = n
	}
	return node{kind: kindArray, kids: elems}, nil
}

func (b *builder) reflectMap(rv reflect.Value) (node, error) {
	if rv.IsNil() {
		return node{kind: kindNull}, nil
	}
	if err := b.enter(rv.Type().String()); err != nil {
		return node{}, err
	}
	defer func() { b.depth-- }()
	keys := make([]string, 0, rv.Len())
	byKey := make(map[string]reflect.Value, rv.Len())
	for it := rv.MapRange(); it.Next(); {
		k := it.Key().String()
		keys = append(keys, k)
		byKey[k] = it.Value()
	}
	members, raw, err := b.objectKeys(keys)
	if err != nil {
		return node{}, err
	}
	for i := range members {
		b.path = append(b.path, keySegment(members[i].key))
		members[i].val, err = b.reflect(byKey[raw[i]])
		b.path = b.path[:len(b.path)-1]
		if err != nil {
			return node{}, err
		}
	}
	return node{kind: kindObject, kids: members}, nil
}

// roundTrip marshals v with encoding/json and parses the result, for the types whose JSON form only
// encoding/json knows: structs (tags, omitempty, embedding), marshalers, []byte, maps with non-string keys.
// encoding/json would replace invalid UTF-8 in v's strings with U+FFFD, so they are checked first
// (jsonscan.CheckUTF8).
func (b *builder) roundTrip(v any) (node, error) {
	data, err := b.marshal(v)
	if err != nil {
		return node{}, err
	}
	return parseDocument(string(data), b.path)
}

// marshal is encoding/json's text for v, refused where encoding/json would repair invalid UTF-8.
func (b *builder) marshal(v any) ([]byte, error) {
	if jsonscan.CheckUTF8(v) != nil {
		return nil, &InvalidUTF8Error{Path: b.path.String(), what: badUTF8Inside}
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, b.marshalError(v, err)
	}
	return data, nil
}

// topLevelJSON returns the JSON text that build would parse for v as a whole: a json.RawMessage, or what
// encoding/json writes for a value build hands over to it entire (a struct, a pointer to one, a
// marshaler). ok is false for the values build walks itself (maps, slices, scalars); err is set when ok
// and the value cannot be marshalled, with the error build would return.
func (b *builder) topLevelJSON(v any) (doc []byte, ok bool, err error) {
	if raw, isRaw := v.(json.RawMessage); isRaw {
		return raw, raw != nil, nil // nil is null, which build writes without parsing
	}
	switch v.(type) {
	case nil, bool, string, float64, float32, int, int64, int32, int16, int8,
		uint, uint64, uint32, uint16, uint8, uintptr, json.Number, map[string]any, []any:
		return nil, false, nil
	}
	rv := reflect.ValueOf(v)
	_, marshals := marshalsItself(rv)
	whole := marshals || rv.Kind() == reflect.Struct ||
		(rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Kind() == reflect.Struct)
	if !whole {
		return nil, false, nil
	}
	doc, err = b.marshal(v)
	return doc, true, err
}

// marshalError translates encoding/json's errors into this package's typed ones where they mean the same.
// encoding/json does not say where inside v the problem was, so the path is that of v itself.
func (b *builder) marshalError(v any, err error) error {
	var ute *json.UnsupportedTypeError
	if errors.As(err, &ute) {
		return &UnsupportedTypeError{Path: b.path.String(), Type: ute.Type.String(),
			reason: fmt.Sprintf("it has no JSON representation; found inside a %T", v)}
	}
	var uve *json.UnsupportedValueError
	if errors.As(err, &uve) && (uve.Str == "NaN" || uve.Str == "+Inf" || uve.Str == "-Inf") {
		return &NonFiniteError{Path: b.path.String(), value: uve.Str}
	}
	return fmt.Errorf("fingerprint: %s: encoding/json cannot marshal the %T here: %w", b.path.String(), v, err)
}
