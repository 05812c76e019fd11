package fingerprint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Mode selects how much of a request takes part in its fingerprint.
type Mode string

const (
	Strict     Mode = "strict"     // every field counts
	Structural Mode = "structural" // leaf values at Options.VolatilePaths are replaced by "\u0000" before hashing
)

// Options shape a fingerprint. The zero value is a Strict fingerprint of the whole value.
type Options struct {
	Mode Mode // "" means Strict

	// VolatilePaths are dot-separated object paths (e.g. "params.metadata.user_id", "params.temperature")
	// whose leaf values (not keys) Structural mode replaces with the string "\u0000"; a path naming an
	// object or array replaces every leaf below it. Array elements along a path are all visited (a path
	// segment applies to each element when the current value is an array). Paths that do not exist are
	// ignored. Keys are matched after NFC normalization; a key containing '.' cannot be named. Strict
	// mode ignores them.
	VolatilePaths []string

	// Redact, when set, is applied to every string leaf (not object keys) before canonicalization, so
	// differing secret values that redact to the same token hash equal. It receives NFC-normalized text
	// and its result is normalized again; it must return valid UTF-8. In Structural mode it also sees the
	// "\u0000" placeholders, which it should leave alone.
	Redact func(string) string
}

// CanonicalizeJSON returns the canonical JSON bytes of a JSON document.
func CanonicalizeJSON(doc []byte) ([]byte, error) {
	return canonicalJSON(doc, nil)
}

// canonicalJSON is CanonicalizeJSON for a document found at `at` inside a Go value. The one-pass
// writer handles the common case; the tree parser handles the rest and reports every error.
func canonicalJSON(doc []byte, at path) ([]byte, error) {
	if out, how := canonicalBytes(doc); how == fastDone {
		return out, nil
	}
	return treeCanonicalJSON(doc, at)
}

// treeCanonicalJSON is canonicalJSON through the tree parser, which reports every error.
func treeCanonicalJSON(doc []byte, at path) ([]byte, error) {
	n, err := parseDocument(string(doc), at)
	if err != nil {
		return nil, err
	}
	return appendValue(make([]byte, 0, len(doc)), &n), nil
}

// Canonicalize returns the canonical JSON bytes of a Go value: nil, bool, string, float64/float32, all int
// and uint kinds, json.Number, json.RawMessage, map[string]any, []any, maps with string keys and slices of
// any of these, and any other value by round-tripping it through encoding/json first (structs).
func Canonicalize(v any) ([]byte, error) {
	var b builder
	n, err := b.build(v)
	if err != nil {
		return nil, err
	}
	return appendValue(make([]byte, 0, 512), &n), nil
}

// Sum returns the lowercase hex SHA-256 of b (64 chars).
func Sum(b []byte) string {
	h := sha256.Sum256(b)
	var text [2 * sha256.Size]byte
	hex.Encode(text[:], h[:])
	return string(text[:]) // one allocation, where hex.EncodeToString makes two
}

// Of fingerprints a value (a Go value or json.RawMessage) under opts: structural masking, then redaction,
// then canonicalization, then SHA-256 hex.
func Of(v any, opts Options) (string, error) {
	if err := opts.check(); err != nil {
		return "", err
	}
	var b builder
	if opts.plain() {
		// A document, or a value encoding/json writes as a whole (a struct), is canonicalized from its
		// JSON text in one pass instead of through a tree.
		if doc, ok, err := b.topLevelJSON(v); ok {
			if err != nil {
				return "", err
			}
			return sumCanonical(doc)
		}
	}
	n, err := b.build(v)
	if err != nil {
		return "", err
	}
	return finish(&n, opts, 512)
}

// Canonical returns the bytes Of hashes: Of(v, opts) is Sum of them. A caller that hashes a value in
// parts (the messages of a growing conversation, say, each hashed once) writes these.
func Canonical(v any, opts Options) ([]byte, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	var b builder
	if opts.plain() {
		if doc, ok, err := b.topLevelJSON(v); ok {
			if err != nil {
				return nil, err
			}
			return canonicalJSON(doc, nil)
		}
	}
	n, err := b.build(v)
	if err != nil {
		return nil, err
	}
	return canonicalTree(&n, opts, 512)
}

