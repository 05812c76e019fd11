package session

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// TextError reports JSON that encoding/json would accept but silently rewrite: an object with two
// members of the same name (it keeps the last), a member whose name matches a field only in another
// case (it reads it as that field), invalid UTF-8 or an unpaired UTF-16 surrogate escape (both become
// U+FFFD). Two readers of such a line could see different events, so it is refused.
type TextError struct {
	Offset int    // byte offset of the problem within the document
	Path   string // where in the document, e.g. request.messages[0].content
	Msg    string
}

func (e *TextError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("byte %d: %s", e.Offset, e.Msg)
	}
	return fmt.Sprintf("%s (byte %d): %s", e.Path, e.Offset, e.Msg)
}

// maxJSONDepth matches encoding/json's nesting limit; deeper documents are refused by it anyway.
const maxJSONDepth = 10000

// checkJSONText walks a syntactically valid JSON document and refuses duplicate keys at any depth,
// invalid UTF-8 and unpaired surrogate escapes; when typ (the Go type the document decodes into) is
// not nil, it also refuses object keys that name a struct field only case-insensitively. Run it after
// encoding/json accepted the document: on a syntax error it reports the first byte it could not make
// sense of.
func checkJSONText(doc []byte, typ reflect.Type) error {
	var path [16]pathSeg
	c := jsonText{src: doc, path: path[:0]}
	i, err := c.value(c.space(0), 0, schemaType(typ))
	if err != nil {
		return err
	}
	if i = c.space(i); i != len(doc) {
		return c.fail(i, "unexpected data after the document")
	}
	return nil
}

type pathSeg struct {
	key   string
	index int // -1 for a key
}

type jsonText struct {
	src  []byte
	path []pathSeg
}

func (c *jsonText) fail(offset int, msg string) error {
	var b strings.Builder
	for _, s := range c.path {
		if s.index >= 0 {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.key)
	}
	return &TextError{Offset: offset, Path: b.String(), Msg: msg}
}

