package fingerprint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

// This file holds everything that uses github.com/gowebpki/jcs, the reference RFC 8785 implementation:
// the side-by-side benchmark and the byte-for-byte comparisons with it.

// ordered is a JSON object that keeps its keys in the order given, so generated requests look like
// what SDKs send (model first, messages before tools) instead of arriving pre-sorted.
type ordered []field

type field struct {
	key string
	val any
}

func (o ordered) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		v, err := json.Marshal(f.val)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// requestGen deterministically generates Anthropic Messages-style requests.
type requestGen struct {
	r     *rand.Rand
	ascii bool // only ASCII text
	tools int  // counter for tool_use ids
}

var (
	asciiWords = strings.Fields(`the a an of to in and or for with on at by from file function error test request ` +
		`response model agent tool call result value user assistant system please check this that repository ` +
		`branch commit build deploy cluster pod namespace config secret token retry timeout "quoted" path/to/x ` +
		`{braces} [brackets] 42 3.14 tab\there new-line`)
	unicodeWords = strings.Fields(`café naïve résumé Grüße straße 日本語 テキスト 中文 привет мир Ελληνικά ` +
		`😀 🙂 👍🏽 € £ — … « » ½ ñandú façade coöperate`)
)

func (g *requestGen) words(minChars, maxChars int) string {
	target := minChars + g.r.IntN(maxChars-minChars+1)
	var sb strings.Builder
	for sb.Len() < target {
		if sb.Len() > 0 {
			sep := byte(' ')
			if g.r.IntN(12) == 0 {
				sep = '\n'
			}
			sb.WriteByte(sep)
		}
		if !g.ascii && g.r.IntN(8) == 0 {
			sb.WriteString(unicodeWords[g.r.IntN(len(unicodeWords))])
		} else {
			sb.WriteString(asciiWords[g.r.IntN(len(asciiWords))])
		}
	}
	return strings.ReplaceAll(sb.String(), `tab\there`, "tab\there")
}

func (g *requestGen) schema() ordered {
	props := ordered{}
	var required []any
	for i := range 1 + g.r.IntN(5) {
		name := fmt.Sprintf("%s_%d", asciiWords[g.r.IntN(10)+8], i)
		prop := ordered{{"type", []string{"string", "integer", "number", "boolean"}[g.r.IntN(4)]}, {"description", g.words(20, 120)}}
		if g.r.IntN(3) == 0 {
			prop = append(prop, field{"enum", []any{"fast", "balanced", "thorough"}})
		}
		if g.r.IntN(3) == 0 {
			prop = append(prop, field{"minimum", 0}, field{"maximum", 1e6})
		}
		props = append(props, field{name, prop})
		if g.r.IntN(2) == 0 {
			required = append(required, name)
		}
	}
	s := ordered{{"type", "object"}, {"properties", props}}
	if required != nil {
		s = append(s, field{"required", required})
	}
	return s
}

func (g *requestGen) toolUse() ordered {
	g.tools++
	return ordered{
		{"type", "tool_use"},
		{"id", fmt.Sprintf("toolu_%024x", g.r.Uint64())},
		{"name", []string{"read_file", "run_shell", "search", "kubectl_get"}[g.r.IntN(4)]},
		{"input", ordered{{"path", "src/" + g.words(5, 30)}, {"limit", g.r.IntN(500)}, {"recursive", g.r.IntN(2) == 0}, {"score", math.Round(g.r.Float64()*1000) / 1000}}},
	}
}

func (g *requestGen) message(i int) ordered {
	if i%2 == 0 { // user turn: text, or the results of the previous tool calls
		if i > 0 && g.r.IntN(2) == 0 {
			return ordered{{"role", "user"}, {"content", []any{ordered{
				{"type", "tool_result"}, {"tool_use_id", fmt.Sprintf("toolu_%024x", g.r.Uint64())},
				{"content", g.words(50, 1500)}, {"is_error", g.r.IntN(10) == 0},
			}}}}
		}
		return ordered{{"role", "user"}, {"content", g.words(20, 400)}}
	}
	blocks := []any{ordered{{"type", "text"}, {"text", g.words(20, 600)}}}
	for range g.r.IntN(3) {
		blocks = append(blocks, g.toolUse())
	}
	return ordered{{"role", "assistant"}, {"content", blocks}}
}

func (g *requestGen) request() []byte {
	messages := make([]any, 2+g.r.IntN(19))
	for i := range messages {
		messages[i] = g.message(i)
	}
	tools := make([]any, 1+g.r.IntN(6))
	for i := range tools {
		tools[i] = ordered{{"name", fmt.Sprintf("tool_%d", i)}, {"description", g.words(40, 200)}, {"input_schema", g.schema()}}
	}
	req := ordered{
		{"model", []string{"claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"}[g.r.IntN(3)]},
		{"max_tokens", []int{1024, 4096, 8192}[g.r.IntN(3)]},
		{"system", g.words(200, 600)},
		{"messages", messages},
		{"tools", tools},
		{"temperature", 0.7},
		{"top_p", 0.95},
		{"stop_sequences", []any{"\n\nHuman:"}},
		{"metadata", ordered{{"user_id", fmt.Sprintf("user-%d", g.r.IntN(1e6))}}},
	}
	data, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	return data
}

