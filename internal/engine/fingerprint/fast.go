package fingerprint

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// canon writes the canonical form of a JSON document without building a tree. One pass over the
// document writes every token in canonical form, in document order, into out; a token that is canonical
// as it stands (most of them) is not written but left in a run of src that is copied when something
// else must be written in its place (see flush), or never if nothing must. An object whose keys arrive
// out of order only records its members' spans, sorted. If there is any such object, a second pass
// copies the output once more, each of those objects' members in order (see emit), so a byte is copied
// at most twice however deep it lies.
//
// It is the fast path of CanonicalizeJSON, OfJSON and Of (for what Of marshals whole, as structs), and
// it only handles the common case: anything
// unusual (an error of any kind, a string NFC would change, a lone surrogate escape) makes it give up,
// and the caller runs the tree parser, which produces the same bytes or the typed error. Strings that
// need work beyond escaping go through the tree parser's own decoder, so both agree by construction.
type canon struct {
	src   []byte
	pos   int
	out   []byte
	run   int // src[run:pos] is output too, not yet copied into out: text that is canonical as it stands
	depth int
	safe  *safeRunes

	members []span   // the members of the objects being read, innermost last
	objects []object // every object opened so far, in document order
	sorted  []span   // the members of the unsorted objects, in canonical order
	keys    []byte   // the decoded text of keys that are not their own text in src

	str string // src as a string for the tree parser's decoders; made on first need

	unsorted bool // some object's keys arrived out of order
}

// object is where an object lies in out and, for one whose keys arrive out of order, where its members
// lie in canon.sorted. next is the index of the first object after it (its own objects come between).
type object struct {
	start, end       int32
	members, nMember int32 // nMember is 0 for an object already in order
	next             int32
}

// fastOutcome says how the fast path dealt with a document.
type fastOutcome uint8

const (
	fastDone     fastOutcome = iota // the output is the canonical form
	fastDeclined                    // not a document it handles: an error, or needs the tree's care
	fastTooLong                     // longer than maxFastLen
)

// span is one member of an object being read: where its decoded, NFC key is (in src, or in keys when
// negative: -1-offset), where "key":value lies in out and the index of the first object inside it. It
// holds no pointers, so sorting spans costs the garbage collector nothing.
type span struct {
	prefix      uint64 // the key's first 8 bytes, big-endian and zero-padded, when they are ASCII; else 0
	key, keyLen int32
	start, end  int32
	object      int32
}

// maxFastLen bounds the documents the fast path takes, so that offsets fit a span.
const maxFastLen = 1 << 30

// keyOf is the decoded key of m.
func (c *canon) keyOf(m span) []byte {
	if m.key < 0 {
		off := -1 - m.key
		return c.keys[off : off+m.keyLen]
	}
	return c.src[m.key : m.key+m.keyLen]
}

// compareKeys orders members by key, as compareUTF16 does. ASCII agrees with UTF-16 order byte for byte,
// so two different ASCII prefixes decide at once; equal ones (or a zero, for a key that is not ASCII)
// leave it to the whole keys.
func (c *canon) compareKeys(a, b *span) int {
	if a.prefix != b.prefix && a.prefix != 0 && b.prefix != 0 {
		if a.prefix < b.prefix {
			return -1
		}
		return 1
	}
	return compareUTF16(c.keyOf(*a), c.keyOf(*b))
}

// shortKey reads a key of 1 to 15 plain ASCII bytes, which the 16 bytes after the quote at k-1 hold with
// its closing quote, into m. It reports false, having done nothing, for any other. Keys of fewer than
// 8 bytes and of more come mixed in every request, so both are read the same way, from two words,
// without a branch on which it is.
func (c *canon) shortKey(m *span, k int) bool {
	w := binary.LittleEndian.Uint64(c.src[k:])
	stops := bits.TrailingZeros64(stops8(w))
	if next := 64 + bits.TrailingZeros64(stops8(binary.LittleEndian.Uint64(c.src[k+8:]))); stops == 64 {
		stops = next
	}
	n := stops >> 3
	if n == 0 || n >= 16 || c.src[k+n] != '"' {
		return false
	}
	m.key, m.keyLen = int32(k), int32(n)
	m.prefix = bits.ReverseBytes64(w) &^ (1<<(64-8*min(n, 8)) - 1) // keyPrefix, from the word in hand
	c.pos = k + n + 1
	return true
}

