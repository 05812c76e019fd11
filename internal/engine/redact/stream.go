package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ErrStreamExposed reports a stream in which a secret the redactor knows would survive redaction, in
// whole or in recognisable pieces: typically a secret that straddles two lanes (a content block's start
// and its deltas, two content blocks) which no rewrite of one lane can remove. Stream then returns no
// chunks at all, so the caller cannot store them by mistake.
var ErrStreamExposed = errors.New("redact: a secret in the stream cannot be redacted chunk by chunk")

// maxStreamDepth bounds the nesting of a chunk, as encoding/json bounds it.
const maxStreamDepth = 10000

// Stream redacts the chunks of one streamed response, each a JSON document, so that redaction holds
// whatever the chunk boundaries. It returns them compacted, in order; a chunk that is not one JSON
// document is a *JSONError.
//
// The stream is read as lanes of text. Every string value belongs to the lane named by its JSON path,
// in which an object with a scalar "index" member is named by that index rather than by its array
// position (Anthropic's content_block_delta, OpenAI's choices[] and tool_calls[]). A lane's pieces,
// concatenated in chunk order, are what a consumer assembles, so the concatenation is redacted as one
// string, as JSON redacts a member value, and each match is cut from the pieces it spans with its
// token written into the piece where it starts. The lane then assembles to the redacted text, and
// restoring that one token gives back the original stream. Object keys are redacted on their own.
//
// It fails closed: ErrStreamExposed, and no chunks, when a secret the redactor knows (all it has
// redacted so far, the learned literals, this stream's) could still be read from the result — whole,
// in a chunk's bytes, a lane, or the strings of a lane that is a JSON document (a tool call's
// partial JSON, where an escape can hide it); by a piece of pieceLen bytes; or split across lanes,
// one lane ending with its head and another starting with its tail. A failed stream redacts nothing
// and counts nothing.
//
// A lane whose JSON escapes spell a secret (a tool call's partial JSON, finished or cut off) is found
// as JSON finds it, and is ErrStreamExposed: one token in place of the lane would not assemble to
// JSON. A chunk holding invalid UTF-8 or an unpaired surrogate escape is a *TextError, never repaired.
func (r *Redactor) Stream(chunks [][]byte) ([][]byte, error) {
	parsed, err := parseChunks(chunks)
	if err != nil {
		return nil, err
	}
	lanes := collectLanes(parsed)
	out, found, err := r.rewriteChunks(chunks, parsed, lanes)
	if err != nil {
		return nil, err
	}
	if r.exposed(out, lanes, found) {
		return nil, ErrStreamExposed
	}
	r.record(found)
	return out, nil
}

// parseChunks parses each chunk as one JSON document.
func parseChunks(chunks [][]byte) ([]*jnode, error) {
	parsed := make([]*jnode, len(chunks))
	for i, c := range chunks {
		n, err := parseChunk(c)
		if err != nil {
			return nil, fmt.Errorf("chunk %d: %w", i, err)
		}
		parsed[i] = n
	}
	return parsed, nil
}

// rewriteChunks redacts the lanes of the parsed chunks and their object keys, and re-emits the chunks
// compacted. It records nothing: found is for the caller to check and record.
func (r *Redactor) rewriteChunks(chunks [][]byte, parsed []*jnode, lanes []*lane) ([][]byte, []finding, error) {
	found, err := r.rewriteStrings(parsed, lanes)
	if err != nil {
		return nil, nil, err
	}
	out, err := emitChunks(chunks, parsed)
	return out, found, err
}

// rewriteStrings redacts the lanes and the object keys of the parsed chunks, setting each string's out.
func (r *Redactor) rewriteStrings(parsed []*jnode, lanes []*lane) ([]finding, error) {
	var found []finding
	for _, ln := range lanes {
		if err := r.rewriteLane(ln, &found); err != nil {
			return nil, err
		}
	}
	for _, n := range parsed {
		n.walkKeys(func(k *jnode) {
			k.out = k.str
			if r.mayRedact(k.str) {
				k.out = r.redactText("", k.str, &found)
			}
		})
	}
	return found, nil
}

