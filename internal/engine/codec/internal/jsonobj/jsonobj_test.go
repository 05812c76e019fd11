package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestObjectsKeepTheWiresOrderAndValues(t *testing.T) {
	o, err := Parse([]byte(`{ "b" : 1, "a": {"x": [1, 2]}, "b": "<&>" }`))
	if err != nil {
		t.Fatal(err)
	}
	// A duplicate key keeps its first position and its last value, as encoding/json would decode it.
	if got := string(o.Marshal()); got != `{"b":"<&>","a":{"x":[1,2]}}` {
		t.Fatalf("parsed and marshalled: %s", got)
	}
	o.SetAfter("c", Quote("<tag> & more"), "missing", "b")
	o.Set("a", []byte(`null`))
	o.Set("d", []byte(`true`))
	o.Del("b")
	if got, want := string(o.Marshal()), `{"c":"<tag> & more","a":null,"d":true}`; got != want {
		t.Fatalf("edited: %s, want %s", got, want)
	}
	if o.Len() != 3 || o.Index("d") != 2 || o.Index("b") != -1 {
		t.Fatalf("len %d, index of d %d, of b %d", o.Len(), o.Index("d"), o.Index("b"))
	}
	if v, ok := o.Get("a"); !ok || !IsNull(v) || Kind(v) != 'n' {
		t.Fatalf("a = %s, %v", v, ok)
	}
	for raw, want := range map[string]byte{`{}`: '{', `[1]`: '[', `"s"`: '"', `true`: 'b', `-1.5`: '0', ``: 0} {
		if got := Kind([]byte(raw)); got != want {
			t.Errorf("Kind(%q) = %q, want %q", raw, got, want)
		}
	}
	for _, bad := range []string{`[1]`, `"s"`, `{"a":1} {"b":2}`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) accepted what is not one object", bad)
		} else if bad != `{"a":1} {"b":2}` && !errors.Is(err, ErrNotObject) {
			t.Errorf("Parse(%s) = %v, want ErrNotObject", bad, err)
		}
	}
}

// FuzzQuoteIsTheEncoders holds Quote's plain-ASCII shortcut to what the encoder writes without HTML
// escaping, for any string.
func FuzzQuoteIsTheEncoders(f *testing.F) {
	for _, s := range []string{"", "end_turn", "a<b>&c", `say "hi"`, `back\slash`, "tab\there", "\x7f", "\x1f",
		"caf\u00e9", "\u2028\u2029", "bad\xff", "\x00", " ~", "\ud7ff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if want, got := bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), Quote(s); !bytes.Equal(want, got) {
			t.Fatalf("Quote(%q) = %s, the encoder writes %s", s, got, want)
		}
	})
}

// FuzzCompactValidIsValidThenCompact holds CompactValid's one pass to the two it replaces, json.Valid
// and then json.Compact, and to a copy: what it returns never shares raw's bytes.
func FuzzCompactValidIsValidThenCompact(f *testing.F) {
	for _, s := range []string{``, `{}`, ` { "a" : [ 1 , 2 ] } `, `{"a":"<&>\u2028"}`, `[1,]`, `"\ud800"`, "\"\xff\"", `1 2`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := CompactValid(raw)
		if want := json.Valid(raw); ok != want {
			t.Fatalf("CompactValid(%q) says %v, json.Valid %v", raw, ok, want)
		}
		if !ok {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, raw); err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("CompactValid(%q) = %q, json.Compact gives %q (%v)", raw, got, want.Bytes(), err)
		}
		if len(got) > 0 && len(raw) > 0 {
			got[0] ^= 0xff
			if raw[0] == got[0] {
				t.Fatalf("CompactValid(%q) shares raw's bytes", raw)
			}
		}
	})
}