// requestCorpus returns n generated requests, the same on every run.
func requestCorpus(n int, ascii bool) [][]byte {
	g := requestGen{r: rand.New(rand.NewPCG(2026, 8)), ascii: ascii}
	docs := make([][]byte, n)
	for i := range docs {
		docs[i] = g.request()
	}
	return docs
}

// BenchmarkFingerprint compares fingerprinting a request with its limit and with a peer, over one corpus
// of 200 generated requests (one request per op, cycling, every side on the same requests):
//
//   - agentrewind: OfJSON, i.e. parse, canonicalize and SHA-256 to hex;
//   - jcs+sha256: github.com/gowebpki/jcs's Transform (RFC 8785), then the same SHA-256 to hex (Sum);
//   - sha256-only: the limit, SHA-256 to hex (Sum) of the request's canonical bytes computed beforehand.
//
// The three sub-benchmarks run one after the other, so on a busy machine their times are not comparable.
// The -vs-limit pairs interleave a side with the limit on each request and report both ns/op and
// %-of-limit, the limit's time as a percentage of the side's (100 would be canonicalizing for free).
func BenchmarkFingerprint(b *testing.B) {
	corpus := requestCorpus(200, false)
	canonical := make([][]byte, len(corpus))
	total := 0
	for i, doc := range corpus {
		out, err := CanonicalizeJSON(doc)
		if err != nil {
			b.Fatal(err)
		}
		canonical[i] = out
		total += len(doc)
	}
	// Every sub-benchmark fingerprints one request per op, cycling through the same corpus, and reports
	// throughput against the same input size so the MB/s columns compare directly.
	perOp := int64(total / len(corpus))

	fingerprint := func(doc []byte) {
		if _, err := OfJSON(doc, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	jcsSum := func(doc []byte) {
		out, err := jcs.Transform(doc)
		if err != nil {
			b.Fatal(err)
		}
		_ = Sum(out)
	}
	b.Run("agentrewind", func(b *testing.B) {
		b.SetBytes(perOp)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			fingerprint(corpus[i%len(corpus)])
		}
	})
	b.Run("jcs+sha256", func(b *testing.B) {
		b.SetBytes(perOp)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			jcsSum(corpus[i%len(corpus)])
		}
	})
	b.Run("sha256-only", func(b *testing.B) {
		b.SetBytes(perOp)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_ = Sum(canonical[i%len(canonical)])
		}
	})
	// Interleaved pairs: each op times one side and then the limit on the same request, so both see the
	// same machine. jcs+sha256 gets its own pair: its allocations would otherwise start garbage
	// collections that the fingerprint side pays for. A shared machine stalls some ops for far longer
	// than they take, so each side's time per request is the median over its repetitions (b.N of at
	// least a few times the corpus size gives several), summed over the corpus; the reported ns/op are
	// those sums per request.
	sideBySide := func(name, metric string, side func([]byte)) {
		b.Run(name, func(b *testing.B) {
			sideTimes := make([][]time.Duration, len(corpus))
			limitTimes := make([][]time.Duration, len(corpus))
			for i := 0; b.Loop(); i++ {
				k := i % len(corpus)
				t0 := time.Now()
				side(corpus[k])
				t1 := time.Now()
				_ = Sum(canonical[k])
				t2 := time.Now()
				sideTimes[k] = append(sideTimes[k], t1.Sub(t0))
				limitTimes[k] = append(limitTimes[k], t2.Sub(t1))
			}
			sideTime, limit := sumOfMedians(sideTimes), sumOfMedians(limitTimes)
			if sideTime == 0 || limit == 0 {
				return // too few ops to time every request
			}
			b.ReportMetric(float64(sideTime.Nanoseconds())/float64(len(corpus)), metric+"-ns/op")
			b.ReportMetric(float64(limit.Nanoseconds())/float64(len(corpus)), "sha256-ns/op")
			b.ReportMetric(100*float64(limit)/float64(sideTime), "%-of-limit")
		})
	}
	sideBySide("agentrewind-vs-limit", "agentrewind", fingerprint)
	sideBySide("jcs+sha256-vs-limit", "jcs+sha256", jcsSum)
}

// sumOfMedians adds up the median of each list of times; 0 if any list is empty.
func sumOfMedians(times [][]time.Duration) time.Duration {
	var total time.Duration
	for _, ts := range times {
		if len(ts) == 0 {
			return 0
		}
		slices.Sort(ts)
		total += ts[len(ts)/2]
	}
	return total
}

