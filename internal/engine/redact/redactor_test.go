package redact

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
)

func TestTokenIsSHA256Prefix(t *testing.T) {
	// sha256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
	if got, want := Token("abc"), "arw:redacted:ba7816bf8f01cfea414140de5dae2223"; got != want {
		t.Fatalf("Token(abc) = %q, want %q", got, want)
	}
}

func TestSameSecretSameTokenAcrossRedactors(t *testing.T) {
	input := "a " + fakeGitHubPAT + " b"
	first := New(BuiltinPatterns()).String(input)
	second := New(BuiltinPatterns()).String(input)
	if first != second {
		t.Fatalf("two redactors disagree: %q vs %q", first, second)
	}
	if !strings.Contains(first, Token(fakeGitHubPAT)) {
		t.Fatalf("output %q lacks the token of the secret", first)
	}
}

func TestCountsAndSecretsAccumulate(t *testing.T) {
	r := New(BuiltinPatterns())
	r.String(fakeAnthropicKey + " and again " + fakeAnthropicKey)
	r.String("x " + fakeGitHubPAT)
	wantCounts := map[string]int{"anthropic-api-key": 2, "github-token": 1}
	if got := r.Counts(); fmt.Sprint(got) != fmt.Sprint(wantCounts) {
		t.Fatalf("Counts() = %v, want %v", got, wantCounts)
	}
	wantSecrets := map[string]string{Token(fakeAnthropicKey): fakeAnthropicKey, Token(fakeGitHubPAT): fakeGitHubPAT}
	if got := r.Secrets(); fmt.Sprint(got) != fmt.Sprint(wantSecrets) {
		t.Fatalf("Secrets() = %v, want %v", got, wantSecrets)
	}
}

func TestCountsAndSecretsAreCopies(t *testing.T) {
	r := New(BuiltinPatterns())
	r.String(fakeGitHubPAT)
	r.Counts()["github-token"] = 99
	clear(r.Secrets())
	if r.Counts()["github-token"] != 1 || len(r.Secrets()) != 1 {
		t.Fatal("mutating the returned maps changed the redactor")
	}
}

func TestRedactionIsIdempotent(t *testing.T) {
	r := New(BuiltinPatterns())
	once := r.String("Authorization: Bearer " + fakeJWT + " key=" + fakeOpenAIProj)
	twice := r.String(once)
	if once != twice {
		t.Fatalf("second pass changed the output:\n%q\n%q", once, twice)
	}
	if got := r.Counts(); got["bearer-token"] != 1 || got["openai-api-key"] != 1 {
		t.Fatalf("second pass counted again: %v", got)
	}
}

func TestUserPatternSecretGroupNarrowsTheReplacement(t *testing.T) {
	user, err := ParsePatterns([]string{`pin=(?i)pin code: (?P<secret>[0-9]{6})`})
	if err != nil {
		t.Fatal(err)
	}
	r := New(append(BuiltinPatterns(), user...))
	got := r.String("your PIN code: 493817, keep it")
	if want := "your PIN code: " + Token("493817") + ", keep it"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if r.Counts()["pin"] != 1 {
		t.Fatalf("Counts() = %v, want pin=1", r.Counts())
	}
}

func TestUserPatternNeverRewritesATokenFromAnEarlierPattern(t *testing.T) {
	// A careless user pattern that would match the hex inside a token must leave tokens intact.
	r := New(append(BuiltinPatterns(), Pattern{Name: "hex", Regexp: regexp.MustCompile(`[0-9a-f]{12}`)}))
	got := r.String(fakeGitHubPAT)
	if got != Token(fakeGitHubPAT) {
		t.Fatalf("got %q, want the github token untouched", got)
	}
}

func TestCanaryNeverSurvivesRedaction(t *testing.T) {
	canary := fakeAnthropicKey
	inputs := map[string]string{
		"plain":         "the key is " + canary,
		"bearer header": "Authorization: Bearer " + canary,
		"repeated":      canary + canary[:10] + " " + canary,
		"json escaped":  `{"text":"key=\"` + canary + `\"\n"}`,
	}
	r := New(BuiltinPatterns())
	for name, in := range inputs {
		if out := r.String(in); strings.Contains(out, canary) {
			t.Errorf("%s: canary survived in %q", name, out)
		}
	}
	doc := `{"` + canary + `":{"list":["` + canary + `",1.50,{"deep":"Bearer ` + canary + `"}]}}`
	out, err := r.JSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), canary) {
		t.Fatalf("canary survived JSON redaction: %s", out)
	}
}

func TestRedactorIsSafeForConcurrentUse(t *testing.T) {
	r := New(BuiltinPatterns())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				r.String(fmt.Sprintf("worker %d %s", i, fakeGitHubPAT))
				_, _ = r.JSON([]byte(`{"k":"` + fakeAWSKeyID + `"}`))
			}
		})
	}
	wg.Wait()
	if got := r.Counts(); got["github-token"] != 400 || got["aws-access-key-id"] != 400 {
		t.Fatalf("Counts() = %v, want 400 of each", got)
	}
}

func TestNewPanicsOnPatternWithoutRegexp(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted a pattern without a Regexp")
		}
	}()
	New([]Pattern{{Name: "broken"}})
}

func TestLiteralSecretsAreRedactedButNotConfiguration(t *testing.T) {
	r := New(BuiltinPatterns())
	before := len(r.PatternNames())
	r.AddLiteral("env-secret", "hunter2-correct-horse")
	r.AddLiteral("env-secret", "hunter2-correct-horse") // twice is once
	got, err := r.JSON([]byte(`{"password":"hunter2-correct-horse","note":"pw is hunter2-correct-horse"}`))
	if err != nil {
		t.Fatal(err)
	}
	tok := Token("hunter2-correct-horse")
	if strings.Contains(string(got), "hunter2") || strings.Count(string(got), tok) != 2 {
		t.Fatalf("redacted %s", got)
	}
	if r.Counts()["env-secret"] != 2 || len(r.PatternNames()) != before {
		t.Fatalf("counts %v, pattern names %v", r.Counts(), r.PatternNames())
	}
}