// emitChunks re-emits the parsed chunks with their strings' out.
func emitChunks(chunks [][]byte, parsed []*jnode) ([][]byte, error) {
	out := make([][]byte, len(parsed))
	for i, n := range parsed {
		doc, err := n.emit(chunks[i])
		if err != nil {
			return nil, fmt.Errorf("chunk %d: %w", i, err)
		}
		out[i] = doc
	}
	return out, nil
}

// lane is the text one JSON path carries across a stream: its pieces in chunk order.
type lane struct {
	path   string
	key    string // the member name of the leaves, for key-anchored patterns
	member bool   // the leaves are object members (not array elements)
	pieces []*jnode
	// reps are the secrets rewriteLane replaced, in the lane's original text.
	reps []replacement
}

func (l *lane) original() string {
	var b strings.Builder
	for _, p := range l.pieces {
		b.WriteString(p.str)
	}
	return b.String()
}

func (l *lane) rewritten() string {
	var b strings.Builder
	for _, p := range l.pieces {
		b.WriteString(p.out)
	}
	return b.String()
}

// rewriteLane redacts the lane's concatenation as JSON redacts a member value (with its key as
// context, then alone) and cuts each match out of the pieces it spans, its token written where the
// match starts. A lane from which a secret can only be read through JSON escapes (a tool call's partial
// JSON, finished or cut off) is ErrStreamExposed.
func (r *Redactor) rewriteLane(ln *lane, found *[]finding) error {
	for _, p := range ln.pieces {
		p.out = p.str
	}
	text := ln.original()
	prefix := ""
	if ln.member {
		prefix = ln.key + "="
	}
	if !r.mayRedact(prefix + text) {
		return nil
	}
	local := (*found)[:len(*found):len(*found)]
	red := r.redactText(prefix, text, &local)
	if red == text {
		return nil
	}
	if last := local[len(local)-1]; last.whole && last.secret == text {
		// Replacing the lane by one token would leave a tool call's partial JSON that no longer parses.
		return fmt.Errorf("%w: lane %s: a secret is written with JSON escapes", ErrStreamExposed, ln.path)
	}
	reps, err := alignReplacements(text, red, local[len(*found):])
	if err != nil { // cannot happen while redaction only swaps secrets for tokens; fail closed if it does
		return fmt.Errorf("%w: lane %s: %v", ErrStreamExposed, ln.path, err)
	}
	off := 0
	for _, p := range ln.pieces {
		p.out = cutPiece(text, off, off+len(p.str), reps)
		off += len(p.str)
	}
	ln.reps = reps
	*found = local
	return nil
}

// mayRedact reports whether any pattern can match s, by the patterns' hints: most lanes of a stream
// hold no secret, and this spares them every regexp. A string with escapes may hide any secret.
func (r *Redactor) mayRedact(s string) bool {
	if strings.IndexByte(s, '\\') >= 0 {
		return true
	}
	lower := []byte(strings.ToLower(s))
	for _, p := range r.all() {
		if p.mayMatch(lower) {
			return true
		}
	}
	return false
}

// replacement is a secret at [start,end) of a lane's original text, replaced by token.
type replacement struct {
	start, end int
	token      string
}

// alignReplacements recovers where the redacted text red replaced secrets of orig. red is orig with
// disjoint spans replaced by tokens (redaction never rewrites over a token it minted), so walking the
// new tokens of red in order, with found naming the secret behind each, maps every replacement back
// to orig. A token orig already held is just text both share.
func alignReplacements(orig, red string, found []finding) ([]replacement, error) {
	secretOf := make(map[string]string, len(found))
	for _, f := range found {
		secretOf[f.token] = f.secret
	}
	var reps []replacement
	i, j := 0, 0
	for t := range newTokens(red, secretOf) {
		if t[0] < j {
			continue // inside a token orig already held
		}
		gap := t[0] - j
		if i+gap > len(orig) || orig[i:i+gap] != red[j:t[0]] {
			return nil, errors.New("redacted text does not align with the original")
		}
		i += gap
		token := red[t[0]:t[1]]
		switch secret := secretOf[token]; {
		case strings.HasPrefix(orig[i:], token): // a token the text already held
			i += len(token)
		case strings.HasPrefix(orig[i:], secret):
			reps = append(reps, replacement{start: i, end: i + len(secret), token: token})
			i += len(secret)
		default:
			return nil, errors.New("redacted text does not align with the original")
		}
		j = t[1]
	}
	if orig[i:] != red[j:] {
		return nil, errors.New("redacted text does not align with the original")
	}
	return reps, nil
}

