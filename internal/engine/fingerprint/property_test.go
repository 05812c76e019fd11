package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/text/unicode/norm"
)

// The properties of this file are the promise replay relies on: two documents hash alike exactly when
// they differ only in a way doc.go lists as meaningless (key order, whitespace, the spelling of a
// number's value, string escapes, NFC versus NFD); any other difference, however small, changes the hash.

func TestIssue8ExamplesHashApart(t *testing.T) {
	tests := []struct{ a, b string }{
		{`{"user_id":1234567890123456789}`, `{"user_id":1234567890123456788}`},
		{`{"n":9007199254740993}`, `{"n":9007199254740992}`},
		{`{"n":1.0000000000000001}`, `{"n":1}`},
		{`{"n":1e-400}`, `{"n":0}`},
		{`{"n":1e400}`, `{"n":1e401}`},
		{`{"n":0.30000000000000001}`, `{"n":0.3}`},
		{`{"n":333333333.33333329}`, `{"n":333333333.3333333}`},
		{`{"n":1152921504606846976}`, `{"n":1152921504606847000}`}, // 2^60, and the shortest digits of its double
		{`{"n":-1e-400}`, `{"n":1e-400}`},
		{`{"n":12345678901234567890123456789}`, `{"n":12345678901234567890123456788}`},
		{`{"s":"x\ufffd"}`, `{"s":"x"}`},
	}
	for _, tt := range tests {
		a, b := mustOfJSON(t, tt.a, Options{}), mustOfJSON(t, tt.b, Options{})
		if a == b {
			t.Errorf("%s and %s hash alike", tt.a, tt.b)
		}
	}
}

func TestIssue8InvalidTextIsRefusedNotRepaired(t *testing.T) {
	mustOfJSON(t, `{"s":"x\ufffd"}`, Options{})
	for _, doc := range []string{"{\"s\":\"x\xff\"}", `{"s":"x\ud800"}`, "{\"s\":\"x\xed\xa0\x80\"}"} {
		var e *InvalidUTF8Error
		if _, err := OfJSON([]byte(doc), Options{}); !errors.As(err, &e) || e.Path != "$.s" {
			t.Errorf("OfJSON(%q) error = %v, want an InvalidUTF8Error at $.s", doc, err)
		}
	}
}

func TestNumberSpellingsOfOneValueHashAlike(t *testing.T) {
	groups := [][]string{
		{`1`, `1.0`, `1e0`, `10e-1`, `0.1e1`, `100E-2`, `1.000000000000000000000000000000`, `0.00001e+5`},
		{`0`, `-0`, `0.0`, `-0.0e7`, `0e-99999999999`},
		{`9007199254740993`, `9007199254740993.000`, `9.007199254740993e15`, `90071992547409930e-1`},
		{`1e-400`, `0.1e-399`, `10e-401`, `1.0E-400`},
		{`1e21`, `1000000000000000000000`, `1E+21`},
		{`123456789012345680000`, `1.2345678901234568e20`},
		{`-1.5e300`, `-15e299`, `-0.15E+301`},
	}
	var firsts []string
	for _, g := range groups {
		want := mustCanonicalJSON(t, g[0])
		for _, doc := range g[1:] {
			if got := mustCanonicalJSON(t, doc); got != want {
				t.Errorf("%s canonicalizes to %s, %s to %s", doc, got, g[0], want)
			}
		}
		firsts = append(firsts, want)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(firsts)))) != len(groups) {
		t.Errorf("groups collide: %v", firsts)
	}
}

