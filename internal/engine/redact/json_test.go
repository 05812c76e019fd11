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
	// The name and the value are separate JSON strings; the member is matched as name=value.
	doc := `{"AWS_SECRET_ACCESS_KEY":"` + fakeAWSSecret + `","other":"` + fakeAWSSecret + `"}`
	got, err := New(BuiltinPatterns()).JSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"AWS_SECRET_ACCESS_KEY":"` + Token(fakeAWSSecret) + `","other":"` + fakeAWSSecret + `"}`
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