func (c *jsonText) space(i int) int {
	for i < len(c.src) {
		switch c.src[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

func (c *jsonText) value(i, depth int, typ reflect.Type) (int, error) {
	if i >= len(c.src) {
		return i, c.fail(i, "unexpected end of JSON")
	}
	if depth > maxJSONDepth {
		return i, c.fail(i, "nested too deeply")
	}
	switch c.src[i] {
	case '{':
		return c.object(i, depth, typ)
	case '[':
		var elem reflect.Type
		if typ != nil && (typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array) {
			elem = schemaType(typ.Elem())
		}
		return c.array(i, depth, elem)
	case '"':
		_, end, err := c.str(i, false)
		return end, err
	}
	start := i
	for i < len(c.src) && !strings.ContainsRune(",]} \t\r\n", rune(c.src[i])) {
		i++
	}
	if i == start {
		return i, c.fail(i, "invalid character")
	}
	return i, nil
}

func (c *jsonText) object(i, depth int, typ reflect.Type) (int, error) {
	fields := structFields(typ)
	i = c.space(i + 1)
	if i < len(c.src) && c.src[i] == '}' {
		return i + 1, nil
	}
	var small [16]string
	keys := small[:0]
	var seen map[string]bool // once an object has many members
	for {
		if i >= len(c.src) || c.src[i] != '"' {
			return i, c.fail(i, "expected an object key")
		}
		key, end, err := c.str(i, true)
		if err != nil {
			return end, err
		}
		dup := false
		if seen != nil {
			dup = seen[key]
			seen[key] = true
		} else {
			for _, k := range keys {
				dup = dup || k == key
			}
			if keys = append(keys, key); len(keys) > 16 {
				seen = make(map[string]bool, 32)
				for _, k := range keys {
					seen[k] = true
				}
			}
		}
		if dup {
			c.path = append(c.path, pathSeg{key: key, index: -1})
			return i, c.fail(i, fmt.Sprintf("duplicate key %s (encoding/json would keep only the last)", strconv.Quote(key)))
		}
		child, err := c.member(i, key, typ, fields)
		if err != nil {
			return i, err
		}
		i = c.space(end)
		if i >= len(c.src) || c.src[i] != ':' {
			return i, c.fail(i, "expected ':' after an object key")
		}
		c.path = append(c.path, pathSeg{key: key, index: -1})
		i, err = c.value(c.space(i+1), depth+1, child)
		c.path = c.path[:len(c.path)-1]
		if err != nil {
			return i, err
		}
		i = c.space(i)
		if i < len(c.src) && c.src[i] == ',' {
			i = c.space(i + 1)
			continue
		}
		if i < len(c.src) && c.src[i] == '}' {
			return i + 1, nil
		}
		return i, c.fail(i, "expected ',' or '}' in an object")
	}
}

func (c *jsonText) array(i, depth int, elem reflect.Type) (int, error) {
	i = c.space(i + 1)
	if i < len(c.src) && c.src[i] == ']' {
		return i + 1, nil
	}
	for n := 0; ; n++ {
		c.path = append(c.path, pathSeg{index: n})
		var err error
		i, err = c.value(i, depth+1, elem)
		c.path = c.path[:len(c.path)-1]
		if err != nil {
			return i, err
		}
		i = c.space(i)
		if i < len(c.src) && c.src[i] == ',' {
			i = c.space(i + 1)
			continue
		}
		if i < len(c.src) && c.src[i] == ']' {
			return i + 1, nil
		}
		return i, c.fail(i, "expected ',' or ']' in an array")
	}
}

// str checks the string starting at the quote at i and returns the offset after its closing quote
// and, when decode is set, its decoded value.
func (c *jsonText) str(i int, decode bool) (string, int, error) {
	start := i + 1
	var buf []byte // nil until the first escape
	for j := start; j < len(c.src); {
		if run := plainRun(c.src, j); run > j {
			if buf != nil {
				buf = append(buf, c.src[j:run]...)
			}
			j = run
			if j == len(c.src) {
				break
			}
		}
		b := c.src[j]
		switch {
		case b == '"':
			switch {
			case !decode:
				return "", j + 1, nil
			case buf == nil:
				return string(c.src[start:j]), j + 1, nil
			}
			return string(buf), j + 1, nil
		case b == '\\':
			if buf == nil && decode {
				buf = append([]byte(nil), c.src[start:j]...)
			}
			r, next, err := c.escape(j)
			if err != nil {
				return "", next, err
			}
			if decode {
				buf = utf8.AppendRune(buf, r)
			}
			j = next
		case b < utf8.RuneSelf:
			if buf != nil {
				buf = append(buf, b)
			}
			j++
		default:
			r, size := utf8.DecodeRune(c.src[j:])
			if r == utf8.RuneError && size == 1 {
				return "", j, c.fail(j, "invalid UTF-8 (encoding/json would replace it with U+FFFD)")
			}
			if buf != nil {
				buf = append(buf, c.src[j:j+size]...)
			}
			j += size
		}
	}
	return "", len(c.src), c.fail(len(c.src), "unterminated string")
}

// plainRun returns the index of the first byte at or after j that str must look at: a quote, a
// backslash or the start of a multi-byte character. Strings are mostly long runs of other ASCII
// (tool output, hex, base64), which it skips eight bytes at a time instead of one.
func plainRun(src []byte, j int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; j+8 <= len(src); j += 8 {
		w := binary.LittleEndian.Uint64(src[j:])
		quote, backslash := w^('"'*ones), w^('\\'*ones)
		// A byte of x is zero when (x - ones) &^ x sets its high bit; any set high bit in w itself is
		// a byte of a multi-byte character.
		if (w|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs != 0 {
			break
		}
	}
	for ; j < len(src); j++ {
		if b := src[j]; b == '"' || b == '\\' || b >= utf8.RuneSelf {
			break
		}
	}
	return j
}

// escape decodes the escape sequence whose backslash is at j.
func (c *jsonText) escape(j int) (rune, int, error) {
	if j+1 >= len(c.src) {
		return 0, j, c.fail(j, "unterminated escape")
	}
	switch e := c.src[j+1]; e {
	case '"', '\\', '/':
		return rune(e), j + 2, nil
	case 'b':
		return '\b', j + 2, nil
	case 'f':
		return '\f', j + 2, nil
	case 'n':
		return '\n', j + 2, nil
	case 'r':
		return '\r', j + 2, nil
	case 't':
		return '\t', j + 2, nil
	case 'u':
		r, ok := c.hex4(j + 2)
		if !ok {
			return 0, j, c.fail(j, "invalid \\u escape")
		}
		if !utf16.IsSurrogate(r) {
			return r, j + 6, nil
		}
		if r < 0xDC00 && j+7 < len(c.src) && c.src[j+6] == '\\' && c.src[j+7] == 'u' {
			if lo, ok := c.hex4(j + 8); ok && 0xDC00 <= lo && lo <= 0xDFFF {
				return utf16.DecodeRune(r, lo), j + 12, nil
			}
		}
		return 0, j, c.fail(j, "unpaired UTF-16 surrogate escape (encoding/json would replace it with U+FFFD)")
	}
	return 0, j, c.fail(j, "invalid escape")
}

func (c *jsonText) hex4(i int) (rune, bool) {
	if i+4 > len(c.src) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(c.src[i:i+4]), 16, 16)
	return rune(v), err == nil
}

// member returns the Go type of the value of key in an object of type typ (nil when unconstrained),
// refusing a key that names a struct field only case-insensitively.
func (c *jsonText) member(offset int, key string, typ reflect.Type, fields map[string]reflect.Type) (reflect.Type, error) {
	if fields == nil {
		if typ != nil && typ.Kind() == reflect.Map {
			return schemaType(typ.Elem()), nil
		}
		return nil, nil
	}
	if ft, ok := fields[key]; ok {
		return schemaType(ft), nil
	}
	for name := range fields {
		if strings.EqualFold(name, key) {
			c.path = append(c.path, pathSeg{key: key, index: -1})
			return nil, c.fail(offset, fmt.Sprintf("key %s is the field %s spelled in another case (encoding/json would read it as that field)",
				strconv.Quote(key), strconv.Quote(name)))
		}
	}
	return nil, nil
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// schemaType is the type a JSON value decodes into with pointers stripped, or nil when the value is
// unconstrained (raw JSON, an interface).
func schemaType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessageType || t.Kind() == reflect.Interface {
		return nil
	}
	return t
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// structFields maps the JSON names of a struct type's fields to their types; nil for other types.
func structFields(t reflect.Type) map[string]reflect.Type {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldCache.Store(t, m)
	return m
}
