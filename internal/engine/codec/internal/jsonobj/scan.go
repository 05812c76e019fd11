package jsonobj

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
)

// The codecs parse every request and every replayed answer, so Parse and SplitArray walk a valid
// document's structure byte by byte instead of going through encoding/json's token decoder, which
// validates again, buffers and copies each value (a third of a replayed call's codec time). The
// walk only finds where members and elements begin and end: it runs on documents json.Valid
// accepted, and hands anything it does not expect to the decoder, whose result is the reference
// (FuzzScanAgreesWithTheDecoder).

// scanObject is Parse for a valid document: ok is false when raw is not laid out as one object the
// walk can take, and the caller falls back to the decoder.
func scanObject(raw []byte) (*Object, bool) {
	buf := bytes.Clone(raw) // values alias this copy, never the caller's buffer
	i := skipSpace(buf, 0)
	if i >= len(buf) || buf[i] != '{' {
		return nil, false
	}
	o := New()
	i = skipSpace(buf, i+1)
	if i < len(buf) && buf[i] == '}' {
		return o, skipSpace(buf, i+1) == len(buf)
	}
	for {
		if i >= len(buf) || buf[i] != '"' {
			return nil, false
		}
		end, plain := skipString(buf, i)
		if end < 0 {
			return nil, false
		}
		key, ok := decodeKey(buf[i:end], plain)
		if !ok {
			return nil, false
		}
		i = skipSpace(buf, end)
		if i >= len(buf) || buf[i] != ':' {
			return nil, false
		}
		start := skipSpace(buf, i+1)
		end, spaced := skipValue(buf, start)
		if end < 0 {
			return nil, false
		}
		o.Set(key, member(buf, start, end, spaced))
		next, closed, ok := afterValue(buf, end, '}')
		if closed || !ok {
			return o, ok
		}
		i = next
	}
}

// SplitArray returns the compact elements of a JSON array, and false when raw is not one.
func SplitArray(raw []byte) ([]json.RawMessage, bool) {
	if !jsonscan.Valid(raw) {
		return nil, false
	}
	return scanArray(raw) // on a valid document the walk fails only where raw is not an array
}

func scanArray(raw []byte) ([]json.RawMessage, bool) {
	buf := bytes.Clone(raw)
	i := skipSpace(buf, 0)
	if i >= len(buf) || buf[i] != '[' {
		return nil, false
	}
	items := []json.RawMessage{}
	i = skipSpace(buf, i+1)
	if i < len(buf) && buf[i] == ']' {
		return items, skipSpace(buf, i+1) == len(buf)
	}
	for {
		end, spaced := skipValue(buf, i)
		if end < 0 {
			return nil, false
		}
		items = append(items, member(buf, i, end, spaced))
		next, closed, ok := afterValue(buf, end, ']')
		if closed || !ok {
			return items, ok
		}
		i = next
	}
}

// afterValue reads what follows a member or element ending at end: a comma, after which the next
// one starts at next, or closer, which must end the document (closed); ok is false for anything else.
func afterValue(buf []byte, end int, closer byte) (next int, closed, ok bool) {
	i := skipSpace(buf, end)
	switch {
	case i < len(buf) && buf[i] == ',':
		return skipSpace(buf, i+1), false, true
	case i < len(buf) && buf[i] == closer:
		return 0, true, skipSpace(buf, i+1) == len(buf)
	}
	return 0, false, false
}

// String is the text of a compact JSON string value, and false when raw is not one: a plain ASCII
// string is its bytes, any other is decoded by encoding/json (escapes, and U+FFFD for invalid UTF-8).
func String(raw json.RawMessage) (string, bool) {
	if Kind(raw) != '"' {
		return "", false
	}
	if end, plain := skipString(raw, 0); plain && end == len(raw) {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// member is the value buf[start:end], compacted when it holds whitespace, capped at its length so
// that an append to it cannot write over the next value.
func member(buf []byte, start, end int, spaced bool) json.RawMessage {
	if spaced {
		return Compact(buf[start:end])
	}
	return buf[start:end:end]
}

// decodeKey is a quoted key's text as the decoder gives it: a plain ASCII key is its bytes; any
// other (escapes, or bytes the decoder would replace with U+FFFD) is decoded by encoding/json.
func decodeKey(quoted []byte, plain bool) (string, bool) {
	if plain {
		return string(quoted[1 : len(quoted)-1]), true
	}
	var k string
	return k, json.Unmarshal(quoted, &k) == nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] (a quote), or -1 when it does not
// end; plain is true when it holds only printable ASCII and no escapes.
func skipString(b []byte, i int) (int, bool) {
	plain := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, plain
		case c == '\\':
			plain = false
			j++
		case c < 0x20 || c >= utf8.RuneSelf:
			plain = false
		}
	}
	return -1, false
}

// skipValue returns the index after the value starting at b[i], or -1 when there is none, and
// whether whitespace stands between its tokens.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return -1, false
	}
	switch b[i] {
	case '"':
		end, _ := skipString(b, i)
		return end, false
	case '{', '[':
		depth, spaced := 0, false
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := skipString(b, j)
				if end < 0 {
					return -1, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, spaced
				}
			case ' ', '\t', '\n', '\r':
				spaced = true
			}
		}
		return -1, false
	default: // a number or a literal runs to the next delimiter
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, false
			}
			j++
		}
		return j, false
	}
}
