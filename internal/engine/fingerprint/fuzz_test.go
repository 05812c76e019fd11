package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzCanonicalJSON checks, for any input, that the canonical form is a fixed point that survives a trip
// through encoding/json (numbers as json.Number, which keeps them exact), and that the parser accepts
// exactly what encoding/json accepts.
func FuzzCanonicalJSON(f *testing.F) {
	for _, seed := range []string{
		`{"b":2,"a":1,"c":{"z":[3,2,1],"y":null}}`,
		`[1.0, 1e0, 10e-1, -0, 0.1, 1E21, 1e-7, 5e-324, 1.7976931348623157e308, 123456789012345680000]`,
		`"\u0041\t\u001f\"\\\/<>&\u2028\u00e9\ud83d\ude00"`,
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
		`{"cafe\u0301":"re\u0301sume\u0301","café":0}`,
		`{"model":"claude","max_tokens":1024,"temperature":0.7,"messages":[{"role":"user","content":[{"type":"text","text":"日本語"}]}]}`,
		`{"a":1,"a":2}`,
		`["\ud800"]`,
		`[1e400, 1e-400, 9007199254740993, 1.0000000000000001, 1e99999]`,
		"[\"\xff\"]",
		`{"a":[}`,
		` 42 `,
		`[[[[[[[[[[]]]]]]]]]]`,
		`{"":{"":""}}`,
		"\"\u0344\u0f73\"",            // characters NFC decomposes
		"{\"\u212b\":1,\"\u00c5\":2}", // keys that collide under NFC
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := CanonicalizeJSON(in)
		checkAgreesWithEncodingJSON(t, in, err)
		if err != nil {
			return
		}

		again, err := CanonicalizeJSON(out)
		if err != nil {
			t.Fatalf("canonical output does not canonicalize: %v\n%s", err, out)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\nonce  %s\ntwice %s", out, again)
		}

		var v any
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("encoding/json cannot parse the output: %v\n%s", err, out)
		}
		remarshalled, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("encoding/json cannot marshal the parsed output: %v", err)
		}
		fromJSON, err := CanonicalizeJSON(remarshalled)
		if err != nil || !bytes.Equal(fromJSON, out) {
			t.Fatalf("re-canonicalizing %s gives %s, %v; want %s", remarshalled, fromJSON, err, out)
		}
		fromValue, err := Canonicalize(v)
		if err != nil || !bytes.Equal(fromValue, out) {
			t.Fatalf("Canonicalize of the parsed value gives %s, %v; want %s", fromValue, err, out)
		}
	})
}

// checkAgreesWithEncodingJSON requires a SyntaxError exactly for the inputs encoding/json rejects. A
// well-formed document may still fail for reasons encoding/json does not check.
func checkAgreesWithEncodingJSON(t *testing.T, in []byte, err error) {
	t.Helper()
	var syntax *SyntaxError
	isSyntax := errors.As(err, &syntax)
	if valid := json.Valid(in); valid == isSyntax {
		t.Fatalf("json.Valid = %v but err = %v", valid, err)
	}
	if isSyntax && (syntax.Offset < 0 || syntax.Offset > int64(len(in))) {
		t.Fatalf("offset %d outside the %d-byte input", syntax.Offset, len(in))
	}
	var dup *DuplicateKeyError
	var utf *InvalidUTF8Error
	var numRange *NumberRangeError
	if err != nil && !isSyntax && !errors.As(err, &dup) && !errors.As(err, &utf) && !errors.As(err, &numRange) {
		t.Fatalf("unexpected error type %T: %v", err, err)
	}
}
