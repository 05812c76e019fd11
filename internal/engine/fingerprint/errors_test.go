package fingerprint

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// canonicalizeAny runs one input through the function that takes it: a string goes to CanonicalizeJSON, a Go
// value to Canonicalize.
func canonicalizeAny(in any) error {
	if doc, ok := in.(string); ok {
		_, err := CanonicalizeJSON([]byte(doc))
		return err
	}
	_, err := Canonicalize(in)
	return err
}

func TestNonFiniteNumbersAreRejectedWithTheirPath(t *testing.T) {
	tests := []struct {
		name     string
		in       any
		wantPath string
		wantMsg  string
	}{
		{"NaN in a nested map", map[string]any{"params": map[string]any{"temperature": math.NaN()}}, "$.params.temperature",
			"fingerprint: $.params.temperature: NaN is not valid JSON (only finite numbers can be fingerprinted)"},
		{"+Inf in an array", map[string]any{"messages": []any{1, 2, math.Inf(1)}}, "$.messages[2]",
			"fingerprint: $.messages[2]: +Inf is not valid JSON (only finite numbers can be fingerprinted)"},
		{"-Inf float32 in a typed map", map[string]float32{"x": float32(math.Inf(-1))}, "$.x", ""},
		{"NaN inside a struct is reported at the struct", map[string]any{"s": struct{ F float64 }{math.NaN()}}, "$.s", ""},
		{"odd key names are quoted", map[string]any{"content-type": math.NaN()}, `$["content-type"]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *NonFiniteError
			checkPathError(t, canonicalizeAny(tt.in), &e, func() string { return e.Path }, tt.wantPath, tt.wantMsg)
		})
	}
}

func TestDuplicateKeysAreRejected(t *testing.T) {
	tests := []struct {
		name     string
		in       any
		wantPath string
		wantKey  string
	}{
		{"literal duplicate in a nested object", `{"a":{"x":1,"y":2,"x":3}}`, "$.a", "x"},
		{"duplicate inside an array element", `[{}, {"k":1,"k":1}]`, "$[1]", "k"},
		{"keys equal after NFC in a document", `{"café":1,"cafe\u0301":2}`, "$", "café"},
		{"keys equal after escaping", `{"a":1,"\u0061":2}`, "$", "a"},
		{"keys equal after NFC in a Go map", map[string]any{"m": map[string]any{"caf\u00e9": 1, "cafe\u0301": 2}}, "$.m", "café"},
		{"keys equal after NFC in a typed map", map[string]int{"\u212b": 1, "\u00c5": 2}, "$", "\u00c5"}, // ANGSTROM SIGN
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *DuplicateKeyError
			err := canonicalizeAny(tt.in)
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *DuplicateKeyError", err, err)
			}
			if e.Path != tt.wantPath || e.Key != tt.wantKey {
				t.Errorf("Path, Key = %q, %q; want %q, %q", e.Path, e.Key, tt.wantPath, tt.wantKey)
			}
			if !strings.Contains(err.Error(), "duplicate key") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestSyntaxErrorsReportTheOffendingOffset(t *testing.T) {
	tests := []struct {
		name       string
		doc        string
		wantOffset int64
		wantMsg    string // substring
	}{
		{"empty document", ``, 0, "unexpected end"},
		{"only whitespace", "  \n", 3, "unexpected end"},
		{"trailing comma in object", `{"a":1,}`, 7, "looking for beginning of object key"},
		{"trailing comma in array", `[1,]`, 3, "looking for beginning of value"},
		{"missing comma", `[1 2]`, 3, "after array element"},
		{"missing colon", `{"a" 1}`, 5, "after object key"},
		{"unquoted key", `{a:1}`, 1, "looking for beginning of object key"},
		{"truncated literal", `tru`, 3, "unexpected end"},
		{"misspelled literal", `[nul1]`, 4, "in literal null"},
		{"unterminated string", `"abc`, 4, "unexpected end"},
		{"raw newline in string", "\"a\nb\"", 2, "in string literal"},
		{"unknown escape", `"a\x"`, 3, "in string escape code"},
		{"bad unicode escape", `"\u12g4"`, 5, "hexadecimal"},
		{"leading zero", `01`, 1, "after top-level value"},
		{"bare minus", `-`, 1, "unexpected end"},
		{"minus without digits", `-x`, 1, "in numeric literal"},
		{"fraction without digits", `1.e5`, 2, "after decimal point"},
		{"exponent without digits", `1e+`, 3, "unexpected end"},
		{"plus sign", `+1`, 0, "looking for beginning of value"},
		{"trailing data", `{"a":1} x`, 8, "after top-level value"},
		{"two documents", `{} {}`, 3, "after top-level value"},
		{"NaN literal", `[NaN]`, 1, "looking for beginning of value"},
		{"byte-order mark", "\ufeff{}", 0, "byte 0xef"},
		{"non-ASCII outside strings", "[1,\u00a0 2]", 3, "byte 0xc2"},
		{"single quotes", `{'a':1}`, 1, `'\''`},
		{"nesting beyond the limit", strings.Repeat("[", maxDepth+1), maxDepth, "nesting depth"},
		{"syntax beats a duplicate key seen earlier", `{"a":1,"a":2`, 12, "unexpected end"},
		{"syntax beats an unpaired surrogate seen earlier", `["\ud800",]`, 10, "looking for beginning of value"},
		{"syntax beats an overflow seen earlier", `[1e999 1]`, 7, "after array element"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *SyntaxError
			_, err := CanonicalizeJSON([]byte(tt.doc))
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *SyntaxError", err, err)
			}
			if e.Offset != tt.wantOffset {
				t.Errorf("Offset = %d, want %d (%v)", e.Offset, tt.wantOffset, err)
			}
			if !strings.Contains(e.Msg, tt.wantMsg) {
				t.Errorf("Msg = %q, want it to mention %q", e.Msg, tt.wantMsg)
			}
			if json.Valid([]byte(tt.doc)) {
				t.Error("encoding/json accepts this document")
			}
		})
	}
}

