package fingerprint

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds nesting so a hostile document cannot exhaust the stack. It is encoding/json's limit,
// so every document encoding/json accepts is accepted here.
const MaxDepth = 10000

const maxDepth = MaxDepth

// parser is a single-pass recursive-descent JSON parser that builds canonical nodes directly.
//
// It is hand-written rather than built on encoding/json for three reasons: encoding/json silently
// replaces invalid UTF-8 and unpaired surrogates with U+FFFD and lets the last duplicate key win, both
// of which would make different requests fingerprint alike; a token-by-token json.Decoder allocates per
// token and reports offsets loosely; and parsing straight into sorted nodes is the hot path of replay.
//
// It accepts exactly the RFC 8259 grammar that encoding/json accepts. Syntax errors stop it at once.
// Other problems (duplicate keys, invalid text, overflowing numbers) are recorded and parsing goes on,
// so that a document that is also malformed always reports its SyntaxError: callers can then rely on
// "SyntaxError if and only if this is not JSON".
type parser struct {
	src   string // the document; copied once so that strings can be substrings of it
	pos   int
	depth int
	path  path
	first error // first non-syntax error, reported once the whole document is known to be well-formed

	// scratch collects the children of the containers being parsed. Each container appends above the
	// mark where it started and, once closed, copies its children into one exactly sized slice, so a
	// container costs one allocation instead of a growing append.
	scratch []member

	at path // where an embedded document sits in its Go value; nil for a top-level document
}

// parseDocument parses a complete JSON document. at is the location of the document inside an
// enclosing Go value (nil for a top-level document); it prefixes the paths of errors.
func parseDocument(src string, at path) (node, error) {
	p := parser{src: src, path: slices.Clone(at), at: at}
	n, err := p.value()
	if err == nil {
		p.skipSpace()
		if p.pos < len(p.src) {
			err = p.invalidChar(p.pos, "after top-level value")
		}
	}
	if err != nil {
		return node{}, err
	}
	if p.first != nil {
		return node{}, p.first
	}
	return n, nil
}

// failed reports whether a non-syntax error is already recorded. Only the first one is kept, so later
// ones need not be built: building one formats the path, which costs time proportional to the depth.
func (p *parser) failed() bool { return p.first != nil }

// fail records a non-syntax error unless one is recorded already.
func (p *parser) fail(err error) {
	if p.first == nil {
		p.first = err
	}
}

func (p *parser) syntaxError(offset int, msg string) error {
	e := &SyntaxError{Offset: int64(offset), Msg: msg}
	if len(p.at) > 0 {
		e.embeddedAt = p.at.String()
	}
	return e
}

func (p *parser) invalidChar(offset int, context string) error {
	return p.syntaxError(offset, "invalid character "+describeByte(p.src[offset])+" "+context)
}

func (p *parser) unexpectedEnd() error {
	return p.syntaxError(len(p.src), "unexpected end of JSON input")
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value() (node, error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return node{}, p.unexpectedEnd()
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str(false)
		return node{kind: kindString, text: s}, err
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number()
	case c == 't':
		return node{kind: kindTrue}, p.literal("true")
	case c == 'f':
		return node{kind: kindFalse}, p.literal("false")
	case c == 'n':
		return node{kind: kindNull}, p.literal("null")
	}
	return node{}, p.invalidChar(p.pos, "looking for beginning of value")
}

// enter counts one more level of nesting, failing past maxDepth.
func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.syntaxError(p.pos, "exceeded maximum nesting depth of "+strconv.Itoa(maxDepth))
	}
	return nil
}