// TestNumbersAreExactDecimals checks the number text against math/big: two literals print alike exactly
// when their values are equal, and the text has the literal's value.
func TestNumbersAreExactDecimals(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 1))
	rat := func(s string) *big.Rat {
		v, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("big.Rat cannot parse %q", s)
		}
		return v
	}
	type num struct {
		lit, text string
		val       *big.Rat
	}
	var nums []num
	for range 3000 {
		n := genNumber(r, 400)
		// Two spellings of each value, so equal values are common among the pairs.
		for _, lit := range []string{n.spell(r), n.spell(r)} {
			text := mustCanonicalJSON(t, lit)
			if v := rat(lit); v.Cmp(rat(text)) != 0 {
				t.Fatalf("%s canonicalizes to %s, another value", lit, text)
			}
			nums = append(nums, num{lit, text, rat(lit)})
		}
	}
	for i := range 20000 {
		a, b := nums[r.IntN(len(nums))], nums[r.IntN(len(nums))]
		if i%4 == 0 { // and the two spellings of one value
			k := r.IntN(len(nums)/2) * 2
			a, b = nums[k], nums[k+1]
		}
		if (a.text == b.text) != (a.val.Cmp(b.val) == 0) {
			t.Fatalf("%s → %s and %s → %s, but their values compare %d", a.lit, a.text, b.lit, b.text, a.val.Cmp(b.val))
		}
	}
}

// TestDoublesPrintAlikeFromGoValuesAndDocuments checks that a float64 in a Go value and its shortest
// digits in a document are one number, and that its text is the ECMAScript one.
func TestDoublesPrintAlikeFromGoValuesAndDocuments(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		want := string(appendNumber(nil, f))
		for _, lit := range []string{strconv.FormatFloat(f, 'g', -1, 64), strconv.FormatFloat(f, 'e', -1, 64), want} {
			if got := mustCanonicalJSON(t, lit); got != want {
				t.Fatalf("%s canonicalizes to %s, the double %v to %s", lit, got, f, want)
			}
		}
	}
}

func TestEquivalentSpellingsHashAlikeAndEveryEditChangesTheHash(t *testing.T) {
	r := rand.New(rand.NewPCG(2026, 8))
	edits := map[string]int{}
	for i := range 1500 {
		v := genValue(r, 0)
		base := v.write(nil, nil)
		want, err := OfJSON(base, Options{})
		if err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, base)
		}
		for range 3 {
			spelled := v.write(nil, r)
			if got, err := OfJSON(spelled, Options{}); err != nil || got != want {
				t.Fatalf("document %d spelled differently hashes differently (%v):\n%s\n%s\ncanonical diff (-base +spelled):\n%s",
					i, err, base, spelled, canonicalDiff(t, base, spelled))
			}
		}
		for range 3 {
			edited := v.clone()
			what, ok := edited.edit(r)
			if !ok {
				continue
			}
			doc := edited.write(nil, r)
			got, err := OfJSON(doc, Options{})
			if err != nil {
				t.Fatalf("document %d after %s: %v\n%s", i, what, err, doc)
			}
			if got == want {
				t.Fatalf("document %d: %s did not change the hash:\n%s\n%s", i, what, base, doc)
			}
			edits[what]++
		}
	}
	t.Logf("edits tried: %v", edits)
	for _, what := range []string{"number ±1 in the last digit", "number sign", "string rune", "string length",
		"key rune", "literal", "array element"} {
		if edits[what] < 50 {
			t.Errorf("only %d edits of kind %q were tried: %v", edits[what], what, edits)
		}
	}
}

func canonicalDiff(t *testing.T, a, b []byte) string {
	ca, errA := CanonicalizeJSON(a)
	cb, errB := CanonicalizeJSON(b)
	if errA != nil || errB != nil {
		return fmt.Sprint(errA, errB)
	}
	return cmp.Diff(string(ca), string(cb))
}

// gen is a generated JSON value, held in canonical terms (NFC text, numbers as coefficient and
// exponent) and written out in any of its equivalent spellings.
type gen struct {
	kind kind
	num  genNum   // kindNumber
	text string   // kindString: NFC
	keys []string // kindObject: NFC, unique
	kids []*gen   // kindArray, kindObject
}

// genNum is the number (-1)^neg × coef × 10^exp.
type genNum struct {
	neg  bool
	coef string // decimal digits, no leading zeros ("0" for zero)
	exp  int
}

