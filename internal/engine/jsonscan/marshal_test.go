package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"testing"
	"unicode/utf8"
)

type textKey struct{ s string }

func (k textKey) MarshalText() ([]byte, error) { return []byte(k.s), nil }

type inner struct{ Name string }

type outer struct {
	inner
	Items  []inner            `json:"items"`
	Tagged map[string]any     `json:"tagged,omitempty"`
	Ptr    *inner             `json:"ptr"`
	Keys   map[textKey]string `json:"keys"`
	Hidden string             `json:"-"`
	secret string
}

// TestMarshalRefusesInvalidUTF8WhereverItIs: json.Marshal replaces every byte that is not UTF-8 with
// U+FFFD, so "x\xfe" and "x\xff" encode the same. Marshal refuses each such string, wherever the
// value holds it, and names where.
func TestMarshalRefusesInvalidUTF8WhereverItIs(t *testing.T) {
	bad := "ok\xfe"
	cases := []struct {
		name string
		v    any
		path string
	}{
		{"a string", bad, ""},
		{"a field", inner{Name: bad}, ".Name"},
		{"an embedded struct's field", outer{inner: inner{Name: bad}}, ".Name"},
		{"a slice element", outer{Items: []inner{{}, {Name: bad}}}, ".items[1].Name"},
		{"a map value", map[string]any{"a": []any{1, bad}}, `["a"][1]`},
		{"a map key", map[string]int{bad: 1}, `["ok\xfe"]`},
		{"a text key", outer{Keys: map[textKey]string{{bad}: "v"}}, `.keys["ok\xfe"]`},
		{"through a pointer", outer{Ptr: &inner{Name: bad}}, ".ptr.Name"},
		{"through an interface", outer{Tagged: map[string]any{"t": &inner{Name: bad}}}, `.tagged["t"].Name`},
		{"an array", [2]string{"fine", bad}, "[1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := Marshal(tc.v)
			var ie *InvalidUTF8Error
			want := 2
			if !errors.As(err, &ie) || ie.Path != tc.path || ie.Offset != want {
				t.Fatalf("Marshal = %q, %v; want *InvalidUTF8Error at %q byte %d", data, err, tc.path, want)
			}
		})
	}
}

// TestMarshalIsJSONMarshalOtherwise: every value without invalid UTF-8 in what encoding/json
// encodes gets json.Marshal's bytes — U+FFFD itself, the \ufffd escape in raw JSON, bytes of any
// value, and fields json leaves out included.
func TestMarshalIsJSONMarshalOtherwise(t *testing.T) {
	for _, v := range []any{
		"x\uFFFD",
		json.RawMessage(`{"a":"\ufffd"}`),
		[]byte("\xff\xfe"),
		outer{Hidden: "\xff", secret: "\xfe", Items: []inner{{Name: "é"}}},
		map[int]string{1: "one"},
		net.IPv4(10, 0, 0, 1),
		nil,
		json.RawMessage("\"\xff\""), // copied, never repaired: the caller's check of the output refuses it
	} {
		want, _ := json.Marshal(v)
		got, err := Marshal(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Marshal(%#v) = %q, %v; want %q", v, got, err, want)
		}
	}
	// Random strings: refused exactly when they are not UTF-8, and encoded as json.Marshal does.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(8))
		for i := range b {
			b[i] = []byte{'a', '"', '\\', 0xef, 0xbf, 0xbd, 0xff, 0xc3, 0xa9, 0x80}[rng.IntN(10)]
		}
		s := string(b)
		got, err := Marshal(map[string]string{s: s})
		if utf8.ValidString(s) {
			if want, _ := json.Marshal(map[string]string{s: s}); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%q: Marshal = %q, %v; want %q", s, got, err, want)
			}
		} else if err == nil {
			t.Fatalf("%q: Marshal accepted invalid UTF-8 as %q", s, got)
		}
	}
}

// TestCheckUTF8WalksCyclesAndSharedValuesOnce: a value that refers to itself or shares a part is
// walked once, so the check ends (json.Marshal refuses the cycle).
func TestCheckUTF8WalksCyclesAndSharedValuesOnce(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	if err := CheckUTF8(cyclic); err != nil {
		t.Fatal(err)
	}
	shared := &inner{Name: "\xff"}
	var ie *InvalidUTF8Error
	if err := CheckUTF8([]*inner{shared, shared}); !errors.As(err, &ie) || ie.Path != "[0].Name" {
		t.Fatalf("CheckUTF8 = %v, want the first element's name", err)
	}
}