func (p *parser) object() (node, error) {
	if err := p.enter(); err != nil {
		return node{}, err
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		p.depth--
		return node{kind: kindObject}, nil
	}
	mark := len(p.scratch)
	for {
		m, err := p.objectMember()
		if err != nil {
			return node{}, err
		}
		p.scratch = append(p.scratch, m)
		p.skipSpace()
		if p.pos >= len(p.src) {
			return node{}, p.unexpectedEnd()
		}
		c := p.src[p.pos]
		if c == '}' {
			p.pos++
			break
		}
		if c != ',' {
			return node{}, p.invalidChar(p.pos, "after object key:value pair")
		}
		p.pos++
	}
	p.depth--
	members := p.popChildren(mark)
	if dup, ok := sortMembers(members); !ok && !p.failed() {
		p.fail(&DuplicateKeyError{Path: p.path.String(), Key: dup})
	}
	return node{kind: kindObject, kids: members}, nil
}

// objectMember parses `"key": value`.
func (p *parser) objectMember() (member, error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return member{}, p.unexpectedEnd()
	}
	if p.src[p.pos] != '"' {
		return member{}, p.invalidChar(p.pos, "looking for beginning of object key string")
	}
	key, err := p.str(true)
	if err != nil {
		return member{}, err
	}
	p.skipSpace()
	if p.pos >= len(p.src) {
		return member{}, p.unexpectedEnd()
	}
	if p.src[p.pos] != ':' {
		return member{}, p.invalidChar(p.pos, "after object key")
	}
	p.pos++
	p.path = append(p.path, keySegment(key))
	v, err := p.value()
	p.path = p.path[:len(p.path)-1]
	return member{key: key, val: v}, err
}

func (p *parser) array() (node, error) {
	if err := p.enter(); err != nil {
		return node{}, err
	}
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		p.depth--
		return node{kind: kindArray}, nil
	}
	mark := len(p.scratch)
	for i := 0; ; i++ {
		p.path = append(p.path, indexSegment(i))
		v, err := p.value()
		p.path = p.path[:len(p.path)-1]
		if err != nil {
			return node{}, err
		}
		p.scratch = append(p.scratch, member{val: v})
		p.skipSpace()
		if p.pos >= len(p.src) {
			return node{}, p.unexpectedEnd()
		}
		c := p.src[p.pos]
		if c == ']' {
			p.pos++
			break
		}
		if c != ',' {
			return node{}, p.invalidChar(p.pos, "after array element")
		}
		p.pos++
	}
	p.depth--
	return node{kind: kindArray, kids: p.popChildren(mark)}, nil
}

// popChildren moves the children collected above mark out of the scratch stack.
func (p *parser) popChildren(mark int) []member {
	kids := make([]member, len(p.scratch)-mark)
	copy(kids, p.scratch[mark:])
	clear(p.scratch[mark:]) // drop references so the scratch does not pin finished subtrees
	p.scratch = p.scratch[:mark]
	return kids
}