func requireMatchesJCS(t *testing.T, doc []byte) {
	t.Helper()
	want, err := jcs.Transform(doc)
	if err != nil {
		t.Fatalf("jcs rejects the document: %v\n%s", err, doc)
	}
	got, err := CanonicalizeJSON(doc)
	if err != nil {
		t.Fatalf("CanonicalizeJSON: %v\n%s", err, doc)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("differs from jcs:\ngot  %s\nwant %s", got, want)
	}
}

func TestMatchesJCSOnGeneratedRequests(t *testing.T) {
	for _, ascii := range []bool{true, false} { // the non-ASCII text is all NFC already
		for _, doc := range requestCorpus(50, ascii) {
			requireMatchesJCS(t, doc)
		}
	}
}

func TestMatchesJCSOnRFC8785Examples(t *testing.T) {
	for _, doc := range []string{
		`{"numbers":[333333333.3333333,1E30,4.50,2e-3,0.000000000000000000000000001],` + // 333333333.33333329 is rounded by JCS, kept exact here
			`"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
		`{"\u20ac":"Euro Sign","\r":"Carriage Return","1":"One","\ud83d\ude00":"Emoji","\u0080":"Control","\u00f6":"o"}`,
		`{"\ufb01":1,"\ud83d\ude00":2,"\ue000":3,"z":4}`,
		`[0, -0, 1e21, 1e-7, 0.1, 123456789012345680000, 5e-324, 1.7976931348623157e308, 100, 1e6, -1.5]`,
	} {
		requireMatchesJCS(t, []byte(doc))
	}
}

// randomASCIIDoc writes a random document: nested containers, keys with escapes and controls, numbers
// of every magnitude spelled in several ways.
func randomASCIIDoc(buf *bytes.Buffer, r *rand.Rand, depth int) {
	kind := r.IntN(7)
	if depth > 4 {
		kind = r.IntN(4)
	}
	switch kind {
	case 0:
		buf.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	case 1, 2:
		buf.WriteString(randomNumber(r))
	case 3:
		buf.WriteString(randomASCIIString(r))
	case 4, 5:
		buf.WriteByte('{')
		seen := map[string]bool{}
		for range r.IntN(6) {
			k := randomASCIIString(r)
			if seen[k] {
				continue
			}
			seen[k] = true
			if len(seen) > 1 {
				buf.WriteByte(',')
			}
			buf.WriteString(k)
			buf.WriteString(" : ")
			randomASCIIDoc(buf, r, depth+1)
		}
		buf.WriteByte('}')
	default:
		buf.WriteString("[ ")
		for i := range r.IntN(6) {
			if i > 0 {
				buf.WriteString(", ")
			}
			randomASCIIDoc(buf, r, depth+1)
		}
		buf.WriteByte(']')
	}
}

func randomNumber(r *rand.Rand) string {
	var f float64
	switch r.IntN(4) {
	case 0:
		f = float64(r.IntN(2000) - 1000)
	case 1:
		f = (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(60)-30))
	default:
		for f = math.NaN(); math.IsNaN(f) || math.IsInf(f, 0); {
			f = math.Float64frombits(r.Uint64())
		}
	}
	spellings := []string{
		strconv.FormatFloat(f, 'g', -1, 64),
		strconv.FormatFloat(f, 'e', -1, 64),
		// Padded with zeros, not printed to 20 digits: the extra digits of the double's exact binary
		// value would spell another decimal, which JCS rounds and this package keeps.
		padMantissa(strings.ToUpper(strconv.FormatFloat(f, 'e', -1, 64))),
		strconv.FormatFloat(f, 'e', 3, 64),
	}
	if math.Abs(f) < 1e30 {
		spellings = append(spellings, strconv.FormatFloat(f, 'f', -1, 64))
	}
	return spellings[r.IntN(len(spellings))]
}

// padMantissa appends zeros to the mantissa of an exponent-form number: 5E-324 becomes 5.000E-324.
func padMantissa(s string) string {
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += "."
	}
	return mant + "000E" + exp
}

func randomASCIIString(r *rand.Rand) string {
	const alphabet = "abcAB_-/\\\"\t\n\x01\x1f\x7f ~{}[]:,0123456789"
	b := make([]byte, r.IntN(8))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	q, _ := json.Marshal(string(b))
	return string(q)
}

func TestMatchesJCSOnRandomASCIIDocuments(t *testing.T) {
	r := rand.New(rand.NewPCG(8785, 1))
	for range 3000 {
		var buf bytes.Buffer
		randomASCIIDoc(&buf, r, 0)
		requireMatchesJCS(t, buf.Bytes())
	}
}
