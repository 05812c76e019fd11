package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// JSONError reports a malformed JSON document; Offset is the byte offset in the input where the
// problem was detected.
type JSONError struct {
	Offset int64
	Err    error
}

func (e *JSONError) Error() string {
	return fmt.Sprintf("redact: malformed JSON at byte %d: %v", e.Offset, e.Err)
}

func (e *JSONError) Unwrap() error { return e.Err }

// TextError reports a string or object key of a well-formed JSON document that is not valid Unicode
// text: bytes that are not UTF-8, or a \u escape of a UTF-16 surrogate that is not half of a pair.
// Redaction refuses such a document rather than repair it: repaired text (U+FFFD) would fingerprint
// like a request that really said U+FFFD, where package fingerprint refuses the original.
type TextError struct {
	Offset int64  // byte offset in the input of the first invalid byte, or of the backslash of the bad escape
	Reason string // what is wrong there; never a copy of the input
}

func (e *TextError) Error() string {
	return fmt.Sprintf("redact: string at byte %d is not valid Unicode text: %s", e.Offset, e.Reason)
}

// Reasons for TextError.
const (
	reasonBadUTF8   = "invalid UTF-8"
	reasonSurrogate = "unpaired UTF-16 surrogate escape"
)

// JSON redacts every string leaf and every object key of a JSON document. The document is re-emitted
// compactly, without HTML escaping, with object members in their original order and numbers with
// their exact original text (1.50 stays 1.50): a recorded body must change only where a secret was.
//
// A string member value is also matched together with its key ("aws_secret_access_key=<value>"),
// so key-anchored shapes are found when the name and the secret are separate JSON strings. A secret
// found anywhere in the document is redacted everywhere in it, before where it was found too.
//
// A string holding JSON escapes (a JSON body carried in a string, as a tool result or a ledger entry
// often is) is also read unescaped: when a secret can only be read that way (\u0073k-…, a key with
// \/), the whole string is replaced by its own token, which the vault restores exactly.
//
// Bytes are never repaired: a malformed document is a *JSONError, and a string holding invalid UTF-8
// or an unpaired surrogate escape ("\ud800") is a *TextError, where encoding/json would substitute
// U+FFFD and make different requests look alike.
func (r *Redactor) JSON(doc []byte) ([]byte, error) { return r.jsonCounted(r.counts, doc) }