// newTokens yields the spans of red holding a token of secretOf, in order.
func newTokens(red string, secretOf map[string]string) func(func([2]int) bool) {
	return func(yield func([2]int) bool) {
		stop := false
		tokenCandidates(red, func(start, end int) bool {
			if stop {
				return true
			}
			if _, ok := secretOf[red[start:end]]; !ok {
				return false
			}
			stop = !yield([2]int{start, end})
			return true
		})
	}
}

// cutPiece returns the piece text[start:end] with every replacement applied: bytes inside a
// replacement are cut, and its token is written into the piece holding its first byte.
func cutPiece(text string, start, end int, reps []replacement) string {
	var b strings.Builder
	pos := start
	for _, rp := range reps {
		if rp.end <= start || rp.start >= end {
			continue
		}
		if rp.start > pos {
			b.WriteString(text[pos:rp.start])
		}
		if rp.start >= start {
			b.WriteString(rp.token)
		}
		pos = min(rp.end, end)
	}
	if pos < end {
		b.WriteString(text[pos:end])
	}
	return b.String()
}

// exposed reports whether a secret the redactor knows can still be read from the rewritten chunks.
func (r *Redactor) exposed(chunks [][]byte, lanes []*lane, found []finding) bool {
	secrets := r.knownSecrets(found)
	if len(secrets) == 0 {
		return false
	}
	scan := newSecretScanner(secrets)
	for _, c := range chunks {
		if scan.hit(c) {
			return true
		}
	}
	for _, ln := range lanes {
		text := ln.rewritten()
		if scan.hit([]byte(text)) || scan.hitJSONStrings(text) {
			return true
		}
	}
	return straddles(lanes, secrets)
}

// knownSecrets is every secret redacted so far (all learned as literals) and found. A whole string
// replaced for the secret its escapes hid is not one: the secrets inside it are, and scanning for
// every piece of a long tool result would cost more than the stream.
func (r *Redactor) knownSecrets(found []finding) []string {
	set := map[string]bool{}
	if lits := r.literals.Load(); lits != nil {
		for _, p := range *lits {
			set[p.literal] = true
		}
	}
	for _, f := range found {
		if !f.whole {
			set[f.secret] = true
		}
	}
	delete(set, "")
	return slices.Collect(maps.Keys(set))
}

// straddles reports whether one lane of the original stream ends with the head of a secret and
// another starts with its tail: the secret a consumer assembling both lanes would hold, which no
// rewrite of either lane alone removes.
func straddles(lanes []*lane, secrets []string) bool {
	texts := make([]string, len(lanes))
	for i, ln := range lanes {
		texts[i] = ln.original()
	}
	for _, s := range secrets {
		for a, head := range texts {
			for p := 1; p < len(s); p++ {
				if !strings.HasSuffix(head, s[:p]) {
					continue
				}
				for b, tail := range texts {
					if a != b && strings.HasPrefix(tail, s[p:]) {
						return true
					}
				}
			}
		}
	}
	return false
}

// secretScanner finds known secrets, whole or by a recognisable piece, in stored bytes.
type secretScanner struct {
	whole   []string
	tokens  map[string]bool         // the tokens of the secrets
	windows map[int]map[string]bool // window length → the windows of that length of the secrets
}

// pieceLen is the length of a secret's pieces the scanner recognises: 16 bytes, or half of a secret
// shorter than 32. Any split of a secret in two leaves a piece that long; shorter secrets (under 12
// bytes) are only recognised whole, because a piece of them is too likely to occur by chance.
func pieceLen(secret string) int {
	if len(secret) < 12 {
		return 0
	}
	return min(16, len(secret)/2)
}

func newSecretScanner(secrets []string) *secretScanner {
	s := &secretScanner{whole: secrets, tokens: map[string]bool{}, windows: map[int]map[string]bool{}}
	for _, sec := range secrets {
		s.tokens[Token(sec)] = true
		m := pieceLen(sec)
		if m == 0 {
			continue
		}
		if s.windows[m] == nil {
			s.windows[m] = map[string]bool{}
		}
		for i := 0; i+m <= len(sec); i++ {
			s.windows[m][sec[i:i+m]] = true
		}
	}
	return s
}