func genValue(r *rand.Rand, depth int) *gen {
	k := r.IntN(10)
	if depth >= 3 {
		k = r.IntN(6)
	}
	switch {
	case k == 0:
		return &gen{kind: []kind{kindNull, kindTrue, kindFalse}[r.IntN(3)]}
	case k <= 3:
		return &gen{kind: kindNumber, num: genNumber(r, 9000)}
	case k <= 5:
		return &gen{kind: kindString, text: genString(r)}
	case k <= 7:
		g := &gen{kind: kindArray}
		for range r.IntN(5) {
			g.kids = append(g.kids, genValue(r, depth+1))
		}
		return g
	default:
		g := &gen{kind: kindObject}
		for range r.IntN(5) {
			if k := genString(r); !slices.Contains(g.keys, k) {
				g.keys = append(g.keys, k)
				g.kids = append(g.kids, genValue(r, depth+1))
			}
		}
		return g
	}
}

// genNumber returns a number of one of the shapes requests carry or that broke fingerprints before:
// small integers, ids beyond 2^53, decimals with more digits than a double holds, extreme exponents
// (up to ±maxExp) and the shortest digits of random doubles.
func genNumber(r *rand.Rand, maxExp int) genNum {
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		b[0] = byte('1' + r.IntN(9))
		return string(b)
	}
	n := genNum{neg: r.IntN(3) == 0}
	switch r.IntN(5) {
	case 0:
		n.coef = strconv.Itoa(r.IntN(2000))
	case 1:
		n.coef = digits(16 + r.IntN(25))
	case 2:
		n.coef = digits(17 + r.IntN(14))
		n.exp = -1 - r.IntN(len(n.coef)+3)
	case 3:
		n.coef = digits(1 + r.IntN(20))
		n.exp = r.IntN(2*maxExp+1) - maxExp
	default:
		f := math.Float64frombits(r.Uint64())
		for math.IsNaN(f) || math.IsInf(f, 0) {
			f = math.Float64frombits(r.Uint64())
		}
		mant, exp, _ := strings.Cut(strconv.FormatFloat(math.Abs(f), 'e', -1, 64), "e")
		intPart, frac, _ := strings.Cut(mant, ".")
		e, _ := strconv.Atoi(exp)
		n.coef = strings.TrimLeft(intPart+frac, "0")
		if n.coef == "" {
			n.coef = "0"
		}
		n.exp, n.neg = e-len(frac), f < 0
	}
	return n
}

// spell writes the number in a random one of its spellings (its plain one when r is nil): zeros added
// or dropped, the point moved with the exponent, e or E, an explicit + sign, and -0 for zero.
func (n genNum) spell(r *rand.Rand) string {
	if r == nil {
		s := n.coef
		if n.exp != 0 {
			s += "e" + strconv.Itoa(n.exp)
		}
		if n.neg && n.coef != "0" {
			s = "-" + s
		}
		return s
	}
	lead, trail := r.IntN(3), r.IntN(3)
	digits := strings.Repeat("0", lead) + n.coef + strings.Repeat("0", trail)
	point := 1 + r.IntN(len(digits)) // digits before the point
	exp := n.exp - trail + (len(digits) - point)
	intPart := strings.TrimLeft(digits[:point], "0")
	if intPart == "" {
		intPart = "0"
	}
	var b strings.Builder
	if n.neg && (n.coef != "0" || r.IntN(2) == 0) {
		b.WriteByte('-')
	}
	b.WriteString(intPart)
	if frac := digits[point:]; frac != "" {
		b.WriteString("." + frac)
	}
	if exp != 0 || r.IntN(4) == 0 {
		b.WriteString([]string{"e", "E"}[r.IntN(2)])
		if exp >= 0 && r.IntN(2) == 0 {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(exp))
	}
	return b.String()
}

// runes are the characters strings are made of: ASCII, the characters JSON must escape, ones NFC
// composes or replaces, and ones outside the Basic Multilingual Plane.
var runes = []rune{'a', 'b', 'Z', '0', ' ', '"', '\\', '/', '\n', '\t', 0x01, 0x1f, 0x7f, 'é', 0x0301, 'e', 'A',
	0x030A, 0x212B, 'Å', 0x2028, 0xFFFD, 0xE000, 0xFB01, '日', 0x1F600, 0x10FFFF}