func TestNestingUpToTheLimitIsAccepted(t *testing.T) {
	doc := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	out, err := CanonicalizeJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != doc {
		t.Error("deeply nested arrays changed")
	}
}

func TestSyntaxErrorMessage(t *testing.T) {
	_, err := CanonicalizeJSON([]byte(`{"a":1,}`))
	if want := `fingerprint: invalid JSON at byte offset 7: invalid character '}' looking for beginning of object key string`; err == nil || err.Error() != want {
		t.Errorf("Error() = %v\nwant      %s", err, want)
	}
}

func TestEmbeddedDocumentErrorsNameTheirPath(t *testing.T) {
	tests := []struct {
		name       string
		v          any
		wantOffset int64
		wantIn     string
	}{
		{"RawMessage", map[string]any{"tools": []any{json.RawMessage(`{"x":}`)}}, 5, "fingerprint: $.tools[0]: invalid JSON at byte offset 5 of the embedded document"},
		{"empty RawMessage", map[string]any{"r": json.RawMessage{}}, 0, "$.r: invalid JSON at byte offset 0"},
		{"json.Number with junk", map[string]any{"n": json.Number("1x")}, 1, "$.n: invalid JSON at byte offset 1"},
		{"json.Number that is a string", map[string]any{"n": json.Number(`"1"`)}, 0, "json.Number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *SyntaxError
			_, err := Canonicalize(tt.v)
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *SyntaxError", err, err)
			}
			if e.Offset != tt.wantOffset || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("Offset = %d, Error() = %q; want %d and %q", e.Offset, err.Error(), tt.wantOffset, tt.wantIn)
			}
		})
	}
}

func TestErrorsInsideEmbeddedDocumentsHaveFullPaths(t *testing.T) {
	_, err := Canonicalize(map[string]any{"tools": []any{json.RawMessage(`{"schema":{"max":1e99999}}`)}})
	var e *NumberRangeError
	if !errors.As(err, &e) || e.Path != "$.tools[0].schema.max" {
		t.Errorf("err = %v, want a NumberRangeError at $.tools[0].schema.max", err)
	}
}

func TestNumbersBeyondTheExponentBoundAreRejectedWithTheirPath(t *testing.T) {
	tests := []struct {
		name     string
		in       any
		wantPath string
		wantMsg  string
	}{
		{"huge exponent in a document", `{"a":[0, 1e999999999]}`, "$.a[1]",
			"fingerprint: $.a[1]: number 1e999999999 is out of range (only exponents within ±9999 can be fingerprinted)"},
		{"tiny exponent", `-1.5e-10001`, "$", ""},
		{"exponent too long for any integer", `[1e99999999999999999999999999999]`, "$[0]", ""},
		{"just past the bound", `1e10000`, "$", ""},
		{"the bound reached by leading zeros", `0.` + strings.Repeat("0", 9999) + `1`, "$", ""},
		{"json.Number", map[string]any{"n": json.Number("2e-10000")}, "$.n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *NumberRangeError
			checkPathError(t, canonicalizeAny(tt.in), &e, func() string { return e.Path }, tt.wantPath, tt.wantMsg)
		})
	}
	for _, ok := range []string{`1e9999`, `9.99e9999`, `1e-9999`, `0e99999999999999999999`, `-0.0e-99999`} {
		if _, err := CanonicalizeJSON([]byte(ok)); err != nil {
			t.Errorf("%s: %v, want it accepted", ok, err)
		}
	}
}

