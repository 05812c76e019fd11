package redact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFoundSecretsAreRedactedWhereverTheyAppearLater: a secret a pattern found only in its context
// (next to its name, after "Bearer") is afterwards redacted bare, in JSON, String and Stream, and
// counted under the pattern that found it.
func TestFoundSecretsAreRedactedWhereverTheyAppearLater(t *testing.T) {
	tests := []struct {
		name, first, pattern, secret string
	}{
		{"aws secret key first seen next to its name", `{"aws_secret_access_key":"` + fakeAWSSecret + `"}`, "aws-secret-access-key", fakeAWSSecret},
		{"bearer token first seen in a header", `{"h":"Authorization: Bearer ` + fakeJWT + `"}`, "bearer-token", fakeJWT},
	}
	later := map[string]func(r *Redactor, secret string) (string, error){
		"JSON": func(r *Redactor, secret string) (string, error) {
			out, err := r.JSON([]byte(`{"cmd":"echo ` + secret + `","token":"` + secret + `"}`))
			return string(out), err
		},
		"String": func(r *Redactor, secret string) (string, error) {
			return r.String("echo " + secret + " | tee x; " + secret), nil
		},
		"Stream": func(r *Redactor, secret string) (string, error) {
			out, err := r.Stream([][]byte{textChunk("echo " + secret[:10]), textChunk(secret[10:] + " | tee x; " + secret)})
			return string(joinLines(out)), err
		},
	}
	for _, tt := range tests {
		for via, redact := range later {
			t.Run(tt.name+", then bare in "+via, func(t *testing.T) {
				r := New(BuiltinPatterns())
				if _, err := r.JSON([]byte(tt.first)); err != nil {
					t.Fatal(err)
				}
				out, err := redact(r, tt.secret)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(out, tt.secret) || strings.Count(out, Token(tt.secret)) != 2 {
					t.Fatalf("the secret is not redacted twice: %s", out)
				}
				if diff := cmp.Diff(map[string]int{tt.pattern: 3}, r.Counts()); diff != "" {
					t.Errorf("counts (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestATokenPrefixBeforeASecretDoesNotShieldIt: "arw:redacted:" written before a secret whose first
// characters are lower-case hex is not a token, and a secret is never skipped for overlapping one.
func TestATokenPrefixBeforeASecretDoesNotShieldIt(t *testing.T) {
	secrets := map[string]string{
		"12 hex then more":   "deadbeef0123CANARY456789abcdef00",
		"32 hex then more":   strings.Repeat("0123456789abcdef", 2) + "Tail",
		"exactly 32 hex":     strings.Repeat("fedcba9876543210", 2),
		"exactly 12 hex":     "0123456789ab",
		"hex after a prefix": "c0ffee" + strings.Repeat("ab", 10),
	}
	for name, secret := range secrets {
		t.Run(name, func(t *testing.T) {
			r := New(BuiltinPatterns())
			r.AddLiteral("declared-secret", secret)
			in := "see " + TokenPrefix + secret + " and " + TokenPrefix + secret + "."
			if out := r.String(in); strings.Contains(out, secret) {
				t.Errorf("String kept the secret: %q", out)
			}
			doc, _ := json.Marshal(map[string]string{"note": in, TokenPrefix + secret: "key"})
			out, err := r.JSON(doc)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), secret) {
				t.Errorf("JSON kept the secret: %s", out)
			}
			chunks, err := r.Stream([][]byte{textChunk("see " + TokenPrefix), textChunk(secret + ".")})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(joinLines(chunks)), secret) {
				t.Errorf("Stream kept the secret: %s", joinLines(chunks))
			}
		})
	}
}

func TestTokensCarry128BitsAndOldTokensAreStillTokens(t *testing.T) {
	tok := Token(fakeGitHubPAT)
	if h := strings.TrimPrefix(tok, TokenPrefix); len(h) != 32 || !isLowerHex(h) {
		t.Fatalf("Token = %q, want the prefix and 32 lower-case hex characters", tok)
	}
	legacy := tok[:len(TokenPrefix)+LegacyTokenHexLen]
	v := NewVault()
	if err := v.Merge(map[string]string{legacy: "old secret", tok: "new secret"}); err != nil {
		t.Fatal(err)
	}
	in := "a " + legacy + " b " + tok + tok + " c " + legacy + "beef"
	if got, want := v.Restore(in), "a old secret b new secretnew secret c old secretbeef"; got != want {
		t.Errorf("Restore = %q, want %q", got, want)
	}
}

func TestFindTokensSeesOnlyWholeTokens(t *testing.T) {
	a, b := Token("first"), Token("second")
	legacy := a[:len(TokenPrefix)+LegacyTokenHexLen]
	text := "x" + a + b + " " + legacy + ", " + TokenPrefix + "deadbeef0123CANARY " + a + "f " + legacy + "Z " + a
	var got []string
	for _, sp := range FindTokens([]byte(text)) {
		got = append(got, text[sp[0]:sp[1]])
	}
	if diff := cmp.Diff([]string{a, b, legacy, a}, got); diff != "" {
		t.Fatalf("tokens (-want +got):\n%s", diff)
	}
}

// TestQuotedLiteralsAreRedacted: a literal holding '"' or '\' is still found once the agent quoted it
// with %q or JSON-escaped it, and only the quoted secret is replaced, by the token of its quoted form
// (which the vault restores to that form); the same text inside a JSON document is redacted too.
func TestQuotedLiteralsAreRedacted(t *testing.T) {
	for _, secret := range []string{`pa"ss\word-9`, `back\slash-only`, "tab\there-and-\"", "caf\u00e9\"<x>&"} {
		t.Run(secret, func(t *testing.T) {
			r := New(BuiltinPatterns())
			r.AddLiteral("declared-secret", secret)
			asJSON, _ := json.Marshal(secret)
			texts := map[string]string{
				"%q":           fmt.Sprintf("login failed for %q", secret),
				"%+q":          fmt.Sprintf("login failed for %+q", secret),
				"JSON in text": `{"password":` + string(asJSON) + `}`,
			}
			for name, text := range texts {
				quoted := fmt.Sprintf("%q", secret)
				switch name {
				case "%+q":
					quoted = fmt.Sprintf("%+q", secret)
				case "JSON in text":
					quoted = string(asJSON)
				}
				want := strings.Replace(text, quoted, `"`+Token(inner(quoted))+`"`, 1)
				if got := r.String(text); got != want {
					t.Errorf("%s: String = %q, want %q", name, got, want)
				}
				doc, err := r.JSON([]byte(mustJSON(t, map[string]string{"result": text})))
				if err != nil {
					t.Fatal(err)
				}
				if leaks(string(doc), secret) {
					t.Errorf("%s: the secret can still be read from %s", name, doc)
				}
			}
		})
	}
}

// leaks reports whether s, or one of its unescaped views, holds secret.
func leaks(s, secret string) bool {
	for _, v := range append([]string{s}, escapedViews(s, 4)...) {
		if strings.Contains(v, secret) {
			return true
		}
	}
	return false
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
