package fingerprint

import (
	"fmt"
	"strconv"
	"strings"
)

// NonFiniteError reports a number with no JSON form in a Go value: NaN or ±Inf.
type NonFiniteError struct {
	Path string // where the number is, e.g. $.params.temperature

	value string // "NaN", "+Inf" or "-Inf"; only shapes the message
}

func (e *NonFiniteError) Error() string {
	if e.value == "" {
		return fmt.Sprintf("fingerprint: %s: a non-finite number is not valid JSON (only finite numbers can be fingerprinted)", e.Path)
	}
	return fmt.Sprintf("fingerprint: %s: %s is not valid JSON (only finite numbers can be fingerprinted)", e.Path, e.value)
}

// NumberRangeError reports a number literal whose decimal exponent, written as d.ddd×10^e, lies beyond
// ±9999 (1e10000, 1e-10000). Numbers are fingerprinted exactly, never rounded to a double, so any
// other literal is accepted, 1e400 and 1e-400 included.
type NumberRangeError struct {
	Path string // where the number is

	value string // the literal, clipped; only shapes the message
}

func (e *NumberRangeError) Error() string {
	lit := e.value
	if lit == "" {
		lit = "literal"
	}
	return fmt.Sprintf("fingerprint: %s: number %s is out of range (only exponents within ±%d can be fingerprinted)",
		e.Path, lit, maxExponent)
}

// CombiningRunError reports a string with a run of more than 30 combining marks, which NFC can only
// normalise by inserting U+034F: it would then equal a different string that holds that U+034F.
type CombiningRunError struct {
	Path string // the string, or the object whose key it is
}

func (e *CombiningRunError) Error() string {
	return fmt.Sprintf("fingerprint: %s: string has more than 30 combining marks in a row and cannot be normalised "+
		"without changing it", e.Path)
}

// DuplicateKeyError reports an object with two members of the same name, either literally or after NFC
// normalization. Which of them should count is a guess the fingerprint refuses to make.
type DuplicateKeyError struct {
	Path string // the object holding the duplicates
	Key  string // the NFC-normalized key
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("fingerprint: %s: duplicate key %s (object keys must be unique after Unicode NFC normalization)",
		e.Path, strconv.Quote(e.Key))
}

// SyntaxError reports a malformed JSON document.
type SyntaxError struct {
	Offset int64  // 0-based byte offset of the first byte that makes the document invalid; its length if it ends early
	Msg    string // what was wrong there

	// embeddedAt is the path of the json.RawMessage or json.Number inside a Go value that held the
	// document; Offset is then relative to that document. Empty for a top-level document.
	embeddedAt string
}

func (e *SyntaxError) Error() string {
	if e.embeddedAt != "" {
		return fmt.Sprintf("fingerprint: %s: invalid JSON at byte offset %d of the embedded document: %s", e.embeddedAt, e.Offset, e.Msg)
	}
	return fmt.Sprintf("fingerprint: invalid JSON at byte offset %d: %s", e.Offset, e.Msg)
}

// UnsupportedTypeError reports a Go value with no JSON representation (channels, funcs, complex numbers)
// or one nested too deeply to be anything but cyclic.
type UnsupportedTypeError struct {
	Path string // where the value is
	Type string // its Go type

	reason string // overrides the default explanation
}

func (e *UnsupportedTypeError) Error() string {
	reason := e.reason
	if reason == "" {
		reason = "it has no JSON representation"
	}
	return fmt.Sprintf("fingerprint: %s: a value of type %s cannot be fingerprinted (%s)", e.Path, e.Type, reason)
}

// InvalidUTF8Error reports a string or key that is not valid Unicode text: invalid UTF-8 bytes, an
// unpaired UTF-16 surrogate escape, or a Redact result that is not valid UTF-8. Repairing it (as
// encoding/json does with U+FFFD) would make different inputs fingerprint alike.
type InvalidUTF8Error struct {
	Path string // the string, or the object whose key is broken

	what string // which kind of text was broken; only shapes the message
}

func (e *InvalidUTF8Error) Error() string {
	what := e.what
	if what == "" {
		what = "string is not valid UTF-8"
	}
	return fmt.Sprintf("fingerprint: %s: %s", e.Path, what)
}

// Messages for InvalidUTF8Error.what.
const (
	badUTF8String   = "string is not valid UTF-8"
	badUTF8Key      = "an object key is not valid UTF-8"
	badSurrogate    = "string contains an unpaired UTF-16 surrogate escape, which is not valid Unicode"
	badSurrogateKey = "an object key contains an unpaired UTF-16 surrogate escape, which is not valid Unicode"
	badRedaction    = "Redact returned a string that is not valid UTF-8"
	badUTF8Inside   = "a string inside this value is not valid UTF-8"
)

// segment is one step of a path: an object key, or an array index when index >= 0.
type segment struct {
	key   string
	index int
}

func keySegment(k string) segment { return segment{key: k, index: -1} }
func indexSegment(i int) segment  { return segment{index: i} }

// path locates a value inside a document. It is kept as segments and only formatted when an error needs
// it, so tracking it costs nothing on the success path beyond an append and a truncate per value.
type path []segment

// String renders the path in JSONPath style: $.messages[2].content, or $["content-type"] for keys that
// are not identifiers.
func (p path) String() string {
	var sb strings.Builder
	sb.WriteByte('$')
	for _, s := range p {
		switch {
		case s.index >= 0:
			sb.WriteByte('[')
			sb.WriteString(strconv.Itoa(s.index))
			sb.WriteByte(']')
		case isIdentifier(s.key):
			sb.WriteByte('.')
			sb.WriteString(s.key)
		default:
			sb.WriteByte('[')
			sb.WriteString(strconv.Quote(s.key))
			sb.WriteByte(']')
		}
	}
	return sb.String()
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// describeByte names a byte for a syntax error message without copying arbitrary input into it.
func describeByte(c byte) string {
	switch {
	case c == '\'':
		return `'\''`
	case c == '"':
		return `'"'`
	case c >= 0x80:
		return fmt.Sprintf("byte 0x%02x", c)
	default:
		q := strconv.Quote(string(rune(c)))
		return "'" + q[1:len(q)-1] + "'"
	}
}

// clip bounds how much of the input is copied into an error message: messages end up in logs and
// Kubernetes status, and a fingerprinted request may be large and sensitive.
func clip(s string) string {
	const max = 32
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
