package fingerprint

import (
	"bytes"
	"math"
	"strconv"
)

// appendValue writes the canonical JSON text of n. The tree is already canonical (sorted, normalized,
// finite), so this pass only formats; it cannot fail.
func appendValue(dst []byte, n *node) []byte {
	switch n.kind {
	case kindNull:
		return append(dst, "null"...)
	case kindFalse:
		return append(dst, "false"...)
	case kindTrue:
		return append(dst, "true"...)
	case kindNumber:
		if n.text != "" {
			return append(dst, n.text...) // a literal's canonical text, or an integer too large for a double
		}
		return appendNumber(dst, n.num)
	case kindString:
		return appendString(dst, n.text)
	case kindArray:
		dst = append(dst, '[')
		for i := range n.kids {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, &n.kids[i].val)
		}
		return append(dst, ']')
	default: // kindObject
		dst = append(dst, '{')
		for i := range n.kids {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, n.kids[i].key)
			dst = append(dst, ':')
			dst = appendValue(dst, &n.kids[i].val)
		}
		return append(dst, '}')
	}
}

// appendNumber writes a finite double as ECMAScript's Number::toString does (RFC 8785 section 3.2.2.3):
// the shortest digits that round-trip, in plain notation for 1e-6 <= |f| < 1e21 and exponent notation
// otherwise.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // covers -0, which ECMAScript prints as 0
	}
	// Integers are the common case (max_tokens, indexes, counts) and print as themselves; below 2^53 the
	// conversion is exact and much cheaper than the shortest-digits search.
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	if abs := math.Abs(f); abs >= 1e-6 && abs < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	// Go pads the exponent to two digits ("1e-07"); ECMAScript does not ("1e-7"). Exponents here are at
	// least 7 in magnitude, so only a single padding zero can occur.
	e := start + bytes.IndexByte(dst[start:], 'e')
	if dst[e+2] == '0' {
		dst = append(dst[:e+2], dst[e+3:]...)
	}
	return dst
}

// needsEscape marks the bytes RFC 8785 escapes: '"', '\\' and the C0 controls. Everything else,
// including DEL, '<', '>', '&', U+2028 and U+2029, is written as itself.
var needsEscape = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

const hexDigits = "0123456789abcdef"

// appendString writes s, which must be valid UTF-8, as a canonical JSON string, copying runs of bytes
// that need no escaping in one step.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !needsEscape[c] {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
