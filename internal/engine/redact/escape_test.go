package redact

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// jsonBodyWith returns a JSON body (as a tool result or a ledger entry carries one in a string) whose
// member k holds secret written with the escapes of spell.
func jsonBodyWith(k, spelled string) string { return `{"` + k + `":"` + spelled + `","n":1}` }

// escapedSecrets are secrets written so that only a JSON-unescaping reader sees them: the raw bytes of
// the string never spell the secret.
func escapedSecrets() map[string]struct{ secret, body string } {
	lit := "hunter2-Correct-Horse"
	return map[string]struct{ secret, body string }{
		"anthropic key behind \\u":            {fakeAnthropicKey, jsonBodyWith("k", `\u0073k-ant-`+fakeAnthropicKey[len("sk-ant-"):])},
		"anthropic key escaped every 8 bytes": {fakeAnthropicKey, jsonBodyWith("k", escapeEvery(fakeAnthropicKey, 8))},
		"declared literal behind \\u":         {lit, jsonBodyWith("pw", `\u0068unter2-Correct-Horse`)},
		"aws secret with \\/":                 {fakeAWSSecret, jsonBodyWith("aws_secret_access_key", strings.ReplaceAll(fakeAWSSecret, "/", `\/`))},
		"github token two levels deep":        {fakeGitHubPAT, `{"inner":"` + strings.ReplaceAll(jsonBodyWith("t", `\u0067hp_`+fakeGitHubPAT[4:]), `\`, `\\`) + `"}`},
	}
}

func newEscapeRedactor() *Redactor {
	r := New(BuiltinPatterns())
	r.AddLiteral("declared-secret", "hunter2-Correct-Horse")
	return r
}

// TestSecretsBehindJSONEscapesInAStringAreRedacted: a string holding JSON whose escapes spell a secret
// is replaced as a whole by its token, in JSON (value or key), String and Stream (whole or cut off),
// and the vault restores it exactly.
func TestSecretsBehindJSONEscapesInAStringAreRedacted(t *testing.T) {
	for name, tc := range escapedSecrets() {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(tc.body, tc.secret) {
				t.Fatal("bad fixture: the raw body spells the secret")
			}
			r := newEscapeRedactor()
			if got, want := r.String(tc.body), Token(tc.body); got != want {
				t.Errorf("String = %q, want the token of the whole string", got)
			}
			doc := mustJSON(t, map[string]any{"tool_result": tc.body, "ledger": []string{"x", tc.body}, tc.body: 1})
			out, err := r.JSON([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if leaks(string(out), tc.secret) || strings.Count(string(out), Token(tc.body)) != 3 {
				t.Errorf("JSON = %s", out)
			}
			v := NewVault()
			if err := v.Merge(r.Secrets()); err != nil {
				t.Fatal(err)
			}
			if back, err := v.RestoreJSON(out); err != nil || string(back) != doc {
				t.Errorf("restored %s, %v; want %s", back, err, doc)
			}
			if r.Counts()["declared-secret"]+r.Counts()["anthropic-api-key"]+r.Counts()["aws-secret-access-key"]+r.Counts()["github-token"] != 4 {
				t.Errorf("counts %v, want the 4 replaced strings counted once each", r.Counts())
			}
			// The secret found behind the escapes is learned: later bare, it is redacted.
			if out := r.String("bare " + tc.secret); strings.Contains(out, tc.secret) {
				t.Errorf("the unescaped secret is not learned: %q", out)
			}
		})
	}
}

// TestSecretsBehindJSONEscapesInAStreamedLaneFailClosed: a lane whose escapes spell a secret,
// known or not, whole or cut off where it does not parse, is ErrStreamExposed (the caller then stores
// a stream written from the redacted response), with nothing counted.
func TestSecretsBehindJSONEscapesInAStreamedLaneFailClosed(t *testing.T) {
	for name, tc := range escapedSecrets() {
		for _, cutOff := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, cut off %v", name, cutOff), func(t *testing.T) {
				body := tc.body
				if cutOff {
					body = body[:strings.LastIndex(body, `","n"`)] // no closing quote or brace: does not parse
				}
				var chunks [][]byte
				for _, piece := range split(body, 5, len(body)/2, len(body)-3) {
					chunks = append(chunks, anthropicDelta(0, "input_json_delta", "partial_json", piece))
				}
				r := newEscapeRedactor()
				got, err := r.Stream(chunks)
				if !errors.Is(err, ErrStreamExposed) || got != nil {
					t.Fatalf("Stream() = %s, %v; want no chunks and ErrStreamExposed", joinLines(got), err)
				}
				if strings.Contains(err.Error(), tc.secret) || len(r.Counts()) != 0 {
					t.Errorf("error %v, counts %v", err, r.Counts())
				}
			})
		}
	}
}

// TestJSONDocumentEscapesDoNotHideASecretFromTheFastPath: a secret spelled with the document's own
// escapes (\/ in an AWS key, \" in a literal) is redacted, not passed through as a clean document.
func TestJSONDocumentEscapesDoNotHideASecretFromTheFastPath(t *testing.T) {
	r := New(BuiltinPatterns())
	r.AddLiteral("declared-secret", `say"cheese"-now`)
	docs := map[string]string{
		fakeAWSSecret:     `{"aws_secret_access_key":"` + strings.ReplaceAll(fakeAWSSecret, "/", `\/`) + `"}`,
		`say"cheese"-now`: `{"a":"x say\"cheese\"-now y"}`,
	}
	for secret, doc := range docs {
		out, err := r.JSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]string
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		for _, s := range v {
			if strings.Contains(s, secret) {
				t.Errorf("%s came back as %s", doc, out)
			}
		}
	}
}

func TestUnescapeJSONIsLenient(t *testing.T) {
	for in, want := range map[string]string{
		`a\u0073b\/c\\d\"e\nf`: "asb/c\\d\"e\nf",
		`\ud83d\ude00`:         "\U0001F600",
		`\ud800x`:              "\uFFFDx",
		`cut \u00`:             `cut \u00`,
		`end\`:                 `end\`,
		`\q`:                   `\q`,
	} {
		if got := unescapeJSON(in); got != want {
			t.Errorf("unescapeJSON(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAWholeStringReplacedForItsEscapesIsNotScannedForAsASecret: a stream is checked for the secret
// found behind the escapes, not for every piece of the (possibly huge) string that held it.
func TestAWholeStringReplacedForItsEscapesIsNotScannedForAsASecret(t *testing.T) {
	r := newEscapeRedactor()
	body := jsonBodyWith("k", `\u0073k-ant-`+fakeAnthropicKey[len("sk-ant-"):]) + strings.Repeat(" padding", 1000)
	r.String(body)
	known := r.knownSecrets(nil)
	if !slices.Contains(known, fakeAnthropicKey) || slices.Contains(known, body) {
		t.Fatalf("known secrets hold the key %v, the whole string %v; want the key only",
			slices.Contains(known, fakeAnthropicKey), slices.Contains(known, body))
	}
}