func TestUnsupportedTypesAreRejected(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	tests := []struct {
		name     string
		v        any
		wantPath string
		wantType string
	}{
		{"func in a map", map[string]any{"callback": func() {}}, "$.callback", "func()"},
		{"channel in an array", map[string]any{"tools": []any{"ok", make(chan int)}}, "$.tools[1]", "chan int"},
		{"complex number at the top", complex(1, 2), "$", "complex128"},
		{"channel inside a struct is reported at the struct", map[string]any{"s": struct{ C chan int }{}}, "$.s", "chan int"},
		{"typed slice of funcs", []func(){nil}, "$[0]", "func()"},
		{"cyclic map", cyclic, "$" + strings.Repeat(".self", maxDepth), "map[string]interface {}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *UnsupportedTypeError
			_, err := Canonicalize(tt.v)
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *UnsupportedTypeError", err, err)
			}
			if e.Path != tt.wantPath || e.Type != tt.wantType {
				t.Errorf("Path, Type = %.60q, %q; want %.60q, %q", e.Path, e.Type, tt.wantPath, tt.wantType)
			}
		})
	}
	_, err := Canonicalize(map[string]any{"callback": func() {}})
	if want := "fingerprint: $.callback: a value of type func() cannot be fingerprinted (it has no JSON representation)"; err.Error() != want {
		t.Errorf("Error() = %q\nwant      %q", err.Error(), want)
	}
}

func TestInvalidTextIsRejected(t *testing.T) {
	tests := []struct {
		name     string
		in       any
		opts     Options
		wantPath string
		wantMsg  string
	}{
		{"invalid UTF-8 in a document string", "{\"a\":[\"ok\",\"\xff\"]}", Options{}, "$.a[1]", "string is not valid UTF-8"},
		{"invalid UTF-8 in a document key", "{\"m\":{\"\xc3\":1}}", Options{}, "$.m", "object key is not valid UTF-8"},
		{"invalid UTF-8 after an escape", "[\"\\n\xed\xa0\x80\"]", Options{}, "$[0]", "string is not valid UTF-8"},
		{"unpaired high surrogate", `{"s":"\ud800"}`, Options{}, "$.s", "unpaired UTF-16 surrogate"},
		{"unpaired low surrogate", `["\udc00"]`, Options{}, "$[0]", "unpaired UTF-16 surrogate"},
		{"high surrogate before a non-surrogate", `["\ud83d\u0041"]`, Options{}, "$[0]", "unpaired UTF-16 surrogate"},
		{"reversed surrogates", `["\ude00\ud83d"]`, Options{}, "$[0]", "unpaired UTF-16 surrogate"},
		{"unpaired surrogate in a key", `{"\ud800":1}`, Options{}, "$", "object key contains an unpaired"},
		{"invalid UTF-8 in a Go string", map[string]any{"x": []any{"\xff"}}, Options{}, "$.x[0]", "string is not valid UTF-8"},
		{"invalid UTF-8 in a Go key", map[string]any{"\xff": 1}, Options{}, "$", "object key is not valid UTF-8"},
		{"invalid UTF-8 from Redact", `{"a":{"b":"secret"}}`, Options{Redact: func(string) string { return "\xff" }}, "$.a.b", "Redact returned"},
		// Values marshalled by encoding/json, which would repair the text, are checked before.
		{"invalid UTF-8 in a struct field", map[string]any{"req": struct{ System string }{"s\xff"}}, Options{}, "$.req", "inside this value"},
		{"invalid UTF-8 behind a pointer in a struct", []any{&struct{ P *string }{P: &badText}}, Options{}, "$[0]", "inside this value"},
		{"invalid UTF-8 in an embedded struct", struct{ embedded }{embedded{Name: "\xff"}}, Options{}, "$", "inside this value"},
		{"invalid UTF-8 in a map with int keys", map[int]string{1: "\xc3"}, Options{}, "$", "inside this value"},
		{"invalid UTF-8 from MarshalText", map[string]any{"t": badTextMarshaler{}}, Options{}, "$.t", "inside this value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if doc, ok := tt.in.(string); ok {
				_, err = OfJSON([]byte(doc), tt.opts)
			} else {
				_, err = Of(tt.in, tt.opts)
			}
			var e *InvalidUTF8Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *InvalidUTF8Error", err, err)
			}
			if e.Path != tt.wantPath || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Path = %q, Error() = %q; want %q and %q", e.Path, err.Error(), tt.wantPath, tt.wantMsg)
			}
		})
	}
}

var badText = "x\xff"

