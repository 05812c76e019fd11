package fingerprint

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

func mustCanonicalJSON(t *testing.T, doc string) string {
	t.Helper()
	out, err := CanonicalizeJSON([]byte(doc))
	if err != nil {
		t.Fatalf("CanonicalizeJSON(%q): %v", doc, err)
	}
	return string(out)
}

func TestCanonicalizeJSONGoldenOutput(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{
			name: "keys sorted recursively, whitespace dropped",
			doc:  ` { "b" : 2, "a" : 1, "c" : { "z" : [3, 2, 1], "y" : null } } `,
			want: `{"a":1,"b":2,"c":{"y":null,"z":[3,2,1]}}`,
		},
		{
			// RFC 8785 rounds 333333333.33333329 to the nearest double, 333333333.3333333; its value is
			// another number, so here it keeps its digits. The rest is the RFC's expected output.
			name: "RFC 8785 section 3.2.4 example, numbers exact",
			doc: `{
			  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
			  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
			  "literals": [null, true, false]
			}`,
			want: `{"literals":[null,true,false],"numbers":[333333333.33333329,1e+30,4.5,0.002,1e-27],` +
				`"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			name: "numbers in every spelling",
			doc:  `[1.0, 1e0, 10e-1, -0, -0.0, 0.1, 1E21, 1e-7, 1e20, 0.000001, 9007199254740993, -1.5e+300]`,
			want: `[1,1,1,0,0,0.1,1e+21,1e-7,100000000000000000000,0.000001,9007199254740993,-1.5e+300]`,
		},
		{
			name: "numbers no double holds keep their exact digits",
			doc: `[1234567890123456789, 12345678901234567890123, 1.0000000000000001, 1e-400, -2.5E+400, 0.00000123456789012345678,` +
				` 123456789012345678901.5, 1152921504606846976, 1e-7000, 0.0000012300]`,
			want: `[1234567890123456789,1.2345678901234567890123e+22,1.0000000000000001,1e-400,-2.5e+400,0.00000123456789012345678,` +
				`123456789012345678901.5,1152921504606846976,1e-7000,0.00000123]`,
		},
		{
			name: "only quote, backslash and controls are escaped",
			doc:  `"\u0041\t\b\f\n\r\u001f\u007f\"\\\/<>&\u2028\u00e9\ud83d\ude00"`,
			want: "\"A\\t\\b\\f\\n\\r\\u001f\u007f\\\"\\\\/<>&\u2028é😀\"",
		},
		{
			// RFC 8785 section 3.2.3 sorts U+FB33 last, but it is a composition exclusion: NFC turns it
			// into U+05D3 U+05BC, which sorts before U+20AC.
			name: "RFC 8785 sort example, with NFC",
			doc: `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh",` +
				`"1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\"," +
				"\"\u05d3\u05bc\":\"Hebrew Letter Dalet With Dagesh\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\"}",
		},
		{
			// UTF-16 puts U+1F600 (surrogates D83D DE00) before U+FB01; code point order would not.
			name: "supplementary characters sort before U+E000-U+FFFF",
			doc:  `{"\ufb01":1,"\ud83d\ude00":2,"\ue000":3,"z":4}`,
			want: "{\"z\":4,\"😀\":2,\"\ue000\":3,\"\ufb01\":1}",
		},
		{
			name: "NFD text is composed",
			doc:  `{"cafe\u0301":"re\u0301sume\u0301"}`,
			want: `{"café":"résumé"}`,
		},
		{
			name: "empty containers and scalars at top level",
			doc:  `[{}, [], "", 0, {"a":[]}]`,
			want: `[{},[],"",0,{"a":[]}]`,
		},
		{name: "top-level scalar with surrounding whitespace", doc: " \n\t 42 \r\n", want: `42`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustCanonicalJSON(t, tt.doc); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestNumbersFormatLikeECMAScript(t *testing.T) {
	tests := []struct {
		in   float64
		want string // what JavaScript's String(x) prints
	}{
		{1e21, "1e+21"},
		{1e-7, "1e-7"},
		{0.1, "0.1"},
		{123456789012345680000, "123456789012345680000"},
		{5e-324, "5e-324"},
		{1.7976931348623157e308, "1.7976931348623157e+308"},
		{100, "100"},
		{1e6, "1000000"},
		{-1.5, "-1.5"},
		{1.5e-7, "1.5e-7"},
		{0.000001, "0.000001"},
		{1e20, "100000000000000000000"},
		{-1e-300, "-1e-300"},
		{1 << 53, "9007199254740992"},
		{1<<53 + 2, "9007199254740994"},
		{0.30000000000000004, "0.30000000000000004"}, // 0.1+0.2 at run time; Go constants would fold it to 0.3
		{math.Copysign(0, -1), "0"},
		// RFC 8785 appendix B.
		{math.Float64frombits(0x0000000000000001), "5e-324"},
		{math.Float64frombits(0x8000000000000001), "-5e-324"},
		{math.Float64frombits(0x7fefffffffffffff), "1.7976931348623157e+308"},
		{math.Float64frombits(0xffefffffffffffff), "-1.7976931348623157e+308"},
		{math.Float64frombits(0x4340000000000000), "9007199254740992"},
		{math.Float64frombits(0xc340000000000000), "-9007199254740992"},
		{math.Float64frombits(0x4430000000000000), "295147905179352830000"},
		{math.Float64frombits(0x44b52d02c7e14af5), "9.999999999999997e+22"},
		{math.Float64frombits(0x44b52d02c7e14af6), "1e+23"},
		{math.Float64frombits(0x44b52d02c7e14af7), "1.0000000000000001e+23"},
		{math.Float64frombits(0x444b1ae4d6e2ef4e), "999999999999999700000"},
		{math.Float64frombits(0x444b1ae4d6e2ef4f), "999999999999999900000"},
		{math.Float64frombits(0x444b1ae4d6e2ef50), "1e+21"},
		{math.Float64frombits(0x3eb0c6f7a0b5ed8c), "9.999999999999997e-7"},
		{math.Float64frombits(0x3eb0c6f7a0b5ed8d), "0.000001"},
		{math.Float64frombits(0x41b3de4355555553), "333333333.3333332"},
		{math.Float64frombits(0x41b3de4355555554), "333333333.33333325"},
		{math.Float64frombits(0x41b3de4355555555), "333333333.3333333"},
		{math.Float64frombits(0x41b3de4355555556), "333333333.3333334"},
		{math.Float64frombits(0x41b3de4355555557), "333333333.33333343"},
		{math.Float64frombits(0xbecbf647612f3696), "-0.0000033333333333333333"},
		{math.Float64frombits(0x43143ff3c1cb0959), "1424953923781206.2"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			out, err := Canonicalize(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("Canonicalize(%v) = %s, want %s", tt.in, out, tt.want)
			}
			// The ES form is itself a JSON number and must come back unchanged from a document.
			if got := mustCanonicalJSON(t, tt.want); got != tt.want {
				t.Errorf("CanonicalizeJSON(%s) = %s", tt.want, got)
			}
		})
	}
}

func TestCompareUTF16MatchesCodeUnitOrder(t *testing.T) {
	pool := []rune{'a', 'b', 'z', 0x7f, 0x80, 'é', 0x7ff, 0x800, 'ö', '€', 0xd7ff, 0xe000, 0xfb33, 0xfffd, 0xffff,
		0x10000, 0x1f600, 0x1f601, 0x10ffff}
	r := rand.New(rand.NewPCG(1, 2))
	randomString := func() string {
		rs := make([]rune, r.IntN(4))
		for i := range rs {
			rs[i] = pool[r.IntN(len(pool))]
		}
		return string(rs)
	}
	reference := func(a, b string) int {
		return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
	}
	for range 20000 {
		a, b := randomString(), randomString()
		if got, want := compareUTF16(a, b), reference(a, b); got != want {
			t.Fatalf("compareUTF16(%+q, %+q) = %d, want %d", a, b, got, want)
		}
	}
}

func TestCanonicalizeGoValuesMatchesTheirJSON(t *testing.T) {
	type role string
	type block struct {
		Type  string         `json:"type"`
		Text  string         `json:"text,omitempty"`
		Input map[string]any `json:"input,omitempty"`
	}
	type request struct {
		Model       string  `json:"model"`
		MaxTokens   int     `json:"max_tokens"`
		Temperature float32 `json:"temperature"`
		Blocks      []block `json:"blocks"`
		Role        role    `json:"role"`
	}
	str := "pointed"
	tests := []struct {
		name string
		v    any
	}{
		{"nil", nil},
		{"struct with tags, omitempty and float32", request{Model: "m", MaxTokens: 1024, Temperature: 0.7,
			Blocks: []block{{Type: "text", Text: "hi"}, {Type: "tool_use", Input: map[string]any{"q": "x"}}}, Role: "user"}},
		{"pointer to struct", &request{Model: "p"}},
		{"map of any", map[string]any{"b": []any{1, "x", nil, true}, "a": map[string]any{"k": 1.5}}},
		{"typed map and slice", map[string][]int{"z": {3, 1}, "a": nil}},
		{"map with int keys", map[int]string{10: "ten", 2: "two"}},
		{"bytes become base64", []byte("hello")},
		{"array of bytes stays an array", [3]byte{1, 2, 3}},
		{"time marshals itself", time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)},
		{"pointer to string", &str},
		{"nil map and nil slice", map[string]any{"m": map[string]any(nil), "s": []any(nil), "p": (*int)(nil)}},
		{"json.Number and RawMessage", map[string]any{"n": json.Number("1.50"), "r": json.RawMessage(`{"y":1,"x":[2]}`)}},
		{"float32 keeps its short form", []any{float32(0.1), float32(16777216), float32(1e-8)}},
		{"large integers stay exact", []any{int64(9007199254740993), uint64(math.MaxUint64), int8(-8)}},
		{"named string and bool kinds", map[role]role{"r": "user"}},
		{"non-ASCII", map[string]any{"日本": "テキスト", "ö": "é"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			data, err := json.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			want := mustCanonicalJSON(t, string(data))
			if string(got) != want {
				t.Errorf("Canonicalize = %s\nvia encoding/json = %s", got, want)
			}
		})
	}
}

func TestCanonicalizeRawMessageAtTopLevelIsTheDocument(t *testing.T) {
	doc := `{"b":[1.0,"x"],"a":null}`
	got, err := Canonicalize(json.RawMessage(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := mustCanonicalJSON(t, doc); string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestOutputIsNotAliasedToInput(t *testing.T) {
	doc := []byte(`{"a":"text"}`)
	out, err := CanonicalizeJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	copy(doc, strings.Repeat("x", len(doc)))
	if string(out) != `{"a":"text"}` {
		t.Errorf("output changed with the input: %s", out)
	}
}