// jsonCounted is JSON counting into counts.
func (r *Redactor) jsonCounted(counts map[string]int, doc []byte) ([]byte, error) {
	if out, ok := r.cleanDocument(doc); ok {
		return out, nil
	}
	var out []byte
	err := r.settle(counts, func(found *[]finding) error {
		var err error
		out, err = rewriteJSON(doc, stringRewriter{
			key: func(k string) string { return r.redactText("", k, found) },
			value: func(key string, member bool, v string) string {
				prefix := ""
				if member {
					prefix = key + "="
				}
				return r.redactText(prefix, v, found)
			},
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// redactInContext redacts v as if it followed prefix, leaving prefix itself alone.
func (r *Redactor) redactInContext(prefix, v string, found *[]finding) string {
	return r.redact(prefix+v, len(prefix), found)[len(prefix):]
}

// stringRewriter says how rewriteJSON transforms object keys and string values. value receives the
// raw (untransformed) key of the member it belongs to, and member=false inside arrays or at the top.
type stringRewriter struct {
	key   func(k string) string
	value func(key string, member bool, v string) string
}

// frame is one open object or array while re-emitting a document.
type frame struct {
	object    bool
	expectKey bool   // in an object: the next string token is a key
	n         int    // members or elements written so far
	key       string // in an object: raw key of the member whose value comes next
}

type jsonRewrite struct {
	dec   *json.Decoder
	out   bytes.Buffer
	enc   *json.Encoder
	rw    stringRewriter
	stack []frame
}

// rewriteJSON streams doc token by token (rather than decoding into maps) so member order, duplicate
// keys and number text survive unchanged. json.Decoder would repair invalid text in strings, so a
// well-formed document is then checked for it and refused with a *TextError.
func rewriteJSON(doc []byte, rw stringRewriter) ([]byte, error) {
	out, err := rewriteTokens(doc, rw)
	if err != nil {
		return nil, err
	}
	if err := checkText(doc); err != nil {
		return nil, err
	}
	return out, nil
}

func rewriteTokens(doc []byte, rw stringRewriter) ([]byte, error) {
	j := &jsonRewrite{dec: json.NewDecoder(bytes.NewReader(doc)), rw: rw}
	j.dec.UseNumber()
	j.out.Grow(len(doc))
	j.enc = json.NewEncoder(&j.out)
	j.enc.SetEscapeHTML(false)
	complete := false
	for {
		offset := j.dec.InputOffset()
		tok, err := j.dec.Token()
		if err == io.EOF {
			if !complete {
				return nil, &JSONError{Offset: int64(len(doc)), Err: io.ErrUnexpectedEOF}
			}
			return j.out.Bytes(), nil
		}
		if err != nil {
			return nil, syntaxError(j.dec, err, int64(len(doc)))
		}
		if complete {
			// json.Decoder reads a stream of values; a document is exactly one.
			return nil, &JSONError{Offset: offset, Err: errors.New("unexpected data after the top-level value")}
		}
		if err := j.emit(tok); err != nil {
			return nil, &JSONError{Offset: offset, Err: err}
		}
		complete = len(j.stack) == 0
	}
}

func syntaxError(dec *json.Decoder, err error, docLen int64) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return &JSONError{Offset: se.Offset, Err: err}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) { // a truncated literal such as "nul": the input ran out
		return &JSONError{Offset: docLen, Err: err}
	}
	return &JSONError{Offset: dec.InputOffset(), Err: err}
}

func (j *jsonRewrite) emit(tok json.Token) error {
	switch t := tok.(type) {
	case json.Delim:
		return j.delim(t)
	case string:
		if top := j.top(); top != nil && top.object && top.expectKey {
			return j.objectKey(top, t)
		}
		key, member := j.memberKey()
		j.separator()
		if err := j.writeString(j.rw.value(key, member, t)); err != nil {
			return err
		}
	case json.Number:
		j.separator()
		j.out.WriteString(t.String())
	case bool:
		j.separator()
		j.out.WriteString(fmt.Sprint(t))
	case nil:
		j.separator()
		j.out.WriteString("null")
	default:
		return fmt.Errorf("unexpected token %T", tok)
	}
	j.valueDone()
	return nil
}

func (j *jsonRewrite) delim(d json.Delim) error {
	switch d {
	case '{', '[':
		j.separator()
		j.out.WriteByte(byte(d))
		j.stack = append(j.stack, frame{object: d == '{', expectKey: d == '{'})
		return nil
	case '}', ']':
		j.stack = j.stack[:len(j.stack)-1] // json.Decoder guarantees delimiters are balanced
		j.out.WriteByte(byte(d))
		j.valueDone()
		return nil
	}
	return fmt.Errorf("unexpected delimiter %q", d)
}

func (j *jsonRewrite) objectKey(top *frame, k string) error {
	if top.n > 0 {
		j.out.WriteByte(',')
	}
	if err := j.writeString(j.rw.key(k)); err != nil {
		return err
	}
	j.out.WriteByte(':')
	top.key, top.expectKey = k, false
	return nil
}

// separator writes the comma before an array element; member values follow the colon written with
// their key.
func (j *jsonRewrite) separator() {
	if top := j.top(); top != nil && !top.object && top.n > 0 {
		j.out.WriteByte(',')
	}
}

// valueDone accounts for a complete value in the enclosing container.
func (j *jsonRewrite) valueDone() {
	if top := j.top(); top != nil {
		top.n++
		top.expectKey = top.object
	}
}

func (j *jsonRewrite) memberKey() (string, bool) {
	if top := j.top(); top != nil && top.object {
		return top.key, true
	}
	return "", false
}

func (j *jsonRewrite) top() *frame {
	if len(j.stack) == 0 {
		return nil
	}
	return &j.stack[len(j.stack)-1]
}

// writeString appends s as a JSON string. Encoder.Encode always ends with a newline, dropped here.
func (j *jsonRewrite) writeString(s string) error {
	if err := j.enc.Encode(s); err != nil {
		return err
	}
	j.out.Truncate(j.out.Len() - 1)
	return nil
}

// cleanDocument is the fast path for the common case, a document with no secret in it: when no pattern
// matches anywhere in its raw bytes, nor in their unescaped views, no string in it can match either,
// and the document only needs compacting. It declines (ok false) whenever the raw bytes could hide a
// secret from the patterns — \u escapes other than Go's HTML escapes of <, > and &, which no secret
// shape contains, or other escapes (\/, \") behind which a pattern matches — or the document is not
// valid UTF-8 and JSON, leaving those to the full rewrite.
func (r *Redactor) cleanDocument(doc []byte) ([]byte, bool) {
	if !utf8.Valid(doc) || hasOpaqueEscape(doc) {
		return nil, false
	}
	all := r.all()
	if r.anyMatch(all, doc) {
		return nil, false
	}
	if bytes.IndexByte(doc, '\\') >= 0 {
		// One level more than for a string: the document's own escapes come first.
		for _, view := range escapedViews(string(doc), maxEscapeDepth+1) {
			if r.anyMatch(all, []byte(view)) {
				return nil, false
			}
		}
	}
	var out bytes.Buffer
	out.Grow(len(doc))
	if err := json.Compact(&out, doc); err != nil {
		return nil, false
	}
	return out.Bytes(), true
}

// anyMatch reports whether one of patterns matches b.
func (r *Redactor) anyMatch(patterns []compiledPattern, b []byte) bool {
	lower := bytes.ToLower(b)
	for _, p := range patterns {
		if p.mayMatch(lower) && p.re.Match(b) {
			return true
		}
	}
	return false
}

// hasOpaqueEscape reports whether doc holds a \u escape that could spell a character of a secret.
func hasOpaqueEscape(doc []byte) bool {
	for rest := doc; ; {
		i := bytes.Index(rest, []byte(`\u`))
		if i < 0 {
			return false
		}
		rest = rest[i+2:]
		if len(rest) < 4 {
			return true
		}
		switch strings.ToLower(string(rest[:4])) {
		case "003c", "003e", "0026":
			continue
		}
		return true
	}
}

// checkText finds the first string in a well-formed JSON document that is not valid Unicode text.
func checkText(doc []byte) error {
	inString := false
	for i := 0; i < len(doc); {
		c := doc[i]
		switch {
		case !inString:
			inString = c == '"'
			i++
		case c == '"':
			inString = false
			i++
		case c == '\\' && doc[i+1] == 'u': // well-formed, so four hex digits follow
			r := hex4(doc[i+2:])
			switch {
			case r < 0xD800 || r > 0xDFFF:
				i += 6
			case r < 0xDC00 && i+12 <= len(doc) && doc[i+6] == '\\' && doc[i+7] == 'u' &&
				0xDC00 <= hex4(doc[i+8:]) && hex4(doc[i+8:]) <= 0xDFFF:
				i += 12
			default:
				return &TextError{Offset: int64(i), Reason: reasonSurrogate}
			}
		case c == '\\':
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(doc[i:])
			if r == utf8.RuneError && size == 1 {
				return &TextError{Offset: int64(i), Reason: reasonBadUTF8}
			}
			i += size
		}
	}
	return nil
}

// hex4 decodes the four hex digits at the start of b, or returns -1 if they are not hex digits.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(d)
	}
	return r
}