type embedded struct{ Name string }

type badTextMarshaler struct{}

func (badTextMarshaler) MarshalText() ([]byte, error) { return []byte("\xff"), nil }

func TestTextEncodingJSONWouldNotWriteIsNotChecked(t *testing.T) {
	type hidden struct {
		Shown  string
		Ignore string `json:"-"`
		secret string
		Bytes  []byte
	}
	got, err := Canonicalize(hidden{Shown: "ok\ufffd", Ignore: "\xff", secret: "\xff", Bytes: []byte("\xff")})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"Bytes":"/w==","Shown":"ok` + "\ufffd" + `"}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	_ = hidden{}.secret
}

func TestValidSurrogatePairsDecode(t *testing.T) {
	if got := mustCanonicalJSON(t, `["\ud83d\ude00","\uD83D\uDE00x"]`); got != `["😀","😀x"]` {
		t.Errorf("got %s", got)
	}
}

func TestZeroValueErrorsStillExplainThemselves(t *testing.T) {
	for _, err := range []error{&NonFiniteError{Path: "$"}, &NumberRangeError{Path: "$"}, &UnsupportedTypeError{Path: "$", Type: "chan int"},
		&InvalidUTF8Error{Path: "$"}, &DuplicateKeyError{Path: "$", Key: "k"}, &SyntaxError{Offset: 3, Msg: "bad"}} {
		if msg := err.Error(); !strings.HasPrefix(msg, "fingerprint: ") || strings.HasSuffix(msg, ": ") {
			t.Errorf("%T: %q", err, msg)
		}
	}
}

// TestAStringNFCWouldChangeIsRefused: golang.org/x/text inserts U+034F after 30 combining marks, which
// made "a"+31×U+0300 and "a"+30×U+0300+U+034F+U+0300 one string. The first is refused (as a value,
// as a key, in a document and in a Go value); the second, which really holds U+034F, is kept.
func TestAStringNFCWouldChangeIsRefused(t *testing.T) {
	long := "a" + strings.Repeat("\u0300", 31)
	withCGJ := "a" + strings.Repeat("\u0300", 30) + "\u034f\u0300"
	for name, doc := range map[string]string{
		"value": `{"x":"` + long + `"}`,
		"key":   `{"` + long + `":1}`,
	} {
		var cr *CombiningRunError
		if _, err := OfJSON([]byte(doc), Options{}); !errors.As(err, &cr) {
			t.Errorf("%s: err = %v, want a CombiningRunError", name, err)
		}
	}
	var cr *CombiningRunError
	if _, err := Of(map[string]any{"x": long}, Options{}); !errors.As(err, &cr) {
		t.Errorf("Go value: err = %v, want a CombiningRunError", err)
	}
	if _, err := OfJSON([]byte(`{"x":"`+withCGJ+`"}`), Options{}); err != nil {
		t.Errorf("a string that holds U+034F itself: %v", err)
	}
	if _, err := OfJSON([]byte(`{"x":"a`+strings.Repeat("\u0300", 30)+`"}`), Options{}); err != nil {
		t.Errorf("30 combining marks: %v", err)
	}
}

// TestSharedAndCyclicReferencesAreWalkedOnce: a struct whose two fields point back at it is refused at
// once (the text check used to branch twice per level down to the depth limit), and a node shared by
// two fields is checked, once.
func TestSharedAndCyclicReferencesAreWalkedOnce(t *testing.T) {
	type node struct {
		Name string
		A, B *node
	}
	cyclic := &node{Name: "c"}
	cyclic.A, cyclic.B = cyclic, cyclic
	done := make(chan error, 1)
	go func() { _, err := Of(cyclic, Options{}); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cyclic value was fingerprinted")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("fingerprinting a cyclic value did not finish")
	}
	bad := &node{Name: "ok"}
	bad.A = &node{Name: "x\xff"}
	bad.B = bad.A
	var iu *InvalidUTF8Error
	if _, err := Of(bad, Options{}); !errors.As(err, &iu) {
		t.Fatalf("a shared node with invalid UTF-8: err = %v", err)
	}
}

// checkPathError checks that err is a *T (target) naming wantPath, and says wantMsg when one is given.
func checkPathError[T error](t *testing.T, err error, target *T, path func() string, wantPath, wantMsg string) {
	t.Helper()
	if !errors.As(err, target) {
		t.Fatalf("err = %v (%T), want %T", err, err, *target)
	}
	if got := path(); got != wantPath {
		t.Errorf("Path = %q, want %q", got, wantPath)
	}
	if wantMsg != "" && err.Error() != wantMsg {
		t.Errorf("Error() = %q\nwant      %q", err.Error(), wantMsg)
	}
}