// keyPrefix is span.prefix for key k.
func keyPrefix(k []byte) uint64 {
	if len(k) >= 8 { // one word, as shortKey reads it
		w := binary.LittleEndian.Uint64(k)
		if w&0x8080808080808080 != 0 {
			return 0
		}
		return bits.ReverseBytes64(w) // 0 only for eight NULs, as below
	}
	var p uint64
	for i := range 8 {
		p <<= 8
		if i < len(k) {
			if k[i] >= utf8.RuneSelf {
				return 0
			}
			p |= uint64(k[i])
		}
	}
	if p == 0 {
		return 0 // "" or NULs: let the whole keys decide
	}
	return p
}

// canonicalBytes returns the canonical form of doc in a new slice when the outcome is fastDone; for any
// other, parseDocument decides.
func canonicalBytes(doc []byte) ([]byte, fastOutcome) {
	s := scratchPool.Get().(*scratch)
	defer s.release()
	out, how := s.canonicalize(doc)
	if how != fastDone {
		return nil, how
	}
	return bytes.Clone(out), fastDone
}

// canonicalSum is Sum(canonicalBytes(doc)) without a copy of the canonical form.
func canonicalSum(doc []byte) (string, fastOutcome) {
	s := scratchPool.Get().(*scratch)
	defer s.release()
	out, how := s.canonicalize(doc)
	if how != fastDone {
		return "", how
	}
	return Sum(out), fastDone
}

// scratch is the memory the fast path works in: both passes' output and the member and object lists.
// It is pooled, because allocating (and zeroing) it for every request costs as much as the rest of the
// work; what it holds never outlives one call, so the pool changes no result.
type scratch struct {
	first, second []byte
	spans         []span
	objects       []object
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooled bounds the scratch kept for the next call, so one huge document does not pin its memory.
const maxPooled = 1 << 20

func (s *scratch) release() {
	if max(cap(s.first), cap(s.second), cap(s.spans)*32, cap(s.objects)*20) > maxPooled {
		return
	}
	scratchPool.Put(s)
}

// grow returns b emptied, with room for n elements.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, 0, n)
	}
	return b[:0]
}

// canonicalize returns the canonical form of doc, in memory of s or doc itself.
func (s *scratch) canonicalize(doc []byte) ([]byte, fastOutcome) {
	if len(doc) > maxFastLen {
		return nil, fastTooLong
	}
	// Requests have about one object per 150 bytes and one member of an unsorted object per 50; the
	// lists start at sizes they rarely outgrow.
	s.first = grow(s.first, len(doc)+64)
	s.spans = grow(s.spans, 64+32+len(doc)/48)
	s.objects = grow(s.objects, 16+len(doc)/128)
	c := canon{src: doc, out: s.first, members: s.spans[:0:64], sorted: s.spans[64:64], objects: s.objects,
		safe: nfcSafeRunes()}
	ok := c.value()
	if ok {
		c.skipSpace()
		ok = c.pos == len(c.src)
	}
	// Keep whatever grew for the next call.
	s.first, s.objects = c.out[:0], c.objects[:0]
	if cap(c.sorted) > cap(s.spans)-64 {
		s.spans = make([]span, 0, 64+cap(c.sorted))
	}
	if !ok {
		return nil, fastDeclined
	}
	if c.run == 0 && len(c.out) == 0 {
		c.out = c.src // nothing was rewritten: the document is its canonical form but for key order
	} else {
		c.flush(len(c.src))
		s.first = c.out[:0]
	}
	if !c.unsorted {
		return c.out, fastDone
	}
	s.second = grow(s.second, len(c.out))
	out, _ := c.emit(s.second, 0, len(c.out), 0)
	s.second = out[:0]
	return out, fastDone
}

// emit appends out[a:b] with the members of every unsorted object in it put in order. first is the
// index of the first object at or after a; emit returns the index of the first object after b.
func (c *canon) emit(dst []byte, a, b int, first int32) ([]byte, int32) {
	o := first
	for int(o) < len(c.objects) && int(c.objects[o].start) < b {
		obj := c.objects[o]
		if obj.nMember == 0 { // in order: copied as it is, but objects inside it may not be
			o++
			continue
		}
		dst = append(dst, c.out[a:obj.start+1]...) // up to its '{'
		// Each member is followed in out by the ',' or '}' after it, copied with it and then made the
		// separator its new place needs.
		for _, m := range c.sorted[obj.members : obj.members+obj.nMember] {
			if int(m.object) == len(c.objects) || c.objects[m.object].start >= m.end {
				dst = append(dst, c.out[m.start:m.end+1]...) // no object inside
			} else {
				dst, _ = c.emit(dst, int(m.start), int(m.end)+1, m.object)
			}
			dst[len(dst)-1] = ','
		}
		dst[len(dst)-1] = '}'
		a, o = int(obj.end), obj.next
	}
	return append(dst, c.out[a:b]...), o
}

