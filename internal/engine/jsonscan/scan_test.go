package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// agreesWithEncodingJSON fails t where Valid or Compact gives another verdict than encoding/json.
func agreesWithEncodingJSON(t *testing.T, b []byte) {
	t.Helper()
	want := json.Valid(b)
	if got := Valid(b); got != want {
		t.Fatalf("Valid(%q) = %v, json.Valid says %v", b, got, want)
	}
	var c bytes.Buffer
	wantCompact := json.Compact(&c, b) == nil && bytes.Equal(c.Bytes(), b)
	if got := Compact(b); got != wantCompact {
		t.Fatalf("Compact(%q) = %v, json.Compact leaves it unchanged: %v", b, got, wantCompact)
	}
	// Inside an array, as a member of a document is: its depth counts the array too. (A value that
	// is not one alone could still make an array's elements; it is refused.)
	inside := want && json.Valid(append(append([]byte("["), b...), ']'))
	if got, _ := Check(b, 1); got != inside {
		t.Fatalf("Check(%q, 1) = %v, json.Valid of it inside an array says %v", b, got, inside)
	}
}

var seeds = []string{
	``, ` `, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-7`, `1e400`, `12345678901234567890`,
	`-0.0e+00`, `+1`, `0x1`, `NaN`, `true`, `tru`, `truex`, `false`, `null`, `nul`, `nullnull`, `"`, `""`,
	`"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\u00e9\u00E9"`, `"\u00g0"`, `"\u12"`, `"\x"`, "\"\x01\"", "\"\x7f\xff\xfe\"",
	"\"\t\"", `"\ud800"`, `[]`, `[ ]`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, ` [1 , 2] `, `{}`, `{ }`, `{"a":1}`,
	`{"a" : 1 }`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{1:2}`, `{"a":1 "b":2}`, `{"a":[{"b":null}]}`, `[[[]]]`,
	`[1]]`, `{"a":1}}`, `1 2`, "\n1\r\n", "\v1", "\u00a01", `{"a":"<&>"}`, "{\"a\":\"\u2028\"}", `[-]`, `[01]`,
	`[1e5,-2.5E-3,0]`, `"a` + strings.Repeat(`\\`, 3) + `"`,
}

func TestVerdictsAreEncodingJSONs(t *testing.T) {
	for _, s := range seeds {
		agreesWithEncodingJSON(t, []byte(s))
	}
	// encoding/json's depth limit, on either side of it, in arrays and objects.
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		agreesWithEncodingJSON(t, []byte(strings.Repeat("[", depth)+strings.Repeat("]", depth)))
		agreesWithEncodingJSON(t, []byte(strings.Repeat(`{"a":`, depth)+"1"+strings.Repeat("}", depth)))
		agreesWithEncodingJSON(t, []byte(strings.Repeat(`[{"a":`, depth/2)+"1"+strings.Repeat("}]", depth/2)))
	}
	if !Valid([]byte(strings.Repeat("[", maxDepth)+strings.Repeat("]", maxDepth))) ||
		Valid([]byte(strings.Repeat("[", maxDepth+1)+strings.Repeat("]", maxDepth+1))) {
		t.Fatal("the depth limit is not encoding/json's")
	}
}

func FuzzVerdictsAreEncodingJSONs(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { agreesWithEncodingJSON(t, b) })
}

// BenchmarkValid checks one recorded Messages answer (an envelope with text and tool use, 1.3 kB)
// both ways: encoding/json's json.Valid, and this package's Valid. Compare the two.
func BenchmarkValid(b *testing.B) {
	doc := []byte(`{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
		`"content":[{"type":"text","text":"` + strings.Repeat("I will run the tests in pkg/store and fix what fails. ", 16) + `"},` +
		`{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"run_tests","input":{"package":"pkg/store","verbose":true,"timeout":120}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":2095,"output_tokens":503,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`)
	for _, side := range []struct {
		name  string
		valid func([]byte) bool
	}{{"encoding-json", json.Valid}, {"jsonscan", Valid}} {
		b.Run(side.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if !side.valid(doc) {
					b.Fatal("refused")
				}
			}
		})
	}
}
