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