// skipSpace skips whitespace, which is the only text between tokens that the output leaves out.
func (c *canon) skipSpace() {
	if c.pos < len(c.src) && isSpace[c.src[c.pos]] {
		c.flush(c.pos)
		for c.pos++; c.pos < len(c.src) && isSpace[c.src[c.pos]]; c.pos++ {
		}
		c.run = c.pos
	}
}

// flush copies the pending output, src[run:end], into out, before the caller writes text of its own in
// place of src[end:pos]; it then sets run past what it replaced. Tokens that are canonical as they
// stand (most of a document) are never copied one by one: they are copied in runs, or not at all when
// the whole document is canonical but for key order.
func (c *canon) flush(end int) {
	c.out = append(c.out, c.src[c.run:end]...)
}

// written is the length of the output so far, pending text included. It is exact between tokens.
func (c *canon) written() int32 {
	return int32(len(c.out) + c.pos - c.run)
}

var isSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

func (c *canon) value() bool {
	c.skipSpace()
	if c.pos >= len(c.src) {
		return false
	}
	switch b := c.src[c.pos]; {
	case b == '"':
		return c.string()
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '-' || isDigit(b):
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	}
	return false
}

func (c *canon) literal(lit string) bool {
	if !bytes.HasPrefix(c.src[c.pos:], []byte(lit)) {
		return false
	}
	c.pos += len(lit)
	return true
}

func (c *canon) array() bool {
	if c.depth++; c.depth > maxDepth {
		return false
	}
	c.pos++ // '['
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == ']' {
		c.pos++
		c.depth--
		return true
	}
	for {
		if !c.value() {
			return false
		}
		c.skipSpace()
		if c.pos >= len(c.src) {
			return false
		}
		switch c.src[c.pos] {
		case ',':
			c.pos++
			continue
		case ']':
			c.pos++
			c.depth--
			return true
		}
		return false
	}
}

func (c *canon) object() bool {
	if c.depth++; c.depth > maxDepth {
		return false
	}
	self := len(c.objects)
	c.objects = append(c.objects, object{start: c.written()})
	c.pos++ // '{'
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == '}' {
		c.pos++
		return c.closeObject(self, nil)
	}
	mark := len(c.members)
	for closed := false; !closed; {
		c.skipSpace()
		if c.pos >= len(c.src) || c.src[c.pos] != '"' {
			return false
		}
		m := span{start: c.written(), object: int32(len(c.objects))}
		if k := c.pos + 1; k+16 <= len(c.src) && c.shortKey(&m, k) {
			// most keys ("role", "type", "content") are a few plain ASCII bytes: read in one word
		} else {
			var ok bool
			if m.key, m.keyLen, ok = c.key(); !ok {
				return false
			}
			m.prefix = keyPrefix(c.keyOf(m))
		}
		c.skipSpace()
		if c.pos >= len(c.src) || c.src[c.pos] != ':' {
			return false
		}
		c.pos++ // ':'
		if !c.value() {
			return false
		}
		m.end = c.written()
		c.members = append(c.members, m)
		c.skipSpace()
		if c.pos >= len(c.src) {
			return false
		}
		switch c.src[c.pos] {
		case ',':
		case '}':
			closed = true
		default:
			return false
		}
		c.pos++
	}
	ok := c.closeObject(self, c.members[mark:])
	c.members = c.members[:mark]
	return ok
}

