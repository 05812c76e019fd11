package session

import (
	"encoding/json"
	"math"
	"unicode/utf16"
	"unicode/utf8"
)

// fastDecoder decodes a line of events.jsonl at the current schema version in one pass over its bytes,
// checking as it goes everything decodeStrict and checkJSONText check. It only ever accepts: on
// anything it does not handle or that may be wrong — an unknown or repeated key, a key in another
// case or with an escape, a null where the field is not raw JSON, a number that is not a plain
// integer, invalid UTF-8, an unpaired surrogate, session_start's meta, an older schema version — it
// gives up and the line goes the slow way, which decides and words every refusal. What it accepts is
// what the slow way would decode, field for field (FuzzFastDecoderAgreesWithEncodingJSON).
//
// Raw JSON fields (args, result, value, ...) are slices of one copy of the line from the first of them
// on, capped so that an append reallocates; short strings that repeat from line to line (kinds, lanes,
// call sites, models, roles) are shared.
type fastDecoder struct {
	src      []byte
	raw      []byte // the copy of src[rawFrom:] that raw fields point into; nil until a line needs it
	rawFrom  int
	interned map[string]string
	buf      []byte // scratch for unescaping strings
	keys     [][]byte
}

const (
	maxInterned      = 4096
	maxInternedLen   = 128
	maxFastDepth     = 512 // deeper raw values go the slow way (encoding/json allows 10000)
	fastSmallObjKeys = 32  // raw objects with more members go the slow way
)

func newFastDecoder() *fastDecoder {
	return &fastDecoder{interned: make(map[string]string, 64)}
}

// decode decodes one line of events.jsonl as decodeEvent does, the fast way when it can.
func (d *fastDecoder) decode(line []byte) (Event, int, error) {
	if ev, ok := d.event(line); ok {
		// A version 2 line is a version 3 line without the stored-form keys, which the fast way
		// does not take: nothing to migrate.
		written := ev.SchemaVersion
		ev.SchemaVersion = CurrentSchemaVersion
		return ev, written, checkKind(ev)
	}
	return decodeEvent(line)
}