func genString(r *rand.Rand) string {
	s := make([]rune, r.IntN(6))
	for i := range s {
		s[i] = runes[r.IntN(len(runes))]
	}
	return norm.NFC.String(string(s))
}

func (g *gen) clone() *gen {
	c := *g
	c.keys = slices.Clone(g.keys)
	c.kids = make([]*gen, len(g.kids))
	for i, k := range g.kids {
		c.kids[i] = k.clone()
	}
	return &c
}

// write appends the document. With r nil it is the plain spelling; otherwise keys are shuffled,
// whitespace is added, and numbers and strings take random equivalent spellings.
func (g *gen) write(dst []byte, r *rand.Rand) []byte {
	space := func() {
		if r != nil {
			dst = append(dst, []string{"", "", " ", "\n  ", "\t", "\r\n"}[r.IntN(6)]...)
		}
	}
	switch g.kind {
	case kindNull:
		return append(dst, "null"...)
	case kindTrue:
		return append(dst, "true"...)
	case kindFalse:
		return append(dst, "false"...)
	case kindNumber:
		return append(dst, g.num.spell(r)...)
	case kindString:
		return writeString(dst, g.text, r)
	case kindArray:
		dst = append(dst, '[')
		for i, k := range g.kids {
			if i > 0 {
				dst = append(dst, ',')
			}
			space()
			dst = k.write(dst, r)
			space()
		}
		return append(dst, ']')
	}
	order := make([]int, len(g.keys))
	for i := range order {
		order[i] = i
	}
	if r != nil {
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	dst = append(dst, '{')
	for n, i := range order {
		if n > 0 {
			dst = append(dst, ',')
		}
		space()
		dst = writeString(dst, g.keys[i], r)
		space()
		dst = append(dst, ':')
		space()
		dst = g.kids[i].write(dst, r)
	}
	return append(dst, '}')
}

// writeString writes s as a JSON string: plainly when r is nil, else maybe decomposed (NFD) and with
// random characters written as \u escapes (surrogate pairs beyond the BMP).
func writeString(dst []byte, s string, r *rand.Rand) []byte {
	if r != nil && r.IntN(2) == 0 {
		s = norm.NFD.String(s)
	}
	dst = append(dst, '"')
	for _, c := range s {
		switch {
		case r != nil && r.IntN(4) == 0:
			for _, u := range utf16.Encode([]rune{c}) {
				format := []string{`\u%04x`, `\u%04X`}[r.IntN(2)]
				dst = fmt.Appendf(dst, format, u)
			}
		case c == '"' || c == '\\':
			dst = append(dst, '\\', byte(c))
		case c == '/' && r != nil && r.IntN(2) == 0:
			dst = append(dst, `\/`...)
		case c == '\n':
			dst = append(dst, `\n`...)
		case c < 0x20:
			dst = fmt.Appendf(dst, `\u%04x`, c)
		default:
			dst = utf8.AppendRune(dst, c)
		}
	}
	return append(dst, '"')
}

// edit makes one minimal change that alters the document's meaning, and names it. ok is false when the
// chosen value offers none (an empty document).
func (g *gen) edit(r *rand.Rand) (what string, ok bool) {
	type site struct {
		parent *gen
		index  int // in parent.kids
		v      *gen
	}
	sites := []site{{v: g}}
	for i := 0; i < len(sites); i++ {
		for j, k := range sites[i].v.kids {
			sites = append(sites, site{sites[i].v, j, k})
		}
	}
	s := sites[r.IntN(len(sites))]
	v := s.v
	switch v.kind {
	case kindNull, kindTrue, kindFalse:
		v.kind = kind((int(v.kind) + 1 + r.IntN(2)) % 3) // kindNull, kindFalse, kindTrue are 0, 1, 2
		return "literal", true
	case kindNumber:
		if v.num.coef != "0" && r.IntN(4) == 0 {
			v.num.neg = !v.num.neg
			return "number sign", true
		}
		v.num.coef = addOne(v.num.coef, v.num.coef != "0" && r.IntN(2) == 0)
		return "number ±1 in the last digit", true
	case kindString:
		for range 10 {
			if t, what := editString(r, v.text); t != v.text {
				v.text = t
				return what, true
			}
		}
		return "", false
	case kindArray:
		switch {
		case len(v.kids) >= 2 && r.IntN(2) == 0:
			i, j := r.IntN(len(v.kids)), r.IntN(len(v.kids))
			if string(v.kids[i].write(nil, nil)) == string(v.kids[j].write(nil, nil)) {
				return "", false
			}
			v.kids[i], v.kids[j] = v.kids[j], v.kids[i]
		case len(v.kids) >= 1 && r.IntN(2) == 0:
			i := r.IntN(len(v.kids))
			v.kids = slices.Delete(v.kids, i, i+1)
		default:
			v.kids = append(v.kids, &gen{kind: kindNull})
		}
		return "array element", true
	}
	if len(v.keys) == 0 {
		v.keys, v.kids = []string{""}, []*gen{{kind: kindNull}}
		return "key rune", true
	}
	i := r.IntN(len(v.keys))
	for range 10 {
		if k, _ := editString(r, v.keys[i]); !slices.Contains(v.keys, k) {
			v.keys[i] = k
			return "key rune", true
		}
	}
	return "", false
}

// editString changes one rune of s, or adds or removes one, returning NFC text.
func editString(r *rand.Rand, s string) (string, string) {
	rs := []rune(s)
	switch i := r.IntN(len(rs) + 1); {
	case i < len(rs) && r.IntN(3) > 0:
		rs[i] = runes[r.IntN(len(runes))]
		return norm.NFC.String(string(rs)), "string rune"
	case i < len(rs):
		return norm.NFC.String(string(slices.Delete(rs, i, i+1))), "string length"
	default:
		return norm.NFC.String(string(slices.Insert(rs, i, runes[r.IntN(len(runes))]))), "string length"
	}
}

// addOne adds one to (or, with down, subtracts one from) the last digit of a positive decimal
// coefficient, carrying or borrowing as needed.
func addOne(coef string, down bool) string {
	v, _ := new(big.Int).SetString(coef, 10)
	if down {
		v.Sub(v, big.NewInt(1))
	} else {
		v.Add(v, big.NewInt(1))
	}
	return v.String()
}

// TestCanonicalIsWhatOfHashes: for generated documents, as raw JSON and as Go values, under every kind
// of options, Sum(Canonical(v)) is Of(v), and an array's canonical form is its elements' canonical
// forms joined by commas (what a caller hashing a conversation message by message relies on).
func TestCanonicalIsWhatOfHashes(t *testing.T) {
	r := rand.New(rand.NewPCG(2026, 12))
	optionSets := []Options{{}, {Mode: Structural, VolatilePaths: []string{"a", "b.c"}},
		{Redact: func(s string) string { return strings.ReplaceAll(s, "a", "*") }}}
	for i := range 500 {
		var elems [][]byte
		for range 1 + r.IntN(4) {
			elems = append(elems, genValue(r, 0).write(nil, r))
		}
		doc := append(append([]byte("["), bytes.Join(elems, []byte(","))...), ']')
		var value any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber() // numbers past float64 stay exact
		if err := dec.Decode(&value); err != nil {
			t.Fatal(err)
		}
		for _, opts := range optionSets {
			for _, v := range []any{json.RawMessage(doc), value} {
				want, wantErr := Of(v, opts)
				canon, err := Canonical(v, opts)
				if fmt.Sprint(err) != fmt.Sprint(wantErr) || (err == nil && Sum(canon) != want) {
					t.Fatalf("document %d (%T): Canonical %s (%v), Of %s (%v)", i, v, canon, err, want, wantErr)
				}
			}
		}
		joined := []byte("[")
		for j, e := range elems {
			c, err := CanonicalizeJSON(e)
			if err != nil {
				t.Fatal(err)
			}
			if j > 0 {
				joined = append(joined, ',')
			}
			joined = append(joined, c...)
		}
		whole, err := CanonicalizeJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(append(joined, ']'), whole) {
			t.Fatalf("document %d: the elements' canonical forms joined\n%s\nare not the array's\n%s", i, joined, whole)
		}
	}
}