// TestGenerationChangesExactlyWhenWhatTheRedactorKnowsDoes: redacting text with no secret, or a
// secret already known, leaves Generation alone; a new secret, a learned literal or a whole string
// replaced for its escapes (a new token, nothing learned) changes it.
func TestGenerationChangesExactlyWhenWhatTheRedactorKnowsDoes(t *testing.T) {
	r := New(BuiltinPatterns())
	key := "sk-ant-api03-" + strings.Repeat("k", 40)
	steps := []struct {
		what    string
		do      func()
		changes bool
	}{
		{"plain text", func() { r.String("nothing secret here") }, false},
		{"a new key", func() { r.String("key " + key) }, true},
		{"the same key again", func() { r.String("again " + key) }, false},
		{"the same key in a JSON document", func() { _, _ = r.JSON([]byte(`{"k":"` + key + `"}`)) }, false},
		{"a literal", func() { r.AddLiteral("env-secret", "hunter2hunter2") }, true},
		{"the same literal", func() { r.AddLiteral("env-secret", "hunter2hunter2") }, false},
		{"a key spelled with escapes", func() { _, _ = r.JSON([]byte(`{"k":"\u0073k-ant-api03-` + strings.Repeat("e", 40) + `"}`)) }, true},
	}
	for _, s := range steps {
		before := r.Generation()
		s.do()
		if changed := r.Generation() != before; changed != s.changes {
			t.Errorf("%s: generation changed %v, want %v", s.what, changed, s.changes)
		}
	}
}

// TestASecretFoundLateInAnInputIsRedactedEarlierInItToo: a secret a pattern finds only at its second
// occurrence ("Bearer S") also stands bare before it, in the same string, in an earlier member of
// the same document, or in a key: none of them keeps it, and the counts are of the tokens written.
func TestASecretFoundLateInAnInputIsRedactedEarlierInItToo(t *testing.T) {
	const secret = "Zq9xK2mW7vR4tY8uP3sL6nB1"
	tok := Token(secret)
	t.Run("string", func(t *testing.T) {
		r := New(BuiltinPatterns())
		got := r.String("first " + secret + ", then Authorization: Bearer " + secret)
		if want := "first " + tok + ", then Authorization: Bearer " + tok; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		if c := r.Counts()["bearer-token"]; c != 2 {
			t.Fatalf("counted %d, want the 2 tokens written", c)
		}
	})
	t.Run("json", func(t *testing.T) {
		r := New(BuiltinPatterns())
		doc := `{"note":"use ` + secret + `","` + secret + `":1,"list":["` + secret + `"],"auth":"Bearer ` + secret + `"}`
		got, err := r.JSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		want := `{"note":"use ` + tok + `","` + tok + `":1,"list":["` + tok + `"],"auth":"Bearer ` + tok + `"}`
		if string(got) != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
}

// TestATallyTeachesAtOnceAndCountsOnlyWhenCommitted: a caller that redoes its work counts the pass
// it keeps, while what an abandoned pass found is still known (and so redacted) at once.
func TestATallyTeachesAtOnceAndCountsOnlyWhenCommitted(t *testing.T) {
	const secret = "Zq9xK2mW7vR4tY8uP3sL6nB1"
	r := New(BuiltinPatterns())
	abandoned := r.Tally()
	if got := abandoned.String("Authorization: Bearer " + secret); got != "Authorization: Bearer "+Token(secret) {
		t.Fatalf("the tally redacted %q", got)
	}
	if got := r.String("bare " + secret); got != "bare "+Token(secret) {
		t.Fatalf("what the tally found is not known to its redactor: %q", got)
	}
	if c := r.Counts()["bearer-token"]; c != 1 {
		t.Fatalf("counted %d before any commit, want the redactor's own 1", c)
	}
	kept := r.Tally()
	if _, err := kept.JSON([]byte(`{"a":"Bearer ` + secret + `","b":"` + secret + `"}`)); err != nil {
		t.Fatal(err)
	}
	kept.Commit()
	kept.Commit() // a second commit adds nothing
	if c := r.Counts()["bearer-token"]; c != 3 {
		t.Fatalf("counted %d after the commit, want 1 + the 2 tokens the kept tally wrote", c)
	}
}

func TestASnapshotRedactsWhatItsRedactorKnowsAndTeachesItNothing(t *testing.T) {
	r := New(BuiltinPatterns())
	r.AddLiteral("declared-secret", "hunter2-declared-value")
	gen := r.Generation()
	snap := r.Snapshot()
	out := snap.String("declared hunter2-declared-value, new: Authorization: Bearer QmVhcmVyU2VjcmV0VG9rZW4xMjM0NTY3ODkw")
	if strings.Contains(out, "hunter2") || strings.Contains(out, "QmVhcmVy") {
		t.Fatalf("the snapshot left a secret: %q", out)
	}
	if r.Generation() != gen || len(r.Counts()) != 0 || len(r.Secrets()) != 0 {
		t.Fatalf("the snapshot taught its redactor: generation %d→%d, counts %v, %d secrets", gen, r.Generation(), r.Counts(), len(r.Secrets()))
	}
	if got := r.String("QmVhcmVyU2VjcmV0VG9rZW4xMjM0NTY3ODkw alone"); !strings.HasPrefix(got, "QmVhcmVy") {
		t.Fatalf("the redactor learned what only its snapshot saw: %q", got)
	}
}
