package jsonscan

import "bytes"

// maxDepth is encoding/json's limit on nested arrays and objects: json.Valid refuses a deeper value.
const maxDepth = 10000

// Valid reports whether b is exactly one JSON value, surrounded by whitespace or not: json.Valid.
// Like it, it does not look at the UTF-8 inside strings.
func Valid(b []byte) bool {
	valid, _ := Check(b, 0)
	return valid
}

// Compact reports whether b is one JSON value without whitespace outside its strings: a value
// json.Compact returns unchanged.
func Compact(b []byte) bool {
	valid, compact := Check(b, 0)
	return valid && compact
}

// Check reports whether b is one JSON value that json.Valid would accept inside enclosing arrays
// and objects (as a document's member is inside one: its own depth is the document's limit less
// those), and whether it is compact as well.
func Check(b []byte, enclosing int) (valid, compact bool) {
	s := scanner{b: b}
	s.space()
	if !s.value(enclosing) {
		return false, false
	}
	s.space()
	return s.i == len(b), !s.spaced
}

// scanner walks b from i; spaced says whether it met whitespace between tokens.
type scanner struct {
	b      []byte
	i      int
	spaced bool
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.spaced = true
			s.i++
		default:
			return
		}
	}
}

// next is the byte at i, or 0 at the end (never a byte a token may start or go on with).
func (s *scanner) next() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// value reads one value inside depth open arrays and objects.
func (s *scanner) value(depth int) bool {
	switch c := s.next(); {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		return s.str()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	return false
}

func (s *scanner) object(depth int) bool {
	if depth > maxDepth {
		return false
	}
	s.i++ // {
	s.space()
	if s.next() == '}' {
		s.i++
		return true
	}
	for {
		if s.next() != '"' || !s.str() {
			return false
		}
		s.space()
		if s.next() != ':' {
			return false
		}
		s.i++
		s.space()
		if closed, ok := s.valueThen(depth, '}'); !ok || closed {
			return ok
		}
	}
}

func (s *scanner) array(depth int) bool {
	if depth > maxDepth {
		return false
	}
	s.i++ // [
	s.space()
	if s.next() == ']' {
		s.i++
		return true
	}
	for {
		if closed, ok := s.valueThen(depth, ']'); !ok || closed {
			return ok
		}
	}
}

// valueThen reads a member's or an element's value and what follows it: a comma, more to come, or
// closer, the end of its object or array.
func (s *scanner) valueThen(depth int, closer byte) (closed, ok bool) {
	if !s.value(depth) {
		return false, false
	}
	s.space()
	switch s.next() {
	case ',':
		s.i++
		s.space()
		return false, true
	case closer:
		s.i++
		return true, true
	}
	return false, false
}

// str reads a string from its opening quote.
func (s *scanner) str() bool {
	b, i := s.b, s.i+1
	for {
		for i < len(b) && plain[b[i]] { // the bulk of a string, a byte at a time without a branch per kind
			i++
		}
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return true
		case '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return false
				}
				i += 6
			default:
				return false
			}
		default: // a control character
			return false
		}
	}
}

// plain says which bytes stand for themselves inside a string: all but '"', '\\' and the control
// characters (encoding/json does not look at UTF-8 there).
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (s *scanner) literal(word string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; what follows is its reader's to check.
func (s *scanner) number() bool {
	if s.next() == '-' {
		s.i++
	}
	switch c := s.next(); {
	case c == '0':
		s.i++
	case '1' <= c && c <= '9':
		s.digits()
	default:
		return false
	}
	if s.next() == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if c := s.next(); c == 'e' || c == 'E' {
		s.i++
		if c := s.next(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits reads one digit or more.
func (s *scanner) digits() bool {
	start := s.i
	for c := s.next(); '0' <= c && c <= '9'; c = s.next() {
		s.i++
	}
	return s.i > start
}