// event decodes line, reporting false when the slow way must decode it.
func (d *fastDecoder) event(line []byte) (Event, bool) {
	d.src, d.raw = line, nil
	var ev Event
	i := d.space(0)
	if i >= len(line) || line[i] != '{' {
		return Event{}, false
	}
	var seen uint64
	i, ok := d.object(i, func(key []byte, i int) (int, bool) {
		var bit uint64
		var ok bool
		switch string(key) {
		case "seq":
			bit = 1 << 0
			ev.Seq, i, ok = d.int64(i)
		case "step":
			bit = 1 << 1
			ev.Step, i, ok = d.int64(i)
		case "ts":
			bit = 1 << 2
			ev.TS, i, ok = d.int64(i)
		case "lane":
			bit = 1 << 3
			ev.Lane, i, ok = d.string(i, true)
		case "callSite":
			bit = 1 << 4
			ev.CallSite, i, ok = d.string(i, true)
		case "kind":
			bit = 1 << 5
			var s string
			s, i, ok = d.string(i, true)
			ev.Kind = Kind(s)
		case "schemaVersion":
			bit = 1 << 6
			var v int64
			v, i, ok = d.int64(i)
			ok = ok && v >= math.MinInt && v <= math.MaxInt
			ev.SchemaVersion = int(v)
		case "author":
			bit = 1 << 7
			var s string
			s, i, ok = d.string(i, true)
			ev.Author = Author(s)
		case "provenance":
			bit = 1 << 8
			var s string
			s, i, ok = d.string(i, true)
			ev.Provenance = Provenance(s)
		case "provider":
			bit = 1 << 9
			ev.Provider, i, ok = d.string(i, true)
		case "request":
			bit = 1 << 10
			ev.Request, i, ok = d.request(i)
		case "requestHash":
			bit = 1 << 11
			ev.RequestHash, i, ok = d.string(i, false)
		case "response":
			bit = 1 << 12
			ev.Response, i, ok = d.response(i)
		case "name":
			bit = 1 << 13
			ev.Name, i, ok = d.string(i, true)
		case "args":
			bit = 1 << 14
			ev.Args, i, ok = d.rawValue(i)
		case "argsHash":
			bit = 1 << 15
			ev.ArgsHash, i, ok = d.string(i, false)
		case "result":
			bit = 1 << 16
			ev.Result, i, ok = d.rawValue(i)
		case "error":
			bit = 1 << 17
			ev.Error, i, ok = d.serializedError(i)
		case "stream":
			bit = 1 << 18
			ev.Stream, i, ok = fastArray(d, i, d.chunk)
		case "usage":
			bit = 1 << 19
			ev.Usage, i, ok = d.usage(i)
		case "latencyMs":
			bit = 1 << 20
			ev.LatencyMs, i, ok = d.int64(i)
		case "blobs":
			bit = 1 << 21
			ev.Blobs, i, ok = d.stringMap(i)
		case "source":
			bit = 1 << 22
			var s string
			s, i, ok = d.string(i, true)
			ev.Source = EntropySource(s)
		case "value":
			bit = 1 << 23
			ev.Value, i, ok = d.rawValue(i)
		case "text":
			bit = 1 << 24
			ev.Text, i, ok = d.string(i, false)
		case "ledger":
			bit = 1 << 25
			ev.Ledger, i, ok = d.rawValue(i)
		case "ok":
			bit = 1 << 26
			var b bool
			b, i, ok = d.bool(i)
			ev.OK = &b
		case "defs":
			bit = 1 << 27
			ev.Defs, i, ok = d.rawMap(i)
		case "joins":
			bit = 1 << 28
			ev.Joins, i, ok = fastMap(d, i, d.joinParts)
		case "lists":
			bit = 1 << 29
			ev.Lists, i, ok = fastMap(d, i, d.listDef)
		case "defBlobs":
			bit = 1 << 30
			ev.DefBlobs, i, ok = fastArray(d, i, d.digest)
		case "refs":
			bit = 1 << 31
			ev.Refs, i, ok = d.refs(i)
		case "streamText":
			bit = 1 << 32
			ev.StreamText, i, ok = fastArray(d, i, d.textSpan)
		default: // meta, an unknown field, a field in another case
			return i, false
		}
		if seen&bit != 0 {
			return i, false
		}
		seen |= bit
		return i, ok
	})
	// A version 2 line with a stored-form key is refused by its migration: the slow way words it.
	const storedForm = 1<<27 | 1<<28 | 1<<29 | 1<<30 | 1<<31 | 1<<32
	if !ok || d.space(i) != len(line) || ev.SchemaVersion != CurrentSchemaVersion && (ev.SchemaVersion != 2 || seen&storedForm != 0) {
		return Event{}, false
	}
	return ev, true
}