// closeObject finishes the object objects[self] with members ms, refusing duplicate keys. Members out of
// order are sorted and kept for emit.
func (c *canon) closeObject(self int, ms []span) bool {
	c.depth--
	obj := &c.objects[self]
	obj.end, obj.next = c.written(), int32(len(c.objects))
	var rank [maxRanked]uint8
	if inOrder, ok := rankByPrefix(ms, &rank); ok {
		if inOrder {
			return true
		}
		obj.members, obj.nMember = int32(len(c.sorted)), int32(len(ms))
		c.sorted = slices.Grow(c.sorted, len(ms))[:len(c.sorted)+len(ms)]
		sorted := c.sorted[obj.members:]
		for i, m := range ms {
			sorted[rank[i]] = m
		}
		c.unsorted = true
		return true
	}
	first := len(ms) // the first member out of order
	for i := 1; i < len(ms); i++ {
		switch c.compareKeys(&ms[i-1], &ms[i]) {
		case 0:
			return false // a duplicate key: the tree parser reports it
		case 1:
			first = min(first, i)
		}
	}
	if first == len(ms) {
		return true
	}
	obj.members, obj.nMember = int32(len(c.sorted)), int32(len(ms))
	c.sorted = append(c.sorted, ms...)
	c.unsorted = true
	return c.sortMembers(c.sorted[obj.members:], first)
}

// maxRanked is the most members rankByPrefix ranks: it compares every pair.
const maxRanked = 16

// rankByPrefix sets rank[i] to the place of ms[i] in canonical order and reports whether they are in
// order already, when their key prefixes decide it: at most maxRanked members whose prefixes are all
// distinct and not 0. Otherwise it reports ok false and the keys must be compared whole. Whether keys
// are in order and where each goes is data that no branch predictor learns, so the ranks are counted
// without branching on it: each member's rank is the number of prefixes below its own.
func rankByPrefix(ms []span, rank *[maxRanked]uint8) (inOrder, ok bool) {
	if len(ms) > maxRanked {
		return false, false
	}
	var misplaced, ties int
	for i := range ms {
		p := ms[i].prefix
		r, eq := 0, 0
		for j := range ms {
			q := ms[j].prefix
			r += b2i(q < p)
			eq += b2i(q == p)
		}
		ties += eq - 1 + b2i(p == 0)
		misplaced += b2i(r != i)
		rank[i] = uint8(r)
	}
	return misplaced == 0, ties == 0
}

// b2i is 1 for true and 0 for false, without a branch.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sortMembers sorts ms, whose first `from` members are in order, and reports false on a duplicate key.
// Objects are small, and insertion sort both sorts them fastest and meets every duplicate: inserting a
// key stops at the greatest key not above it, which is its duplicate if it has one.
func (c *canon) sortMembers(ms []span, from int) bool {
	if len(ms) > 16 {
		slices.SortFunc(ms, func(a, b span) int { return c.compareKeys(&a, &b) })
		for i := 1; i < len(ms); i++ {
			if c.compareKeys(&ms[i-1], &ms[i]) == 0 {
				return false
			}
		}
		return true
	}
	for i := from; i < len(ms); i++ {
		x := ms[i]
		j := i
		for ; j > 0; j-- {
			d := c.compareKeys(&ms[j-1], &x)
			if d == 0 {
				return false
			}
			if d < 0 {
				break
			}
			ms[j] = ms[j-1]
		}
		ms[j] = x
	}
	return true
}

// number copies an integer literal of up to 21 digits, which is its own canonical text, and rewrites any
// other number with appendDecimal, exactly as the tree parser does.
func (c *canon) number() bool {
	s := c.src
	start, i := c.pos, c.pos
	neg := s[i] == '-'
	if neg {
		i++
	}
	digits := i
	switch {
	case i >= len(s):
		return false
	case s[i] == '0':
		i++
	case isDigit(s[i]):
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return false
	}
	intEnd := i
	var frac, exp []byte
	expNeg := false
	if i < len(s) && s[i] == '.' {
		i++
		from := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == from {
			return false
		}
		frac = s[from:i]
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		from := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == from {
			return false
		}
		exp = s[from:i]
	}
	c.pos = i
	if i == intEnd && intEnd-digits <= 21 {
		if neg && intEnd-digits == 1 && s[digits] == '0' {
			c.flush(start)
			c.out = append(c.out, '0') // -0
			c.run = i
		}
		return true
	}
	c.flush(start)
	out, ok := appendDecimal(c.out, neg, s[digits:intEnd], frac, exp, expNeg)
	if !ok {
		return false
	}
	c.out, c.run = out, i
	return true
}

// stops8 marks (with its high bit) each byte of the little-endian word w that ends a run of plain ASCII
// string content: a control character, '"', '\\' or a byte of a multi-byte sequence. Bytes above the
// first mark may be marked wrongly (a borrow from the match), but the lowest mark is always exact, and
// it is the only one used.
func stops8(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := w ^ (ones * '"')
	bs := w ^ (ones * '\\')
	t := (w - ones*0x20) & ^w // some byte < 0x20
	t |= (q - ones) & ^q      // some byte == '"'
	t |= (bs - ones) & ^bs    // some byte == '\\'
	return (t | w) & highs    // w: some byte >= 0x80
}

