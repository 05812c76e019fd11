package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestJSONRedactsLeavesAndKeysAndKeepsEverythingElse(t *testing.T) {
	doc := `{
	  "price": 1.50, "big": 12345678901234567890, "exp": 1e-7,
	  "items": [{"auth": "Bearer ` + fakeJWT + `"}, true, null, "<b>&amp;</b>"],
	  "` + fakeGitHubPAT + `": "value under a secret key",
	  "zfirst": "order is kept", "a": {"nested": {"key": "` + fakeAWSKeyID + `"}}
	}`
	want := `{"price":1.50,"big":12345678901234567890,"exp":1e-7,` +
		`"items":[{"auth":"Bearer ` + Token(fakeJWT) + `"},true,null,"<b>&amp;</b>"],` +
		`"` + Token(fakeGitHubPAT) + `":"value under a secret key",` +
		`"zfirst":"order is kept","a":{"nested":{"key":"` + Token(fakeAWSKeyID) + `"}}}`
	r := New(BuiltinPatterns())
	got, err := r.JSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("JSON()\n got %s\nwant %s", got, want)
	}
	wantCounts := map[string]int{"bearer-token": 1, "github-token": 1, "aws-access-key-id": 1}
	for name, n := range wantCounts {
		if r.Counts()[name] != n {
			t.Errorf("Counts()[%s] = %d, want %d", name, r.Counts()[name], n)
		}
	}
}

func TestJSONFindsKeyAnchoredSecretInItsOwnString(t *testing.T) {
	// The name and the value are separate JSON strings; the member is matched as name=value. The
	// secret it finds is then known, so its bare copy in another member is redacted too.
	doc := `{"AWS_SECRET_ACCESS_KEY":"` + fakeAWSSecret + `","other":"` + fakeAWSSecret + `"}`
	got, err := New(BuiltinPatterns()).JSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"AWS_SECRET_ACCESS_KEY":"` + Token(fakeAWSSecret) + `","other":"` + Token(fakeAWSSecret) + `"}`
	if string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestJSONRejectsMalformedInputWithOffset(t *testing.T) {
	tests := []struct {
		name       string
		doc        string
		wantOffset int64
	}{
		{"trailing comma in object", `{"a":1,}`, 7},
		{"missing colon", `{"a" 1}`, 5},
		{"missing comma", `[1 2]`, 3},
		{"unterminated object", `{"a":1`, 6},
		{"truncated literal", `nul`, 3},
		{"empty document", ``, 0},
		{"two documents", `{"a":1} {"b":2}`, 7},
		{"extra closing brace", `{"a":1}}`, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(BuiltinPatterns())
			_, err := r.JSON([]byte(tt.doc))
			jerr, ok := errors.AsType[*JSONError](err)
			if !ok {
				t.Fatalf("err = %v, want *JSONError", err)
			}
			if jerr.Offset != tt.wantOffset {
				t.Fatalf("Offset = %d, want %d (%v)", jerr.Offset, tt.wantOffset, err)
			}
		})
	}
}

func TestJSONErrorRecordsNothing(t *testing.T) {
	r := New(BuiltinPatterns())
	if _, err := r.JSON([]byte(`["` + fakeGitHubPAT + `",`)); err == nil {
		t.Fatal("want an error")
	}
	if len(r.Counts()) != 0 || len(r.Secrets()) != 0 {
		t.Fatal("a failed JSON call recorded secrets")
	}
}

func TestRedactThenRestoreJSONGivesTheCompactOriginal(t *testing.T) {
	doc := []byte(`{"k":"` + fakeOpenAIProj + `", "` + fakeAnthropicKey + `": [1.50, "x ` + fakeGitHubFine + `"]}`)
	r := New(BuiltinPatterns())
	redacted, err := r.JSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVault()
	v.Merge(r.Secrets())
	restored, err := v.RestoreJSON(redacted)
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(restored, compact.Bytes()) {
		t.Fatalf("restored\n %s\nwant\n %s", restored, compact.Bytes())
	}
}

func TestJSONRefusesInvalidTextWithOffsetInsteadOfRepairingIt(t *testing.T) {
	secret := `"` + fakeGitHubPAT + `"` // forces the full rewrite, not only the fast path
	tests := []struct {
		name       string
		doc        string
		wantOffset int64
		wantReason string
	}{
		{"invalid byte in a value", `{"a":"x` + "\xff" + `"}`, 7, reasonBadUTF8},
		{"invalid byte next to a secret", `[` + secret + `,"x` + "\xff" + `"]`, int64(len(secret)) + 4, reasonBadUTF8},
		{"truncated multi-byte rune in a key", `{"` + "\xe2\x82" + `":1}`, 2, reasonBadUTF8},
		{"UTF-8 encoded surrogate", `["` + "\xed\xa0\x80" + `"]`, 2, reasonBadUTF8},
		{"lone high surrogate escape", `{"a":"x\ud800"}`, 7, reasonSurrogate},
		{"lone low surrogate escape", `["\uDC00x"]`, 2, reasonSurrogate},
		{"high surrogate followed by a non-surrogate escape", `["\ud83d\u0041"]`, 2, reasonSurrogate},
		{"two high surrogates", `["\ud83d\ud83d\ude00"]`, 2, reasonSurrogate},
		{"lone surrogate in a key", `{"k\ud800":1}`, 3, reasonSurrogate},
		{"lone surrogate escape next to a secret", `[` + secret + `,"\udfff"]`, int64(len(secret)) + 3, reasonSurrogate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(BuiltinPatterns())
			out, err := r.JSON([]byte(tt.doc))
			terr, ok := errors.AsType[*TextError](err)
			if !ok {
				t.Fatalf("JSON() = %q, %v; want a *TextError", out, err)
			}
			if terr.Offset != tt.wantOffset || terr.Reason != tt.wantReason {
				t.Errorf("TextError at %d (%s), want at %d (%s)", terr.Offset, terr.Reason, tt.wantOffset, tt.wantReason)
			}
			if len(r.Secrets()) != 0 {
				t.Error("a refused document recorded secrets")
			}
			if _, err := NewVault().RestoreJSON([]byte(tt.doc)); !errors.As(err, &terr) {
				t.Errorf("RestoreJSON error = %v, want a *TextError", err)
			}
		})
	}
}

func TestJSONKeepsValidTextAndEscapedSurrogatePairs(t *testing.T) {
	doc := `{"a":"x\ufffd","b":"\ud83d\ude00 \uD83D\uDE00","c":"` + "\U0001F600 é \ufffd" + `","d":"` + fakeGitHubPAT + `"}`
	got, err := New(BuiltinPatterns()).JSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":"x` + "\ufffd" + `","b":"😀 😀","c":"😀 é ` + "\ufffd" + `","d":"` + Token(fakeGitHubPAT) + `"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestJSONKeepsNumberTextExactly(t *testing.T) {
	nums := `[1234567890123456789,1234567890123456788,9007199254740993,1.0000000000000001,1e-400,1E+400,-0.0,1.50,10e-1]`
	for _, doc := range []string{
		`{"user_id":1234567890123456789,"n":` + nums + `}`,                             // the fast path: nothing to redact
		`{"user_id":1234567890123456789,"n":` + nums + `,"k":"` + fakeGitHubPAT + `"}`, // the full rewrite
	} {
		got, err := New(BuiltinPatterns()).JSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(got, []byte(`{"user_id":1234567890123456789,"n":`+nums)) {
			t.Errorf("numbers changed: %s", got)
		}
	}
}
