package fingerprint

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/text/unicode/norm"
)

// referenceCanonicalJSON is the implementation the one-pass writer replaced, kept as its reference: parse
// the whole document into a sorted, normalized tree, then write the tree.
func referenceCanonicalJSON(doc []byte) ([]byte, error) {
	n, err := parseDocument(string(doc), nil)
	if err != nil {
		return nil, err
	}
	return appendValue(nil, &n), nil
}

// requireMatchesReference checks the fast path against the reference on one input: it must take every
// document the reference accepts and write the same bytes, decline every document the reference
// refuses, and the public functions must agree with the reference, errors included.
func requireMatchesReference(t *testing.T, in []byte) {
	t.Helper()
	want, wantErr := referenceCanonicalJSON(in)
	got, how := canonicalBytes(in)
	ok := how == fastDone
	switch {
	case ok && wantErr != nil:
		t.Fatalf("fast path accepts %q, which the reference refuses: %v\nfast: %q", in, wantErr, got)
	case how == fastDeclined && wantErr == nil:
		t.Fatalf("fast path declines %q, which the reference accepts as %q", in, want)
	case ok && !bytes.Equal(got, want):
		t.Fatalf("fast path differs on %q:\n%s", in, cmp.Diff(string(want), string(got)))
	}

	pub, err := CanonicalizeJSON(in)
	if !sameError(err, wantErr) || !bytes.Equal(pub, want) {
		t.Fatalf("CanonicalizeJSON(%q) = %q, %v; the reference gives %q, %v", in, pub, err, want, wantErr)
	}
	fp, err := OfJSON(in, Options{})
	wantFP := ""
	if wantErr == nil {
		wantFP = Sum(want)
	}
	if fp != wantFP || !sameError(err, wantErr) {
		t.Fatalf("OfJSON(%q) = %s, %v; want %s, %v", in, fp, err, wantFP, wantErr)
	}
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error() && fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b)
}

// FuzzFingerprintMatchesReference checks that the one-pass writer and the tree it replaced agree on
// every input: the same canonical bytes, the same fingerprint, the same error.
func FuzzFingerprintMatchesReference(f *testing.F) {
	for _, seed := range fastPathSeeds() {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		requireMatchesReference(t, in)
	})
}

