package redact

import (
	"strings"
	"testing"
)

// TestCleanDocumentsTakeTheFastPathAndSecretsNever: a document without secrets comes back compacted;
// a secret is found whether it is written plainly, next to its key, or hidden behind \u escapes that the
// raw-bytes check cannot see through.
func TestCleanDocumentsTakeTheFastPathAndSecretsNever(t *testing.T) {
	key := "sk-ant-api03-" + strings.Repeat("A1b2", 10)
	cases := []struct {
		name, doc, want string
	}{
		{"clean document is compacted", `{ "a": [1, 2.50, "x \u003c y"] }`, `{"a":[1,2.50,"x \u003c y"]}`},
		{"plain secret", `{"k": "` + key + `"}`, `{"k":"` + Token(key) + `"}`},
		{"secret behind unicode escapes", `{"k": "\u0073\u006b-ant-api03-` + strings.Repeat("A1b2", 10) + `"}`, `{"k":"` + Token(key) + `"}`},
		{"secret in a key", `{"` + key + `": 1}`, `{"` + Token(key) + `":1}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := New(BuiltinPatterns()).JSON([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	if _, err := New(BuiltinPatterns()).JSON([]byte(`{"a": }`)); err == nil {
		t.Fatal("malformed JSON passed the fast path")
	}
}
