package fingerprint

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func mustOfJSON(t *testing.T, doc string, opts Options) string {
	t.Helper()
	fp, err := OfJSON([]byte(doc), opts)
	if err != nil {
		t.Fatalf("OfJSON(%q): %v", doc, err)
	}
	return fp
}

// sampleRequest is a nested request with objects in arrays in objects, the shape key order matters in.
func sampleRequest() map[string]any {
	return map[string]any{
		"model":      "claude-sonnet-4-5",
		"max_tokens": 1024.0,
		"system":     "You are terse.",
		"params":     map[string]any{"temperature": 0.7, "top_p": 0.9, "metadata": map[string]any{"user_id": "u-1", "trace": "t-9"}},
		"messages": []any{
			map[string]any{"role": "user", "content": "Find the café"},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": "Searching."},
				map[string]any{"type": "tool_use", "id": "toolu_1", "name": "search", "input": map[string]any{"q": "café", "limit": 5.0}},
			}},
		},
		"tools": []any{map[string]any{"name": "search", "input_schema": map[string]any{
			"type": "object", "required": []any{"q"},
			"properties": map[string]any{"q": map[string]any{"type": "string"}, "limit": map[string]any{"type": "integer"}},
		}}},
	}
}

// writeShuffled writes v as JSON with object keys in random order and random insignificant whitespace.
func writeShuffled(buf *bytes.Buffer, v any, r *rand.Rand) {
	space := func() { buf.WriteString([]string{"", " ", "\n  ", "\t"}[r.IntN(4)]) }
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			space()
			writeShuffled(buf, k, r)
			space()
			buf.WriteByte(':')
			space()
			writeShuffled(buf, x[k], r)
		}
		space()
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			space()
			writeShuffled(buf, e, r)
		}
		buf.WriteByte(']')
	default:
		data, _ := json.Marshal(x)
		buf.Write(data)
	}
}

func TestKeyOrderDoesNotChangeFingerprint(t *testing.T) {
	req := sampleRequest()
	want, err := Of(req, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(42, 7))
	seen := map[string]bool{}
	for i := range 500 {
		var buf bytes.Buffer
		writeShuffled(&buf, req, r)
		seen[buf.String()] = true
		if got := mustOfJSON(t, buf.String(), Options{}); got != want {
			t.Fatalf("permutation %d hashes %s, want %s:\n%s", i, got, want, buf.String())
		}
	}
	if len(seen) < 400 {
		t.Fatalf("only %d distinct permutations were tried", len(seen))
	}

	req["params"].(map[string]any)["top_p"] = 0.91
	if changed, _ := Of(req, Options{}); changed == want {
		t.Error("changing a value did not change the fingerprint")
	}
}

func TestLogicallyEqualDocumentsHashEqual(t *testing.T) {
	groups := []struct {
		name string
		docs []string
	}{
		{"one", []string{`{"n":1}`, `{"n":1.0}`, `{"n":1e0}`, `{"n":10e-1}`, `{"n":0.1E+1}`, `{"n":100e-2}`, `{"n":1.000000000000000000000}`}},
		{"zero", []string{`{"n":0}`, `{"n":-0}`, `{"n":-0.0}`, `{"n":0e10}`, `{"n":0e-99999999999}`, `{"n":0.000}`}},
		{"a tenth", []string{`{"n":0.1}`, `{"n":1e-1}`, `{"n":0.10000000000000000000}`, `{"n":100E-3}`}},
		{"NFC value", []string{`{"s":"café"}`, `{"s":"cafe\u0301"}`, "{\"s\":\"cafe\u0301\"}", `{"s":"caf\u00e9"}`}},
		{"NFC key", []string{`{"café":1}`, `{"cafe\u0301":1}`, "{\"cafe\u0301\":1}"}},
		{"escapes", []string{`{"s":"a/b"}`, `{"s":"a\/b"}`, `{"s":"\u0061/\u0062"}`}},
	}
	var firsts []string
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			want := mustOfJSON(t, g.docs[0], Options{})
			for _, doc := range g.docs[1:] {
				if got := mustOfJSON(t, doc, Options{}); got != want {
					t.Errorf("%s hashes differently from %s", doc, g.docs[0])
				}
			}
			firsts = append(firsts, want)
		})
	}
	// The groups themselves must stay apart, or the test above proves nothing.
	for i := range firsts {
		for j := i + 1; j < len(firsts); j++ {
			if firsts[i] == firsts[j] {
				t.Errorf("groups %s and %s hash equal", groups[i].name, groups[j].name)
			}
		}
	}
}