// fastPathSeeds covers what either implementation treats specially.
func fastPathSeeds() []string {
	return []string{
		// numbers past 2^53, -0, out of a double's range, exponents in every spelling
		`[9007199254740993, -9007199254740993, 18446744073709551617, 123456789012345678901, 1234567890123456789012]`,
		`[-0, -0.0, 0e5, -0E-5, 0.000, 1.0, 10e-1, 1e0, 1E+0, 100e-2]`,
		`[1e400, -1e400, 1e-400, 1e9999, 1e-9999, 1e10000, 1e-10000, 1.5E308, 5e-324, 1.7976931348623157e308]`,
		`[1e21, 1e20, 1e-6, 1e-7, 0.000001, 0.0000001, 123e-20, 1.0000000000000001, 333333333.33333329, 4.50]`,
		`{"max_tokens":1e+06,"temperature":0.7,"top_p":0.95,"n":-12,"x":01}`,
		// unicode: NFC already, needing NFC (decomposed), keys that collide only after NFC, CGJ runs
		`{"café":"naïve résumé Grüße 日本語 😀 👍🏽 €","ключ":"привет"}`,
		`{"cafe\u0301":"re\u0301sume\u0301","e\u0301":1}`,
		"{\"cafe\u0301\":\"re\u0301sume\u0301\",\"x\":\"\u0344\u0f73\u212b\"}",
		"{\"\u212b\":1,\"\u00c5\":2}",
		`{"é":1,"e\u0301":2}`,
		"[\"a" + strings.Repeat("\u0300", 31) + "\"]",
		"[\"\u1100\u1161\u11a8\", \"\uac00\u11a8\", \"\U0002f800\", \"\U00010000\", \"\uffff\", \"\ufffd\"]",
		// invalid UTF-8 and unpaired surrogates, in strings and keys
		"[\"\xff\"]", "{\"\xc3\":1}", "[\"\xed\xa0\x80\"]", "[\"\xf4\x90\x80\x80\"]", "[\"\xe2\x82\"]",
		`["\ud800"]`, `["\udc00\ud800"]`, `{"\ud83d":1}`, `["\ud83d\ude00", "\uD83D\uDE00"]`,
		// escapes of every kind, controls, and characters needing none
		`"\u0041\t\b\f\n\r\u001f\u007f\"\\\/<>&\u2028\u00e9\ud83d\ude00\u003c\u0000"`,
		`{"a\nb":1,"a\"b":2,"\u0061":3,"\/":4}`,
		"[\"tab\there\"]", `["\x"]`, `["\u12"]`, `["\u12g4"]`,
		// duplicate keys, sorted or not, nested
		`{"a":1,"a":2}`, `{"b":1,"a":2,"b":3}`, `{"x":{"b":1,"a":2,"a":3}}`,
		`{"\ue000":1,"\ud83d\ude00":2,"z":3,"":4,"\u0080":5}`,
		manyKeys(20, ""), manyKeys(20, "k07"), manyKeys(12, "k11"), `{"abcdefgh":1,"abcdefg":2,"abcdefgi":3,"abcdefgh\u0000":4}`,
		// text copied as it stands next to text rewritten (whitespace, escapes, numbers, NFC), in
		// objects that are sorted and objects that are not
		` { "b" : [ 1e0 , "x\/y" , -0 , 12 ] , "a" : { "d" : "e\u0301" , "c" : true } , "e":{}} `,
		`{"b":[1e0,"x\/y",-0,12],"a":{"d":"e\u0301","c":true},"e":{}}`,
		`{"b":[1,"xy",0,12],"a":{"d":"\u00e9","c":true},"e":{ }}`, `["\/\u00e9e\u0301", "\/e\u0301\/"]`,
		// nesting, deep and unbalanced
		strings.Repeat("[", 200) + strings.Repeat("]", 200),
		strings.Repeat(`{"a":`, 100) + "null" + strings.Repeat("}", 100),
		`{"a":[}`, `[1,]`, `{"a" 1}`, `{,}`, ` 42 `, `nul`, `[tru]`, `"abc`, `{"a":1}x`, ``,
		// huge strings, plain, with escapes and with non-ASCII (a few kilobytes: see hugeSeeds)
		`["` + strings.Repeat("lorem ipsum ", 400) + `"]`,
		`{"k":"` + strings.Repeat(`line\n\"quoted\" \u003ctag\u003e `, 100) + `"}`,
		`{"k":"` + strings.Repeat("日本語 café ", 200) + `", "e\u0301":"` + strings.Repeat("x", 5000) + `"}`,
	}
}

// hugeSeeds are too big to fuzz from (the fuzzer minimizes every input it finds interesting, one byte
// at a time): strings of megabytes and nesting past the limit, for the unit test.
func hugeSeeds() []string {
	return []string{
		strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
		strings.Repeat(`{"b":0,"a":`, maxDepth) + "null" + strings.Repeat("}", maxDepth),
		`["` + strings.Repeat("lorem ipsum ", 100000) + `"]`,
		`{"k":"` + strings.Repeat(`line\n\"quoted\" \u003ctag\u003e `, 40000) + `", "a":1}`,
		`{"k":"` + strings.Repeat("日本語 café ", 100000) + `"}`,
		`{"k":"` + strings.Repeat("cafe\u0301 ", 100000) + `"}`,
	}
}

// manyKeys is an object with n keys in reverse order, and dup once more if it is not empty.
func manyKeys(n int, dup string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := n - 1; i >= 0; i-- {
		fmt.Fprintf(&b, `"k%02d":%d,`, i, i)
	}
	if dup != "" {
		fmt.Fprintf(&b, `%q:0,`, dup)
	}
	return strings.TrimSuffix(b.String(), ",") + "}"
}

func TestFastPathMatchesReferenceOnSeeds(t *testing.T) {
	for _, seed := range append(fastPathSeeds(), hugeSeeds()...) {
		requireMatchesReference(t, []byte(seed))
	}
}

func TestFastPathMatchesReferenceOnGeneratedRequests(t *testing.T) {
	for _, ascii := range []bool{true, false} {
		for _, doc := range requestCorpus(100, ascii) {
			requireMatchesReference(t, doc)
		}
	}
	r := rand.New(rand.NewPCG(14, 1))
	for range 2000 {
		var buf bytes.Buffer
		randomASCIIDoc(&buf, r, 0)
		requireMatchesReference(t, buf.Bytes())
	}
}

