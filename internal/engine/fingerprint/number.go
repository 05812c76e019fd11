package fingerprint

import "strconv"

// maxExponent bounds the exponent e of a nonzero number written as d.ddd×10^e. A double spans
// 10^±308 and decimal128 10^±6144; a literal beyond ±9999 is refused with a NumberRangeError. The
// canonical text never grows with the exponent, so the bound only keeps nonsense out of fingerprints.
const maxExponent = 9999

// number parses a JSON number literal into its canonical text: the exact decimal value, never a
// rounded double, laid out as ECMAScript's Number::toString lays out a double's shortest digits.
func (p *parser) number() (node, error) {
	s, start := p.src, p.pos
	i := start
	neg := s[i] == '-'
	if neg {
		i++
	}
	if i >= len(s) {
		return node{}, p.unexpectedEnd()
	}
	digits := i
	switch c := s[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return node{}, p.invalidChar(i, "in numeric literal")
	}
	intEnd := i
	var frac, exp string
	expNeg := false
	var err error
	if i < len(s) && s[i] == '.' {
		from := i + 1
		if i, err = p.digits(from, "after decimal point in numeric literal"); err != nil {
			return node{}, err
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
		if i, err = p.digits(i, "in exponent of numeric literal"); err != nil {
			return node{}, err
		}
		exp = s[from:i]
	}
	p.pos = i
	lit := s[start:i]
	// An integer of up to 21 digits is its own canonical text: JSON forbids leading zeros, and
	// Number::toString writes every integer below 10^21 out in full. Only -0 needs rewriting.
	if i == intEnd && intEnd-digits <= 21 {
		if lit == "-0" {
			return node{kind: kindNumber, text: "0"}, nil
		}
		return node{kind: kindNumber, text: lit}, nil
	}
	var buf [48]byte
	out, ok := appendDecimal(buf[:0], neg, s[digits:intEnd], frac, exp, expNeg)
	if !ok {
		if !p.failed() {
			p.fail(&NumberRangeError{Path: p.path.String(), value: clip(lit)})
		}
		return node{kind: kindNumber, text: "0"}, nil
	}
	if string(out) == lit { // already canonical, as most numbers are: keep the substring, allocate nothing
		return node{kind: kindNumber, text: lit}, nil
	}
	return node{kind: kindNumber, text: string(out)}, nil
}

// appendDecimal writes the canonical text of the number whose literal has the integer digits intDigits,
// the fraction digits frac and the exponent digits exp (negative if expNeg). It reports false when the
// number is nonzero and its exponent lies beyond ±maxExponent.
//
// The value is normalised to k significant digits d (no leading or trailing zeros) and an exponent n
// with value = 0.d × 10^n, then laid out by the rules of ECMAScript's Number::toString: in full for
// 10^-6 <= |value| < 10^21, else as d.ddd e±(n-1). For the shortest round-trip digits of a double this
// is RFC 8785's text; for any other decimal it is that decimal's exact digits, so two numbers get the
// same text exactly when they have the same value.
func appendDecimal[T ~string | ~[]byte](dst []byte, neg bool, intDigits, frac, exp T, expNeg bool) ([]byte, bool) {
	ds := digitSeq[T]{intDigits, frac}
	total := len(intDigits) + len(frac)
	lead := 0
	for lead < total && ds.at(lead) == '0' {
		lead++
	}
	if lead == total {
		return append(dst, '0'), true // every spelling of zero, -0 included
	}
	trail := total - 1
	for ds.at(trail) == '0' {
		trail--
	}
	var e int64
	for i := range len(exp) {
		c := exp[i]
		if e < 1<<40 { // saturate: far beyond maxExponent, far from overflow
			e = e*10 + int64(c-'0')
		}
	}
	if expNeg {
		e = -e
	}
	n := int64(len(intDigits)) - int64(lead) + e
	if n-1 > maxExponent || n-1 < -maxExponent {
		return dst, false
	}
	k := int64(trail - lead + 1)
	if neg {
		dst = append(dst, '-')
	}
	first, end := lead, trail+1
	switch {
	case k <= n && n <= 21:
		dst = ds.appendRange(dst, first, end)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = ds.appendRange(dst, first, first+int(n))
		dst = append(dst, '.')
		dst = ds.appendRange(dst, first+int(n), end)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = ds.appendRange(dst, first, end)
	default:
		dst = append(dst, ds.at(first))
		if k > 1 {
			dst = append(dst, '.')
			dst = ds.appendRange(dst, first+1, end)
		}
		dst = append(dst, 'e')
		if n-1 < 0 {
			dst = append(dst, '-')
			dst = strconv.AppendInt(dst, 1-n, 10)
		} else {
			dst = append(dst, '+')
			dst = strconv.AppendInt(dst, n-1, 10)
		}
	}
	return dst, true
}

// digitSeq is the digits of a literal's integer and fraction parts read as one sequence, the decimal
// point dropped.
type digitSeq[T ~string | ~[]byte] struct{ a, b T }

func (d digitSeq[T]) at(i int) byte {
	if i < len(d.a) {
		return d.a[i]
	}
	return d.b[i-len(d.a)]
}

// appendRange appends the digits [i, j).
func (d digitSeq[T]) appendRange(dst []byte, i, j int) []byte {
	la := len(d.a)
	dst = append(dst, d.a[min(i, la):min(j, la)]...)
	return append(dst, d.b[max(i-la, 0):max(j-la, 0)]...)
}

// intNode holds an integer from a Go value exactly: as a double while a double holds it (the common
// case, formatted without allocating), else as its decimal digits.
func intNode(v int64) node {
	if -1<<53 <= v && v <= 1<<53 {
		return node{kind: kindNumber, num: float64(v)}
	}
	return node{kind: kindNumber, text: strconv.FormatInt(v, 10)}
}

func uintNode(v uint64) node {
	if v <= 1<<53 {
		return node{kind: kindNumber, num: float64(v)}
	}
	return node{kind: kindNumber, text: strconv.FormatUint(v, 10)}
}
