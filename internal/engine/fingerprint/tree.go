package fingerprint

import (
	"cmp"
	"slices"
)

// kind is the JSON type of a node.
type kind uint8

const (
	kindNull kind = iota
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindArray
	kindObject
)

// node is one parsed value, already in canonical terms: strings are NFC-normalized and valid UTF-8,
// numbers carry their canonical text (or, from a Go float or small integer, a double that is formatted
// when written), and object members are sorted. Both decoded documents and Go values become nodes,
// so masking, redaction and serialization are written once.
type node struct {
	kind kind
	num  float64  // kindNumber when text is empty: a double, written in its shortest round-trip form
	text string   // kindString; kindNumber: the canonical text of an exact decimal
	kids []member // kindArray (key unused) and kindObject (sorted by key)
}

// member is an object member or, with an empty key, an array element.
type member struct {
	key string
	val node
}

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units, as RFC 8785 and JavaScript's
// default sort do, without transcoding them.
//
// Byte order of UTF-8 is code point order, and that agrees with UTF-16 order except between
// U+E000–U+FFFF and the supplementary planes: UTF-16 encodes the latter as surrogates 0xD800–0xDFFF,
// which sort before 0xE000. Those two groups are exactly the lead bytes 0xEE–0xEF and 0xF0–0xF4, and a
// byte that high can only be a lead byte, found at the same rune boundary in both strings because the
// bytes before it are equal.
func compareUTF16[T ~string | ~[]byte](a, b T) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x >= 0xEE && y >= 0xEE && (x >= 0xF0) != (y >= 0xF0) {
			if x >= 0xF0 {
				return -1 // a is supplementary: a surrogate, below U+E000
			}
			return 1
		}
		return cmp.Compare(x, y)
	}
	return cmp.Compare(len(a), len(b))
}

func compareMembers(a, b member) int { return compareUTF16(a.key, b.key) }

// sortMembers sorts an object's members into canonical order and reports the first duplicate key, if any.
// Duplicates are adjacent once sorted, so detecting them costs one extra comparison per member.
func sortMembers(ms []member) (dup string, ok bool) {
	slices.SortFunc(ms, compareMembers)
	for i := 1; i < len(ms); i++ {
		if ms[i].key == ms[i-1].key {
			return ms[i].key, false
		}
	}
	return "", true
}

// lookup finds the member named key in a sorted object.
func lookup(ms []member, key string) (*member, bool) {
	i, found := slices.BinarySearchFunc(ms, key, func(m member, k string) int { return compareUTF16(m.key, k) })
	if !found {
		return nil, false
	}
	return &ms[i], true
}