// TestFingerprintAllocatesAFewTimesPerRequest holds the fast path to what it was built for: with its
// scratch pooled, a fingerprint allocates its hex string and nothing else (a garbage collection that
// empties the pool may add a few, hence 1 on average), where a tree costs one allocation per container and per
// decoded string (135 a request on this corpus).
func TestFingerprintAllocatesAFewTimesPerRequest(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	for i, doc := range requestCorpus(20, false) {
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := OfJSON(doc, Options{}); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 1 {
			t.Errorf("request %d: OfJSON allocates %.0f times, want 1", i, allocs)
		}
	}
}

func TestSafeRunesAreLeftAloneByNFC(t *testing.T) {
	safe := nfcSafeRunes()
	count := 0
	for r := rune(0); r < safeRunesLimit+10; r++ {
		if !safe.has(r) {
			continue
		}
		count++
		s := string(r)
		for _, ctx := range []string{s, "a" + s, s + "a", s + s, "\u1100" + s, s + "\u00e9"} {
			if !norm.NFC.IsNormalString(ctx) {
				t.Fatalf("%U is marked safe, but NFC changes %+q", r, ctx)
			}
		}
	}
	// Spot checks both ways: the table is only useful if it covers the scripts requests are written in.
	for _, r := range []rune{'é', 'ß', 'ж', 'λ', '日', 'テ', '€', '—', '😀', 0x1f3fd, 0xac00} {
		if !safe.has(r) {
			t.Errorf("%U (%c) should be safe", r, r)
		}
	}
	for _, r := range []rune{0x0301, 0x0344, 0x212b, 0x1161, 0x11a8, 0x2f800, utf8.RuneError, 'a', 0xd800, -1} {
		if safe.has(r) {
			t.Errorf("%U should not be safe", r)
		}
	}
	if count < 50000 {
		t.Errorf("only %d runes are safe", count)
	}
}

func TestStops8FindsTheFirstStopByte(t *testing.T) {
	isStop := func(b byte) bool { return b >= 0x80 || special[b] }
	r := rand.New(rand.NewPCG(8, 8))
	interesting := []byte{0, 0x1f, 0x20, '!', '"', '#', '[', '\\', ']', 0x7f, 0x80, 0xc3, 0xff, 'a'}
	var w [8]byte
	for range 200000 {
		for i := range w {
			if r.IntN(2) == 0 {
				w[i] = interesting[r.IntN(len(interesting))]
			} else {
				w[i] = byte(r.IntN(256))
			}
		}
		want := -1
		for i, b := range w {
			if isStop(b) {
				want = i
				break
			}
		}
		got := skipPlain(w[:], 0)
		if want == -1 && got != 8 || want != -1 && got != want {
			t.Fatalf("skipPlain(%q) = %d, want %d (stops8 = %#x)", w, got, want, stops8(binary.LittleEndian.Uint64(w[:])))
		}
	}
}

func TestGeneratedRequestsTakeTheFastPath(t *testing.T) {
	for i, doc := range requestCorpus(200, false) {
		if _, how := canonicalBytes(doc); how != fastDone {
			t.Fatalf("request %d: outcome %d, want fastDone", i, how)
		}
	}
}

// TestDeepUnsortedNestingIsCopiedOnce: however deep the objects whose keys arrive out of order, a byte is
// copied once by the first pass and once by emit, so the time is linear in the size.
func TestDeepUnsortedNestingIsCopiedOnce(t *testing.T) {
	doc := []byte(strings.Repeat(`{"b":0,"a":`, maxDepth) + "null" + strings.Repeat("}", maxDepth))
	if _, how := canonicalBytes(doc); how != fastDone {
		t.Fatalf("outcome %d, want fastDone", how)
	}
	requireMatchesReference(t, doc)
}

// TestConcurrentFingerprintsShareNoScratch: the pooled scratch is one call's alone, so fingerprints
// taken at the same time on many goroutines are the ones taken one by one.
func TestConcurrentFingerprintsShareNoScratch(t *testing.T) {
	corpus := requestCorpus(40, false)
	want := make([]string, len(corpus))
	for i, doc := range corpus {
		want[i] = Sum(must(referenceCanonicalJSON(doc)))
	}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for round := range 5 {
				for k := range corpus {
					i := (k + g*7 + round) % len(corpus)
					if got, err := OfJSON(corpus[i], Options{}); err != nil || got != want[i] {
						errs <- fmt.Errorf("goroutine %d, request %d: %s, %v; want %s", g, i, got, err, want[i])
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