// object walks the object whose '{' is at i, calling member with each key (unescaped keys only) and
// the offset of its value; member returns the offset after the value.
func (d *fastDecoder) object(i int, member func(key []byte, i int) (int, bool)) (int, bool) {
	src := d.src
	i = d.space(i + 1)
	if i < len(src) && src[i] == '}' {
		return i + 1, true
	}
	for {
		key, next, ok := d.key(i)
		if !ok {
			return i, false
		}
		if i, ok = member(key, d.space(next)); !ok {
			return i, false
		}
		i = d.space(i)
		if i >= len(src) {
			return i, false
		}
		switch src[i] {
		case ',':
			i = d.space(i + 1)
		case '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// key reads an object key without escapes at i and the ':' after it, returning the key and the offset
// after the ':'.
func (d *fastDecoder) key(i int) ([]byte, int, bool) {
	src := d.src
	if i >= len(src) || src[i] != '"' {
		return nil, i, false
	}
	end, escaped, ok := d.scanString(i)
	if !ok || escaped {
		return nil, i, false
	}
	key := src[i+1 : end-1]
	i = d.space(end)
	if i >= len(src) || src[i] != ':' {
		return nil, i, false
	}
	return key, i + 1, true
}

// scanString checks the string whose opening quote is at i — no control characters, valid escapes,
// paired surrogates, valid UTF-8 — and returns the offset after its closing quote and whether it has
// escapes.
func (d *fastDecoder) scanString(i int) (int, bool, bool) {
	src := d.src
	escaped := false
	for j := i + 1; j < len(src); {
		b := src[j]
		switch {
		case b == '"':
			return j + 1, escaped, true
		case b == '\\':
			escaped = true
			_, next, ok := d.escape(j)
			if !ok {
				return j, false, false
			}
			j = next
		case b < 0x20:
			return j, false, false
		case b < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(src[j:])
			if r == utf8.RuneError && size == 1 {
				return j, false, false
			}
			j += size
		}
	}
	return len(src), false, false
}

// escape decodes the escape whose backslash is at j as checkJSONText does, refusing unpaired surrogates.
func (d *fastDecoder) escape(j int) (rune, int, bool) {
	src := d.src
	if j+1 >= len(src) {
		return 0, j, false
	}
	switch e := src[j+1]; e {
	case '"', '\\', '/':
		return rune(e), j + 2, true
	case 'b':
		return '\b', j + 2, true
	case 'f':
		return '\f', j + 2, true
	case 'n':
		return '\n', j + 2, true
	case 'r':
		return '\r', j + 2, true
	case 't':
		return '\t', j + 2, true
	case 'u':
		r, ok := d.hex4(j + 2)
		if !ok {
			return 0, j, false
		}
		if !utf16.IsSurrogate(r) {
			return r, j + 6, true
		}
		if r < 0xDC00 && j+7 < len(src) && src[j+6] == '\\' && src[j+7] == 'u' {
			if lo, ok := d.hex4(j + 8); ok && 0xDC00 <= lo && lo <= 0xDFFF {
				return utf16.DecodeRune(r, lo), j + 12, true
			}
		}
	}
	return 0, j, false
}

func (d *fastDecoder) hex4(i int) (rune, bool) {
	if i+4 > len(d.src) {
		return 0, false
	}
	var r rune
	for _, c := range d.src[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// string decodes the string value at i; intern shares values that repeat from line to line.
func (d *fastDecoder) string(i int, intern bool) (string, int, bool) {
	src := d.src
	if i >= len(src) || src[i] != '"' {
		return "", i, false
	}
	end, escaped, ok := d.scanString(i)
	if !ok {
		return "", i, false
	}
	text := src[i+1 : end-1]
	if escaped {
		d.buf = d.buf[:0]
		for j := i + 1; j < end-1; {
			if src[j] != '\\' {
				d.buf = append(d.buf, src[j])
				j++
				continue
			}
			r, next, _ := d.escape(j)
			d.buf = utf8.AppendRune(d.buf, r)
			j = next
		}
		text = d.buf
	}
	if !intern || len(text) > maxInternedLen {
		return string(text), end, true
	}
	if s, ok := d.interned[string(text)]; ok {
		return s, end, true
	}
	s := string(text)
	if len(d.interned) < maxInterned {
		d.interned[s] = s
	}
	return s, end, true
}

// int64 decodes an integer as encoding/json does into an int64 field: a JSON number without fraction
// or exponent that fits.
func (d *fastDecoder) int64(i int) (int64, int, bool) {
	src := d.src
	j := i
	neg := j < len(src) && src[j] == '-'
	if neg {
		j++
	}
	start := j
	var u uint64
	for ; j < len(src) && '0' <= src[j] && src[j] <= '9'; j++ {
		if u > (math.MaxUint64-9)/10 {
			return 0, i, false
		}
		u = u*10 + uint64(src[j]-'0')
	}
	switch {
	case j == start, j-start > 1 && src[start] == '0':
		return 0, i, false
	case j < len(src) && (src[j] == '.' || src[j] == 'e' || src[j] == 'E'):
		return 0, i, false
	case neg && u <= 1<<63:
		return -int64(u), j, true
	case !neg && u <= math.MaxInt64:
		return int64(u), j, true
	}
	return 0, i, false
}

func (d *fastDecoder) bool(i int) (bool, int, bool) {
	src := d.src[i:]
	switch {
	case len(src) >= 4 && string(src[:4]) == "true":
		return true, i + 4, true
	case len(src) >= 5 && string(src[:5]) == "false":
		return false, i + 5, true
	}
	return false, i, false
}

// rawValue checks the JSON value at i and returns it as raw JSON.
func (d *fastDecoder) rawValue(i int) (json.RawMessage, int, bool) {
	end, ok := d.skip(i, 0)
	if !ok {
		return nil, i, false
	}
	if d.raw == nil {
		d.raw, d.rawFrom = append([]byte(nil), d.src[i:]...), i
	}
	return json.RawMessage(d.raw[i-d.rawFrom : end-d.rawFrom : end-d.rawFrom]), end, true
}

// skip checks the JSON value at i as checkJSONText does with no type (valid text, no repeated keys,
// valid UTF-8, paired surrogates) and returns the offset after it.
func (d *fastDecoder) skip(i, depth int) (int, bool) {
	src := d.src
	if i >= len(src) || depth > maxFastDepth {
		return i, false
	}
	switch c := src[i]; {
	case c == '"':
		end, _, ok := d.scanString(i)
		return end, ok
	case c == '{':
		first := len(d.keys)
		defer func() { d.keys = d.keys[:first] }()
		return d.object(i, func(key []byte, i int) (int, bool) {
			if len(d.keys)-first >= fastSmallObjKeys {
				return i, false
			}
			for _, k := range d.keys[first:] {
				if string(k) == string(key) {
					return i, false
				}
			}
			d.keys = append(d.keys, key)
			return d.skip(i, depth+1)
		})
	case c == '[':
		i = d.space(i + 1)
		if i < len(src) && src[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = d.skip(i, depth+1); !ok {
				return i, false
			}
			i = d.space(i)
			if i >= len(src) {
				return i, false
			}
			switch src[i] {
			case ',':
				i = d.space(i + 1)
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '-' || '0' <= c && c <= '9':
		return d.number(i)
	case c == 't' && len(src)-i >= 4 && string(src[i:i+4]) == "true":
		return i + 4, true
	case c == 'f' && len(src)-i >= 5 && string(src[i:i+5]) == "false":
		return i + 5, true
	case c == 'n' && len(src)-i >= 4 && string(src[i:i+4]) == "null":
		return i + 4, true
	}
	return i, false
}

// number checks a JSON number at i.
func (d *fastDecoder) number(i int) (int, bool) {
	src := d.src
	j := i
	if j < len(src) && src[j] == '-' {
		j++
	}
	digits := func() bool {
		start := j
		for j < len(src) && '0' <= src[j] && src[j] <= '9' {
			j++
		}
		return j > start
	}
	switch {
	case j < len(src) && src[j] == '0':
		j++
	case !digits():
		return i, false
	}
	if j < len(src) && src[j] == '.' {
		j++
		if !digits() {
			return i, false
		}
	}
	if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
		j++
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if !digits() {
			return i, false
		}
	}
	return j, true
}

func (d *fastDecoder) space(i int) int {
	for i < len(d.src) {
		switch d.src[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

func (d *fastDecoder) isObject(i int) bool { return i < len(d.src) && d.src[i] == '{' }

// rawMap decodes an object of raw JSON values, refusing a repeated key.
func (d *fastDecoder) rawMap(i int) (map[string]json.RawMessage, int, bool) {
	return fastMap(d, i, d.rawValue)
}

// stringMap decodes an object of strings, refusing a repeated key.
func (d *fastDecoder) stringMap(i int) (map[string]string, int, bool) {
	return fastMap(d, i, func(i int) (string, int, bool) { return d.string(i, false) })
}

// fastMap decodes an object whose values value decodes, refusing a repeated key. An empty object is
// an empty map, not nil, as encoding/json decodes it.
func fastMap[T any](d *fastDecoder, i int, value func(i int) (T, int, bool)) (map[string]T, int, bool) {
	if !d.isObject(i) {
		return nil, i, false
	}
	m := map[string]T{}
	i, ok := d.object(i, func(key []byte, i int) (int, bool) {
		if _, dup := m[string(key)]; dup {
			return i, false
		}
		v, i, ok := value(i)
		m[string(key)] = v
		return i, ok
	})
	return m, i, ok
}

// fastArray decodes an array whose elements elem decodes. An empty array is an empty slice, not nil,
// as encoding/json decodes it.
func fastArray[T any](d *fastDecoder, i int, elem func(i int) (T, int, bool)) ([]T, int, bool) {
	src := d.src
	if i >= len(src) || src[i] != '[' {
		return nil, i, false
	}
	out := []T{}
	i = d.space(i + 1)
	if i < len(src) && src[i] == ']' {
		return out, i + 1, true
	}
	for {
		v, next, ok := elem(i)
		if !ok {
			return nil, next, false
		}
		out = append(out, v)
		if i = d.space(next); i >= len(src) {
			return nil, i, false
		}
		switch src[i] {
		case ',':
			i = d.space(i + 1)
		case ']':
			return out, i + 1, true
		default:
			return nil, i, false
		}
	}
}

// fields walks the struct object at i: field decodes the member key into the struct and says which
// bit of the struct's fields it is, so that a repeated field gives up, as checkJSONText refuses it.
func (d *fastDecoder) fields(i int, field func(key []byte, i int) (uint64, int, bool)) (int, bool) {
	if !d.isObject(i) {
		return i, false
	}
	var seen uint64
	return d.object(i, func(key []byte, i int) (int, bool) {
		bit, i, ok := field(key, i)
		if !ok || seen&bit != 0 {
			return i, false
		}
		seen |= bit
		return i, true
	})
}

// digest decodes a content or list digest: long and unique, so not interned.
func (d *fastDecoder) digest(i int) (string, int, bool) { return d.string(i, false) }

// int decodes an integer into an int field.
func (d *fastDecoder) int(i int) (int, int, bool) {
	v, i, ok := d.int64(i)
	return int(v), i, ok && v >= math.MinInt && v <= math.MaxInt
}

func (d *fastDecoder) joinParts(i int) ([]JoinPart, int, bool) {
	return fastArray(d, i, func(i int) (JoinPart, int, bool) {
		var p JoinPart
		i, ok := d.fields(i, func(key []byte, i int) (uint64, int, bool) {
			var ok bool
			switch string(key) {
			case "t":
				p.Text, i, ok = d.string(i, false)
				return 1 << 0, i, ok
			case "r":
				p.Ref, i, ok = d.digest(i)
				return 1 << 1, i, ok
			}
			return 0, i, false
		})
		return p, i, ok
	})
}

func (d *fastDecoder) listDef(i int) (ListDef, int, bool) {
	var l ListDef
	i, ok := d.fields(i, func(key []byte, i int) (uint64, int, bool) {
		var ok bool
		switch string(key) {
		case "prev":
			l.Prev, i, ok = d.digest(i)
			return 1 << 0, i, ok
		case "items":
			l.Items, i, ok = fastArray(d, i, d.listItem)
			return 1 << 1, i, ok
		}
		return 0, i, false
	})
	return l, i, ok
}

func (d *fastDecoder) listItem(i int) (ListItem, int, bool) {
	var it ListItem
	i, ok := d.fields(i, func(key []byte, i int) (uint64, int, bool) {
		var ok bool
		switch string(key) {
		case "role":
			it.Role, i, ok = d.string(i, true)
			return 1 << 0, i, ok
		case "content":
			it.Content, i, ok = d.digest(i)
			return 1 << 1, i, ok
		}
		return 0, i, false
	})
	return it, i, ok
}

func (d *fastDecoder) refs(i int) (*Refs, int, bool) {
	r := new(Refs)
	i, ok := d.fields(i, func(key []byte, i int) (uint64, int, bool) {
		var ok bool
		switch string(key) {
		case "request":
			r.Request, i, ok = d.digest(i)
			return 1 << 0, i, ok
		case "messages":
			r.Messages, i, ok = d.digest(i)
			return 1 << 1, i, ok
		case "response":
			r.Response, i, ok = d.digest(i)
			return 1 << 2, i, ok
		case "result":
			r.Result, i, ok = d.digest(i)
			return 1 << 3, i, ok
		}
		return 0, i, false
	})
	return r, i, ok
}

func (d *fastDecoder) textSpan(i int) (TextSpan, int, bool) {
	var s TextSpan
	i, ok := d.fields(i, func(key []byte, i int) (uint64, int, bool) {
		var ok bool
		switch string(key) {
		case "c":
			s.Chunk, i, ok = d.int(i)
			return 1 << 0, i, ok
		case "a":
			s.At, i, ok = d.int(i)
			return 1 << 1, i, ok
		case "l":
			s.Leaf, i, ok = d.int(i)
			return 1 << 2, i, ok
		case "f":
			s.From, i, ok = d.int(i)
			return 1 << 3, i, ok
		case "t":
			s.To, i, ok = d.int(i)
			return 1 << 4, i, ok
		}
		return 0, i, false
	})
	return s, i, ok
}

func (d *fastDecoder) request(i int) (*Request, int, bool) {
	r := new(Request)
	i, ok := d.fields(i, func(key []byte, i int) (uint64, int, bool) {
		var ok bool
		switch string(key) {
		case "model":
			r.Model, i, ok = d.string(i, true)
			return 1 << 0, i, ok
		case "system":
			r.System, i, ok = d.string(i, false)
			return 1 << 1, i, ok
		case "messages":
			r.Messages, i, ok = fastArray(d, i, d.message)
			return 1 << 2, i, ok
		case "params":
			r.Params, i, ok = d.rawMap(i)
			return 1 << 3, i, ok
		}
		return 0, i, false
	})
	return r, i, ok
}

func (d *fastDecoder) message(i int) (Message, int, bool) {
	var m Message
	i, ok := d.fields(i, func(key []byte, i int) (uint64, int, bool) {
		var ok bool
		switch string(key) {
		case "role":
			m.Role, i, ok = d.string(i, true)
			return 1 << 0, i, ok
		case "content":
			m.Content, i, ok = d.rawValue(i)
			return 1 << 1, i, ok
		}
		return 0, i, false
	})
	return m, i, ok
}

func (d *fastDecoder) response(i int) (*Response, int, bool) {
	r := new(Response)
	i, ok := d.fields(i, func(key []byte, i int) (uint64, int, bool) {
		var ok bool
		switch string(key) {
		case "content":
			r.Content, i, ok = d.rawValue(i)
			return 1 << 0, i, ok
		case "stopReason":
			r.StopReason, i, ok = d.string(i, true)
			return 1 << 1, i, ok
		case "usage":
			r.Usage, i, ok = d.usage(i)
			return 1 << 2, i, ok
		case "raw":
			r.Raw, i, ok = d.rawValue(i)
			return 1 << 3, i, ok
		case "headers":
			r.Headers, i, ok = d.stringMap(i)
			return 1 << 4, i, ok
		}
		return 0, i, false
	})
	return r, i, ok
}

func (d *fastDecoder) usage(i int) (*Usage, int, bool) {
	u := new(Usage)
	i, ok := d.fields(i, func(key []byte, i int) (uint64, int, bool) {
		var ok bool
		switch string(key) {
		case "inputTokens":
			u.InputTokens, i, ok = d.int64(i)
			return 1 << 0, i, ok
		case "outputTokens":
			u.OutputTokens, i, ok = d.int64(i)
			return 1 << 1, i, ok
		case "cacheCreationInputTokens":
			u.CacheCreationInputTokens, i, ok = d.int64(i)
			return 1 << 2, i, ok
		case "cacheReadInputTokens":
			u.CacheReadInputTokens, i, ok = d.int64(i)
			return 1 << 3, i, ok
		case "costMicroUSD":
			u.CostMicroUSD, i, ok = d.int64(i)
			return 1 << 4, i, ok
		}
		return 0, i, false
	})
	return u, i, ok
}

func (d *fastDecoder) serializedError(i int) (*SerializedError, int, bool) {
	e := new(SerializedError)
	i, ok := d.fields(i, func(key []byte, i int) (uint64, int, bool) {
		var ok bool
		switch string(key) {
		case "name":
			e.Name, i, ok = d.string(i, true)
			return 1 << 0, i, ok
		case "message":
			e.Message, i, ok = d.string(i, false)
			return 1 << 1, i, ok
		case "stack":
			e.Stack, i, ok = d.string(i, false)
			return 1 << 2, i, ok
		case "data":
			e.Data, i, ok = d.rawValue(i)
			return 1 << 3, i, ok
		}
		return 0, i, false
	})
	return e, i, ok
}

func (d *fastDecoder) chunk(i int) (Chunk, int, bool) {
	var c Chunk
	i, ok := d.fields(i, func(key []byte, i int) (uint64, int, bool) {
		var ok bool
		switch string(key) {
		case "offsetMs":
			c.OffsetMs, i, ok = d.int64(i)
			return 1 << 0, i, ok
		case "data":
			c.Data, i, ok = d.rawValue(i)
			return 1 << 1, i, ok
		}
		return 0, i, false
	})
	return c, i, ok
}