// hit reports whether b holds a secret or a piece of one outside the tokens of the secrets (whose hex
// could spell a short secret by chance). Text that only looks like a token is scanned like any other.
func (s *secretScanner) hit(b []byte) bool {
	if bytes.Contains(b, []byte(TokenPrefix)) {
		b = blankTokens(b, s.tokens)
	}
	for _, sec := range s.whole {
		if bytes.Contains(b, []byte(sec)) {
			return true
		}
	}
	for m, set := range s.windows {
		for i := 0; i+m <= len(b); i++ {
			if set[string(b[i:i+m])] {
				return true
			}
		}
	}
	return false
}

// blankTokens returns b with every token of tokens overwritten by zero bytes.
func blankTokens(b []byte, tokens map[string]bool) []byte {
	out := bytes.Clone(b)
	tokenCandidates(string(b), func(start, end int) bool {
		if !tokens[string(b[start:end])] {
			return false
		}
		clear(out[start:end])
		return true
	})
	return out
}

// hitJSONStrings scans the strings of text when text is a JSON document, where an escape (\u0073k-…)
// may spell a secret the raw bytes do not show.
func (s *secretScanner) hitJSONStrings(text string) bool {
	t := strings.TrimSpace(text)
	if t == "" || (t[0] != '{' && t[0] != '[' && t[0] != '"') || !strings.Contains(t, `\`) {
		return false
	}
	n, err := parseChunk([]byte(t))
	if err != nil {
		return false
	}
	hit := false
	n.walk(func(leaf *jnode) {
		if !hit && s.hit([]byte(leaf.str)) {
			hit = true
		}
	})
	return hit
}

// jnode is a parsed JSON value that remembers where its strings were in the chunk, so the chunk can be
// re-emitted with only its strings rewritten.
type jnode struct {
	kind byte // '{', '[', '"', or 0 for a number, true, false or null
	// A string: its decoded value, its raw extent in the chunk, and its rewritten value.
	str        string
	start, end int
	out        string
	// An object: its keys (strings) and values; an array: its elements.
	keys []*jnode
	kids []*jnode
	// id is an object's scalar "index" member, which names it in a lane path; "" when it has none.
	id string
}

// index finds an object's id in doc.
func (n *jnode) index(doc []byte) string {
	if n.kind != '{' {
		return ""
	}
	for i, k := range n.keys {
		v := n.kids[i]
		if k.str != "index" {
			continue
		}
		switch v.kind {
		case '"':
			return strconv.Quote(v.str)
		case 0:
			return string(doc[v.start:v.end])
		}
	}
	return ""
}

// walk calls f on every string value, in document order.
func (n *jnode) walk(f func(*jnode)) {
	switch n.kind {
	case '"':
		f(n)
	case '{', '[':
		for _, k := range n.kids {
			k.walk(f)
		}
	}
}

// walkKeys calls f on every object key, in document order.
func (n *jnode) walkKeys(f func(*jnode)) {
	for _, k := range n.keys {
		f(k)
	}
	for _, k := range n.kids {
		k.walkKeys(f)
	}
}

// collectLanes groups the string values of the chunks into lanes, in order of first appearance.
func collectLanes(chunks []*jnode) []*lane {
	byPath := map[string]*lane{}
	var lanes []*lane
	var visit func(n *jnode, path, key string, member bool)
	visit = func(n *jnode, path, key string, member bool) {
		switch n.kind {
		case '"':
			ln := byPath[path]
			if ln == nil {
				ln = &lane{path: path, key: key, member: member}
				byPath[path] = ln
				lanes = append(lanes, ln)
			}
			ln.pieces = append(ln.pieces, n)
		case '{':
			if n.id != "" {
				path += "<index=" + n.id + ">"
			}
			for i, k := range n.keys {
				visit(n.kids[i], path+"."+strconv.Itoa(len(k.str))+":"+k.str, k.str, true) // length-prefixed: unambiguous
			}
		case '[':
			for i, kid := range n.kids {
				elem := "[" + strconv.Itoa(i) + "]"
				if kid.id != "" {
					elem = "[]" // named by its index member instead
				}
				visit(kid, path+elem, "", false)
			}
		}
	}
	for _, c := range chunks {
		visit(c, "", "", false)
	}
	return lanes
}

// emit writes the chunk compacted, with each rewritten string re-encoded (without HTML escaping, as
// JSON writes documents) and everything else as it was. parseChunk refused invalid text, so the
// strings left as they were are exactly what was streamed.
func (n *jnode) emit(doc []byte) ([]byte, error) {
	var edits []*jnode
	var collect func(*jnode)
	edit := func(v *jnode) {
		if v.out != v.str {
			edits = append(edits, v)
		}
	}
	collect = func(v *jnode) {
		switch v.kind {
		case '"':
			edit(v)
		case '{', '[':
			for i, k := range v.kids {
				if v.kind == '{' {
					edit(v.keys[i])
				}
				collect(k)
			}
		}
	}
	collect(n)
	var raw bytes.Buffer
	raw.Grow(len(doc))
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	pos := 0
	for _, e := range edits {
		raw.Write(doc[pos:e.start])
		if err := enc.Encode(e.out); err != nil {
			return nil, err
		}
		raw.Truncate(raw.Len() - 1) // Encode's newline
		pos = e.end
	}
	raw.Write(doc[pos:])
	var out bytes.Buffer
	out.Grow(raw.Len())
	if err := json.Compact(&out, raw.Bytes()); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// parseChunk parses one JSON document, remembering where each string is.
func parseChunk(doc []byte) (*jnode, error) {
	p := &chunkParser{doc: doc, dec: json.NewDecoder(bytes.NewReader(doc))}
	p.dec.UseNumber()
	tok, start, err := p.next()
	if err != nil {
		return nil, p.fail(err)
	}
	n, err := p.value(tok, start, 0)
	if err != nil {
		return nil, err
	}
	// A document is exactly one value (checked by hand: asking the decoder for a next token at the
	// end costs more than the rest of a small chunk's parse).
	if end := int(p.dec.InputOffset()); len(bytes.TrimLeft(doc[end:], " \t\r\n")) > 0 {
		return nil, &JSONError{Offset: int64(end), Err: errors.New("unexpected data after the top-level value")}
	}
	// json.Decoder repaired invalid text into U+FFFD; refuse it as JSON does.
	if err := checkText(doc); err != nil {
		return nil, err
	}
	return n, nil
}

type chunkParser struct {
	doc []byte
	dec *json.Decoder
}

// next reads a token and where it starts: past the whitespace, comma or colon before it.
func (p *chunkParser) next() (json.Token, int, error) {
	start := int(p.dec.InputOffset())
	tok, err := p.dec.Token()
	if err != nil {
		return nil, 0, err
	}
	for start < len(p.doc) && strings.IndexByte(" \t\r\n,:", p.doc[start]) >= 0 {
		start++
	}
	return tok, start, nil
}

func (p *chunkParser) fail(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return &JSONError{Offset: se.Offset, Err: err}
	}
	return &JSONError{Offset: p.dec.InputOffset(), Err: err}
}

func (p *chunkParser) value(tok json.Token, start, depth int) (*jnode, error) {
	if depth > maxStreamDepth {
		return nil, &JSONError{Offset: int64(start), Err: errors.New("nesting too deep")}
	}
	end := int(p.dec.InputOffset())
	switch t := tok.(type) {
	case string:
		return &jnode{kind: '"', str: t, start: start, end: end}, nil
	case json.Delim:
		if t != '{' && t != '[' {
			return nil, &JSONError{Offset: int64(start), Err: fmt.Errorf("unexpected delimiter %q", t)}
		}
		n := &jnode{kind: byte(t)}
		for p.dec.More() {
			if t == '{' {
				ktok, kstart, err := p.next()
				if err != nil {
					return nil, p.fail(err)
				}
				k, ok := ktok.(string)
				if !ok {
					return nil, &JSONError{Offset: int64(kstart), Err: errors.New("object key is not a string")}
				}
				n.keys = append(n.keys, &jnode{kind: '"', str: k, start: kstart, end: int(p.dec.InputOffset())})
			}
			vtok, vstart, err := p.next()
			if err != nil {
				return nil, p.fail(err)
			}
			kid, err := p.value(vtok, vstart, depth+1)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, kid)
		}
		if _, _, err := p.next(); err != nil { // the closing delimiter
			return nil, p.fail(err)
		}
		n.id = n.index(p.doc)
		return n, nil
	default: // json.Number, bool, nil
		return &jnode{start: start, end: end}, nil
	}
}