// literal consumes true, false or null, reporting the first byte that differs.
func (p *parser) literal(lit string) error {
	for i := 0; i < len(lit); i++ {
		at := p.pos + i
		if at >= len(p.src) {
			return p.unexpectedEnd()
		}
		if p.src[at] != lit[i] {
			return p.invalidChar(at, "in literal "+lit+" (expecting "+describeByte(lit[i])+")")
		}
	}
	p.pos += len(lit)
	return nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// digits consumes one or more decimal digits starting at i.
func (p *parser) digits(i int, context string) (int, error) {
	if i >= len(p.src) {
		return i, p.unexpectedEnd()
	}
	if !isDigit(p.src[i]) {
		return i, p.invalidChar(i, context)
	}
	for i < len(p.src) && isDigit(p.src[i]) {
		i++
	}
	return i, nil
}

// special marks the bytes that end a run of literal string content: the quote, the backslash and the
// control characters, which are not allowed unescaped.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// str parses a string starting at its opening quote and returns its NFC-normalized text. Without
// escapes the text is a substring of the document, and plain ASCII (always NFC) costs nothing more.
func (p *parser) str(isKey bool) (string, error) {
	s := p.src
	start := p.pos + 1
	i := start
	var seen byte // OR of the bytes scanned: bit 7 set means some are not ASCII
	for i < len(s) && !special[s[i]] {
		seen |= s[i]
		i++
	}
	switch {
	case i >= len(s):
		return "", p.unexpectedEnd()
	case s[i] == '\\':
		return p.escapedStr(start, i, isKey)
	case s[i] != '"':
		return "", p.invalidChar(i, "in string literal")
	}
	p.pos = i + 1
	if seen < 0x80 {
		return s[start:i], nil
	}
	return p.normalize(s[start:i], isKey), nil
}

// escapedStr finishes a string whose first escape is at i, decoding it into a new buffer.
func (p *parser) escapedStr(start, i int, isKey bool) (string, error) {
	s := p.src
	var buf strings.Builder // its String() hands over the bytes without another copy
	buf.Grow(i - start + 64)
	buf.WriteString(s[start:i])
	for i < len(s) {
		switch c := s[i]; {
		case c == '"':
			p.pos = i + 1
			return p.normalize(buf.String(), isKey), nil
		case c == '\\':
			var err error
			if i, err = p.escape(&buf, i, isKey); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", p.invalidChar(i, "in string literal")
		default:
			run := i
			for i < len(s) && !special[s[i]] {
				i++
			}
			buf.WriteString(s[run:i])
		}
	}
	return "", p.unexpectedEnd()
}

// escape decodes the escape sequence whose backslash is at i, returning the position after it.
func (p *parser) escape(buf *strings.Builder, i int, isKey bool) (int, error) {
	s := p.src
	i++
	if i >= len(s) {
		return i, p.unexpectedEnd()
	}
	switch c := s[i]; c {
	case '"', '\\', '/':
		buf.WriteByte(c)
	case 'b':
		buf.WriteByte('\b')
	case 'f':
		buf.WriteByte('\f')
	case 'n':
		buf.WriteByte('\n')
	case 'r':
		buf.WriteByte('\r')
	case 't':
		buf.WriteByte('\t')
	case 'u':
		r, err := p.hex4(i + 1)
		if err != nil {
			return i, err
		}
		i += 5
		if utf16.IsSurrogate(r) {
			r, i = p.surrogatePair(r, i, isKey)
		}
		buf.WriteRune(r)
		return i, nil
	default:
		return i, p.invalidChar(i, "in string escape code")
	}
	return i + 1, nil
}

// surrogatePair joins a high surrogate with the low surrogate escape that must follow it at i. An
// unpaired surrogate is recorded as an error (it is not Unicode text) and decoded as U+FFFD so parsing
// can go on to find any syntax error.
func (p *parser) surrogatePair(hi rune, i int, isKey bool) (rune, int) {
	if hi < 0xDC00 && i+1 < len(p.src) && p.src[i] == '\\' && p.src[i+1] == 'u' {
		if lo, err := p.hex4(i + 2); err == nil && 0xDC00 <= lo && lo <= 0xDFFF {
			return utf16.DecodeRune(hi, lo), i + 6
		}
	}
	what := badSurrogate
	if isKey {
		what = badSurrogateKey
	}
	if !p.failed() {
		p.fail(&InvalidUTF8Error{Path: p.path.String(), what: what})
	}
	return utf8.RuneError, i
}

// hex4 decodes the four hex digits of a \u escape starting at i.
func (p *parser) hex4(i int) (rune, error) {
	var r rune
	for k := i; k < i+4; k++ {
		if k >= len(p.src) {
			return 0, p.unexpectedEnd()
		}
		c := p.src[k]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.invalidChar(k, "in \\u hexadecimal character escape")
		}
		r = r<<4 | rune(d)
	}
	return r, nil
}

// normalize validates a decoded string and returns its NFC form.
func (p *parser) normalize(s string, isKey bool) string {
	if !utf8.ValidString(s) {
		if !p.failed() {
			what := badUTF8String
			if isKey {
				what = badUTF8Key
			}
			p.fail(&InvalidUTF8Error{Path: p.path.String(), what: what})
		}
		return s
	}
	out, ok := nfc(s)
	if !ok && !p.failed() {
		p.fail(&CombiningRunError{Path: p.path.String()})
	}
	return out
}
