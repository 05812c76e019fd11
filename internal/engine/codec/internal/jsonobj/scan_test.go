package jsonobj

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// scanSeeds are documents of every shape the walk must get right: nesting, escapes in keys and
// values (a quote or bracket inside a string), whitespace everywhere, duplicates, non-ASCII and
// invalid UTF-8, numbers past 2^53, and documents that are not one object or array.
var scanSeeds = []string{
	`{}`, ` { } `, `[]`, `[ ]`, `{"a":1}`, `{"b":1,"a":{"x":[1,2]},"b":"<&>"}`,
	"{ \"a\" :\t[ 1 , { \"b\" : \"c d\" } ] ,\n\"e\":null }",
	`{"k\"ey":"v}al]ue\\","\u00e9":"\ud83d\ude00","x":"a\"b"}`,
	`{"n":9007199254740993,"f":-1.5e+300,"t":true,"f2":false,"z":null}`,
	`{"é":"ü","🙂":[{"[":"]"}]}`, "{\"bad\xff\":\"v\xfe\"}", `{"a":{"b":{"c":{"d":[[[]]]}}}}`,
	`[1,"two",{"three":3},[4],null]`, `[ {"role":"user","content":"hi"} , {"role":"assistant"} ]`,
	`{"a":1} {"b":2}`, `{"a":1}x`, `{"a"}`, `{"a":}`, `{,}`, `[1,]`, `"s"`, `1`, ``, `{"a":tru}`,
	`{"a":"unterminated}`, `"plain"`, `"esc\"aped"`, "\"bad\xff\"", `"unterminated`, `"a"b"`, `{"a":[1,2}`, "{\"a\":\"\x01\"}",
}

// decodeArray is SplitArray through encoding/json, as the codecs split arrays before the walk:
// the reference the walk is held to.
func decodeArray(raw []byte) ([]json.RawMessage, bool) {
	var items []json.RawMessage
	if Kind(bytes.TrimLeft(raw, " \t\r\n")) != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, false
	}
	for i := range items {
		items[i] = Compact(items[i])
	}
	return items, true
}

// FuzzScanAgreesWithTheDecoder: Parse, String and SplitArray give what encoding/json's decoder gives, for any
// input: the same keys in the same order with the same compact values, the same elements, and an
// error (or false) exactly where the decoder fails.
func FuzzScanAgreesWithTheDecoder(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, gotErr := Parse(raw)
		want, wantErr := decodeObject(raw)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("Parse(%q): error %v, the decoder's %v", raw, gotErr, wantErr)
		}
		if gotErr == nil {
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("Parse(%q) (-decoder +scan):\n%s", raw, d)
			}
		}
		s, ok := String(raw)
		var wantS string
		wantOK := Kind(raw) == '"' && json.Unmarshal(raw, &wantS) == nil
		if ok != wantOK || s != wantS {
			t.Fatalf("String(%q) = %q, %v; the decoder's %q, %v", raw, s, ok, wantS, wantOK)
		}
		items, ok := SplitArray(raw)
		var wantItems []json.RawMessage
		wantOK = json.Valid(raw)
		if wantOK {
			wantItems, wantOK = decodeArray(raw)
		}
		if ok != wantOK {
			t.Fatalf("SplitArray(%q): ok %v, the decoder's %v", raw, ok, wantOK)
		}
		if ok {
			if len(items) == 0 && len(wantItems) == 0 {
				return // [] and nil both say "no elements"
			}
			if d := cmp.Diff(wantItems, items); d != "" {
				t.Fatalf("SplitArray(%q) (-decoder +scan):\n%s", raw, d)
			}
		}
	})
}

// TestAParsedValueCannotOverwriteItsNeighbour: values share one copy of the document, so each is
// capped at its own length; appending to one must not change the next.
func TestAParsedValueCannotOverwriteItsNeighbour(t *testing.T) {
	body := []byte(`{"a":[1],"b":[2]}`)
	o, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := o.Get("a")
	_ = append(a, 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X') // past `,"b":` into b's value, were a not capped
	copy(body, `{"a":[9],"b":[9]}`)                       // nor may the caller's buffer, reused, change them
	if got := string(o.Marshal()); got != `{"a":[1],"b":[2]}` {
		t.Fatalf("after an append to a and a reuse of the body: %s", got)
	}
	items, _ := SplitArray([]byte(`[[1],[2]]`))
	_ = append(items[0], 'X', 'X', 'X') // past the comma into the second element, were it not capped
	if string(items[1]) != `[2]` {
		t.Fatalf("after an append to the first element, the second is %s", items[1])
	}
}