// skipPlain advances i past plain ASCII string content, eight bytes at a time while it can.
func skipPlain(s []byte, i int) int {
	for i+8 <= len(s) {
		if m := stops8(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(s) && s[i] < 0x80 && !special[s[i]] {
		i++
	}
	return i
}

// string writes a string value. Escapes that are canonical already (\n, \", ...) and runes NFC leaves
// alone stay in the run copied from src at the end; \/ and \u escapes are translated on the way (they
// decode to ASCII or to such runes). A string it cannot vouch for is decoded again by the tree parser
// and written from the result.
func (c *canon) string() bool {
	s := c.src
	open := c.pos
	mark, markRun := len(c.out), c.run
	i := open + 1
	for {
		for i+8 <= len(s) { // skipPlain, inlined: most of a request is here
			if m := stops8(binary.LittleEndian.Uint64(s[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto stop
			}
			i += 8
		}
		for i < len(s) && s[i] < utf8.RuneSelf && !special[s[i]] {
			i++
		}
		if i >= len(s) {
			return c.slowString(open, mark, markRun)
		}
	stop:
		switch b := s[i]; {
		case b == '"':
			c.pos = i + 1
			return true
		case b == '\\':
			if i+1 < len(s) && canonicalEscape[s[i+1]] {
				i += 2
				continue
			}
			c.flush(i)
			next, ok := c.escape(i)
			if !ok {
				return c.slowString(open, mark, markRun)
			}
			i, c.run = next, next
		case b >= utf8.RuneSelf:
			for i < len(s) && s[i] >= utf8.RuneSelf {
				// decodeRune, with its common cases (two-byte runes: accented Latin, Greek, Cyrillic;
				// three-byte runes: CJK, punctuation) inlined
				var r rune
				size := 2
				switch b0 := s[i]; {
				case b0&0xE0 == 0xC0 && i+1 < len(s) && s[i+1]&0xC0 == 0x80:
					if r = rune(b0&0x1F)<<6 | rune(s[i+1]&0x3F); r < utf8.RuneSelf {
						r = utf8.RuneError // overlong: not safe
					}
				case b0&0xF0 == 0xE0 && i+2 < len(s) && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80:
					r, size = rune(b0&0x0F)<<12|rune(s[i+1]&0x3F)<<6|rune(s[i+2]&0x3F), 3
					if r < 0x800 || (0xD800 <= r && r <= 0xDFFF) {
						r = utf8.RuneError // overlong or a surrogate: not safe
					}
				default:
					r, size = decodeRune(s, i)
				}
				if !c.safe.has(r) { // also utf8.RuneError, whether invalid or written out
					return c.slowString(open, mark, markRun)
				}
				i += size
			}
		default: // a control character: not JSON
			return false
		}
	}
}

// canonicalEscape marks the escapes written as they are read: the short ones RFC 8785 also writes.
var canonicalEscape = [256]bool{'"': true, '\\': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// decodeRune decodes the multi-byte sequence at s[i], as utf8.DecodeRune does (utf8.RuneError, 1 for an
// invalid one) but with the two- and three-byte forms that make up most non-ASCII text inline.
func decodeRune(s []byte, i int) (rune, int) {
	b0 := s[i]
	switch {
	case 0xC2 <= b0 && b0 < 0xE0 && i+1 < len(s):
		if b1 := s[i+1]; b1&0xC0 == 0x80 {
			return rune(b0&0x1F)<<6 | rune(b1&0x3F), 2
		}
	case 0xE0 <= b0 && b0 < 0xF0 && i+2 < len(s):
		b1, b2 := s[i+1], s[i+2]
		if b1&0xC0 == 0x80 && b2&0xC0 == 0x80 {
			r := rune(b0&0x0F)<<12 | rune(b1&0x3F)<<6 | rune(b2&0x3F)
			if r >= 0x800 && (r < 0xD800 || r > 0xDFFF) {
				return r, 3
			}
		}
	}
	return utf8.DecodeRune(s[i:])
}

// escape writes the canonical form of the escape at i and returns the position after it. It declines
// (false) a malformed escape, a surrogate and a rune NFC might change.
func (c *canon) escape(i int) (int, bool) {
	s := c.src
	if i+1 >= len(s) {
		return i, false
	}
	switch e := s[i+1]; e {
	case '"', '\\', 'b', 'f', 'n', 'r', 't': // canonical escapes already
		c.out = append(c.out, '\\', e)
		return i + 2, true
	case '/':
		c.out = append(c.out, '/')
		return i + 2, true
	case 'u':
		if i+6 > len(s) {
			return i, false
		}
		var r rune
		for _, h := range s[i+2 : i+6] {
			d := hexValue[h]
			if d > 0xf {
				return i, false
			}
			r = r<<4 | rune(d)
		}
		switch {
		case r < utf8.RuneSelf:
			c.out = appendByte(c.out, byte(r))
		case 0xD800 <= r && r <= 0xDFFF, !c.safe.has(r):
			return i, false
		default:
			c.out = utf8.AppendRune(c.out, r)
		}
		return i + 6, true
	}
	return i, false
}

// appendByte writes one ASCII byte of string content in canonical form.
func appendByte(dst []byte, b byte) []byte {
	if !needsEscape[b] {
		return append(dst, b)
	}
	switch b {
	case '"', '\\':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
}

var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, d := range hexDigits {
		t[d] = byte(i)
	}
	for i, d := range "ABCDEF" {
		t[d] = byte(10 + i)
	}
	return t
}()

// slowString undoes what string wrote since out had length mark and run was markRun, and lets the tree
// parser decode the string at open: it validates, joins surrogates and normalizes exactly as the
// reference does.
func (c *canon) slowString(open, mark, markRun int) bool {
	text, ok := c.decode(open, false)
	if !ok {
		return false
	}
	c.out, c.run = c.out[:mark], markRun
	c.flush(open)
	c.out, c.run = appendString(c.out, text), c.pos
	return true
}

// decode runs the tree parser's string decoder on the string at open.
func (c *canon) decode(open int, isKey bool) (string, bool) {
	if c.str == "" {
		c.str = string(c.src)
	}
	p := parser{src: c.str, pos: open}
	text, err := p.str(isKey)
	if err != nil || p.first != nil {
		return "", false
	}
	c.pos = p.pos
	return text, true
}

// key writes an object key and returns its decoded text. A key without escapes whose runes NFC leaves
// alone is its own text; any other goes through the tree parser's decoder.
func (c *canon) key() (off, n int32, ok bool) {
	s := c.src
	open := c.pos
	i := open + 1
	for {
		i = skipPlain(s, i)
		if i >= len(s) {
			break
		}
		b := s[i]
		if b == '"' {
			c.pos = i + 1
			return int32(open + 1), int32(i - open - 1), true
		}
		if b < utf8.RuneSelf {
			break // an escape or a control character
		}
		r, size := decodeRune(s, i)
		if !c.safe.has(r) {
			break
		}
		i += size
	}
	text, ok := c.decode(open, true)
	if !ok {
		return 0, 0, false
	}
	c.flush(open)
	c.out, c.run = appendString(c.out, text), c.pos
	off = int32(len(c.keys))
	c.keys = append(c.keys, text...)
	return -1 - off, int32(len(text)), true
}

// safeRunes marks the runes below U+20000 that NFC leaves alone wherever they stand: starters that are
// their own normal form and never combine with what precedes them. A string made only of these and ASCII
// is in NFC (no decomposition, no reordering, no composition can apply), so it needs no normalizing.
type safeRunes [safeRunesLimit / 64]uint64

const safeRunesLimit = 0x20000

func (t *safeRunes) has(r rune) bool {
	return 0 <= r && r < safeRunesLimit && t[r>>6]&(1<<(r&63)) != 0
}

// nfcSafeRunes builds the table from golang.org/x/text's own data on first use, so it always agrees
// with the normalizer it stands in for.
var nfcSafeRunes = sync.OnceValue(func() *safeRunes {
	t := new(safeRunes)
	var buf [utf8.UTFMax]byte
	for r := rune(utf8.RuneSelf); r < safeRunesLimit; r++ {
		if !utf8.ValidRune(r) || r == utf8.RuneError {
			continue
		}
		b := utf8.AppendRune(buf[:0], r)
		p := norm.NFC.Properties(b)
		if p.CCC() == 0 && p.BoundaryBefore() && norm.NFC.IsNormal(b) {
			t[r>>6] |= 1 << (r & 63)
		}
	}
	return t
})