func TestGoNumberTypesHashEqual(t *testing.T) {
	want, err := Of(map[string]any{"n": 1.0}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{1, int8(1), uint64(1), float32(1), json.Number("1.0"), json.Number("10e-1"), json.RawMessage("1e0")} {
		got, err := Of(map[string]any{"n": v}, Options{})
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if got != want {
			t.Errorf("1 as %T hashes differently", v)
		}
	}
	if two, _ := Of(map[string]any{"n": 2}, Options{}); two == want {
		t.Error("2 hashes like 1")
	}
}

func TestOfMatchesOfJSON(t *testing.T) {
	req := sampleRequest()
	doc, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Mode: Structural, VolatilePaths: []string{"params.metadata"}, Redact: strings.ToUpper}
	fromValue, err := Of(req, opts)
	if err != nil {
		t.Fatal(err)
	}
	fromRaw, err := Of(json.RawMessage(doc), opts)
	if err != nil {
		t.Fatal(err)
	}
	if fromDoc := mustOfJSON(t, string(doc), opts); fromValue != fromDoc || fromRaw != fromDoc {
		t.Errorf("Of(value) = %s, Of(RawMessage) = %s, OfJSON = %s", fromValue, fromRaw, fromDoc)
	}
}

var anthropicKey = regexp.MustCompile(`sk-ant-[A-Za-z0-9_-]+`)

func redactAnthropicKeys(s string) string {
	return anthropicKey.ReplaceAllString(s, "[REDACTED:anthropic-api-key]")
}

func TestRedactMakesDifferentSecretsHashEqual(t *testing.T) {
	docA := `{"messages":[{"role":"user","content":"use key sk-ant-api03-AAAAaaaa_1111 please"}],"headers":{"x-api-key":"sk-ant-api03-AAAAaaaa_1111"}}`
	docB := `{"messages":[{"role":"user","content":"use key sk-ant-api03-ZZZZzzzz-9999 please"}],"headers":{"x-api-key":"sk-ant-api03-ZZZZzzzz-9999"}}`

	if mustOfJSON(t, docA, Options{}) == mustOfJSON(t, docB, Options{}) {
		t.Fatal("different secrets hash equal without Redact")
	}
	withRedact := Options{Redact: redactAnthropicKeys}
	if mustOfJSON(t, docA, withRedact) != mustOfJSON(t, docB, withRedact) {
		t.Error("different secrets hash differently with Redact")
	}
	docC := strings.Replace(docB, "please", "now", 1)
	if mustOfJSON(t, docA, withRedact) == mustOfJSON(t, docC, withRedact) {
		t.Error("Redact hid a difference outside the secret")
	}
}

func TestRedactSeesStringLeavesOnlyInNFC(t *testing.T) {
	var seen []string
	record := func(s string) string {
		seen = append(seen, s)
		return strings.ToUpper(s)
	}
	fp := mustOfJSON(t, `{"key":"cafe\u0301","n":1,"b":true,"z":null,"list":["x"]}`, Options{Redact: record})
	if want := `café x`; strings.Join(seen, " ") != want {
		t.Errorf("Redact saw %q, want %q (string leaves in canonical order, NFC, no keys)", seen, want)
	}
	// ToUpper of "café" is "CAFÉ"; keys stay lowercase.
	if want := mustOfJSON(t, `{"key":"CAFÉ","n":1,"b":true,"z":null,"list":["X"]}`, Options{}); fp != want {
		t.Error("the redacted document does not hash like its redacted text")
	}
}

func TestRedactOutputIsNormalized(t *testing.T) {
	decompose := func(s string) string { return strings.ReplaceAll(s, "é", "e\u0301") }
	if mustOfJSON(t, `["café"]`, Options{Redact: decompose}) != mustOfJSON(t, `["café"]`, Options{}) {
		t.Error("a Redact result in NFD was not composed again")
	}
}