// OfJSON is Of for a JSON document.
func OfJSON(doc []byte, opts Options) (string, error) {
	if err := opts.check(); err != nil {
		return "", err
	}
	if opts.plain() {
		return sumCanonical(doc)
	}
	n, err := parseDocument(string(doc), nil)
	if err != nil {
		return "", err
	}
	return finish(&n, opts, len(doc))
}

// plain reports whether the options leave the canonical form as it is: no masking, no redaction.
func (o Options) plain() bool {
	return o.Redact == nil && (o.Mode != Structural || len(o.VolatilePaths) == 0)
}

// sumCanonical is the fingerprint of a top-level document under plain options.
func sumCanonical(doc []byte) (string, error) {
	if sum, how := canonicalSum(doc); how == fastDone {
		return sum, nil
	}
	out, err := treeCanonicalJSON(doc, nil)
	if err != nil {
		return "", err
	}
	return Sum(out), nil
}

// check rejects an unknown mode: silently treating a typo as Strict would make every replay drift.
func (o Options) check() error {
	switch o.Mode {
	case "", Strict, Structural:
		return nil
	}
	return fmt.Errorf("fingerprint: unknown mode %q (want %q or %q)", o.Mode, Strict, Structural)
}

// finish applies the options to a parsed tree and hashes its canonical form. sizeHint presizes the
// output buffer, which is about as long as the input.
func finish(n *node, opts Options, sizeHint int) (string, error) {
	out, err := canonicalTree(n, opts, sizeHint)
	if err != nil {
		return "", err
	}
	return Sum(out), nil
}

// canonicalTree applies the options to a parsed tree and writes its canonical form.
func canonicalTree(n *node, opts Options, sizeHint int) ([]byte, error) {
	if opts.Mode == Structural {
		for _, p := range opts.VolatilePaths {
			mask(n, splitPath(p))
		}
	}
	if opts.Redact != nil {
		r := redactor{fn: opts.Redact}
		if err := r.walk(n); err != nil {
			return nil, err
		}
	}
	return appendValue(make([]byte, 0, sizeHint), n), nil
}

// splitPath splits a volatile path into NFC-normalized keys, the form keys have in the tree.
func splitPath(p string) []string {
	segs := strings.Split(p, ".")
	for i, s := range segs {
		segs[i] = norm.NFC.String(s)
	}
	return segs
}

// maskedLeaf replaces volatile leaves. A NUL string is vanishingly rare in real requests, and being a
// string it keeps arrays and objects the same shape whatever type the volatile value had.
const maskedLeaf = "\u0000"

// mask replaces the leaves at segs below n. An array applies the same remaining path to each element.
func mask(n *node, segs []string) {
	switch {
	case len(segs) == 0:
		maskAll(n)
	case n.kind == kindArray:
		for i := range n.kids {
			mask(&n.kids[i].val, segs)
		}
	case n.kind == kindObject:
		if m, ok := lookup(n.kids, segs[0]); ok {
			mask(&m.val, segs[1:])
		}
	}
}

// maskAll replaces every leaf at or below n, keeping keys and array lengths.
func maskAll(n *node) {
	if n.kind != kindArray && n.kind != kindObject {
		*n = node{kind: kindString, text: maskedLeaf}
		return
	}
	for i := range n.kids {
		maskAll(&n.kids[i].val)
	}
}

// redactor applies Options.Redact to every string leaf, tracking the path for errors.
type redactor struct {
	fn   func(string) string
	path path
}

func (r *redactor) walk(n *node) error {
	switch n.kind {
	case kindString:
		out := r.fn(n.text)
		if out == n.text {
			return nil
		}
		if !utf8.ValidString(out) {
			return &InvalidUTF8Error{Path: r.path.String(), what: badRedaction}
		}
		text, ok := nfc(out)
		if !ok {
			return &CombiningRunError{Path: r.path.String()}
		}
		n.text = text
	case kindArray, kindObject:
		for i := range n.kids {
			seg := indexSegment(i)
			if n.kind == kindObject {
				seg = keySegment(n.kids[i].key)
			}
			r.path = append(r.path, seg)
			err := r.walk(&n.kids[i].val)
			r.path = r.path[:len(r.path)-1]
			if err != nil {
				return err
			}
		}
	}
	return nil
}