func TestStructuralModeIgnoresVolatileLeaves(t *testing.T) {
	base := `{"model":"m","params":{"temperature":0.7,"metadata":{"user_id":"u-1","tags":["a","b"]}},` +
		`"messages":[{"id":"msg_1","content":[{"type":"text","text":"hi","cache":{"ttl":5}}]},{"id":"msg_2","content":"plain"}]}`
	tests := []struct {
		name    string
		paths   []string
		variant string // base with something changed
		equal   bool   // in Structural mode
	}{
		{"leaf value", []string{"params.temperature"}, strings.Replace(base, "0.7", "0.2", 1), true},
		{"leaf type may change too", []string{"params.temperature"}, strings.Replace(base, "0.7", `"warm"`, 1), true},
		{"object path masks all leaves below", []string{"params.metadata"}, strings.Replace(strings.Replace(base, "u-1", "u-2", 1), `"b"`, `"c"`, 1), true},
		{"path through arrays visits every element", []string{"messages.id"}, strings.Replace(strings.Replace(base, "msg_1", "msg_9", 1), "msg_2", "msg_8", 1), true},
		{"path through nested arrays", []string{"messages.content.cache.ttl"}, strings.Replace(base, `"ttl":5`, `"ttl":60`, 1), true},
		{"path ending at an array masks its elements", []string{"params.metadata.tags"}, strings.Replace(base, `["a","b"]`, `["x","y"]`, 1), true},
		{"several paths", []string{"params.temperature", "messages.id"}, strings.Replace(strings.Replace(base, "0.7", "1", 1), "msg_1", "msg_0", 1), true},
		{"keys are not masked", []string{"params.metadata"}, strings.Replace(base, `"user_id"`, `"account_id"`, 1), false},
		{"array length is not masked", []string{"params.metadata.tags"}, strings.Replace(base, `["a","b"]`, `["a"]`, 1), false},
		{"other fields still count", []string{"params.temperature"}, strings.Replace(base, `"model":"m"`, `"model":"n"`, 1), false},
		{"missing paths are ignored", []string{"params.nope", "model.deeper", "messages.content.nope"}, strings.Replace(base, "0.7", "0.2", 1), false},
		{"path stops at a scalar where more is named", []string{"messages.content.text"}, strings.Replace(base, "plain", "other", 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			structural := Options{Mode: Structural, VolatilePaths: tt.paths}
			a, b := mustOfJSON(t, base, structural), mustOfJSON(t, tt.variant, structural)
			if (a == b) != tt.equal {
				t.Errorf("Structural: equal = %v, want %v", a == b, tt.equal)
			}
			strict := Options{Mode: Strict, VolatilePaths: tt.paths}
			if mustOfJSON(t, base, strict) == mustOfJSON(t, tt.variant, strict) {
				t.Error("Strict mode ignored a change")
			}
		})
	}
}

func TestStructuralMaskIsTheNULString(t *testing.T) {
	got := mustOfJSON(t, `{"a":{"b":[1,{"c":true}],"d":null},"e":2}`, Options{Mode: Structural, VolatilePaths: []string{"a"}})
	if want := Sum([]byte(`{"a":{"b":["\u0000",{"c":"\u0000"}],"d":"\u0000"},"e":2}`)); got != want {
		t.Errorf("got %s, want the hash of the masked canonical form %s", got, want)
	}
}

func TestStructuralPathsMatchNFCKeys(t *testing.T) {
	opts := Options{Mode: Structural, VolatilePaths: []string{"cafe\u0301"}}
	if mustOfJSON(t, `{"café":1}`, opts) != mustOfJSON(t, `{"café":2}`, opts) {
		t.Error("an NFD path did not match an NFC key")
	}
}

func TestEmptyModeIsStrict(t *testing.T) {
	doc := `{"params":{"temperature":0.7}}`
	paths := []string{"params.temperature"}
	if mustOfJSON(t, doc, Options{VolatilePaths: paths}) != mustOfJSON(t, doc, Options{Mode: Strict}) {
		t.Error(`Mode "" differs from Strict`)
	}
}

func TestUnknownModeIsAnError(t *testing.T) {
	_, err := OfJSON([]byte(`{}`), Options{Mode: "fuzzy"})
	if err == nil || !strings.Contains(err.Error(), `unknown mode "fuzzy"`) {
		t.Errorf("OfJSON: err = %v", err)
	}
	if _, err := Of(map[string]any{}, Options{Mode: "STRICT"}); err == nil {
		t.Error("Of accepted an unknown mode")
	}
}

func TestSumIsLowercaseHexSHA256(t *testing.T) {
	tests := map[string]string{
		"":    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	}
	for in, want := range tests {
		if got := Sum([]byte(in)); got != want {
			t.Errorf("Sum(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestFingerprintIsSumOfCanonicalForm(t *testing.T) {
	doc := `{"b":1.0,"a":"x"}`
	if got, want := mustOfJSON(t, doc, Options{}), Sum([]byte(`{"a":"x","b":1}`)); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestFingerprintIsStableAcrossCalls(t *testing.T) {
	// A golden hash, computed independently (Python hashlib over the canonical text): if it changes,
	// every recorded session stops matching.
	const want = "892cf32cce1febf8cda18733c6481ce7da2e981bddf64d3a58403bae414ff624"
	doc := `{"model":"m","messages":[{"role":"user","content":"caf\u00e9"}],"max_tokens":1024,"temperature":0.7}`
	got := mustOfJSON(t, doc, Options{})
	if again := mustOfJSON(t, doc, Options{}); again != got {
		t.Fatal("two calls disagree")
	}
	if got != want {
		t.Errorf("golden fingerprint changed: got %s, want %s", got, want)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(got) {
		t.Errorf("not 64 lowercase hex chars: %s", got)
	}
}
