package redact

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Hostile attacks on settle (a secret found late is redacted earlier too) and on Tally (teaches at
// once, counts on Commit).

const (
	hostileBearer  = "QmVhcmVyU2VjcmV0VG9rZW4xMjM0NTY3ODkwYWJj"                    // bearer-token shape, no vendor prefix
	hostileAnthro  = "sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij0123456789" // anthropic-api-key
	hostileAWSSec  = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"                    // 40 chars, aws-secret-access-key
	hostileBearer2 = "ZZsecondBearerTokenValue_0987654321.xyz"
)

func hostileSum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// hostileCheck asserts out holds none of secrets and that the tokens in out are as many as counts says.
func hostileCheck(t *testing.T, out string, counts map[string]int, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("output holds secret %q in clear: %q", s, out)
		}
	}
	if got, want := strings.Count(out, TokenPrefix), hostileSum(counts); got != want {
		t.Errorf("output holds %d tokens, counts say %d (%v): %q", got, want, counts, out)
	}
}

func TestHostileTally_BareBeforeBearerString(t *testing.T) {
	r := New(BuiltinPatterns())
	out := r.String("use " + hostileBearer + " as the token. Authorization: Bearer " + hostileBearer)
	hostileCheck(t, out, r.Counts(), hostileBearer)
	if got := r.Counts()["bearer-token"]; got != 2 {
		t.Errorf("bearer-token count = %d, want 2 (%v)", got, r.Counts())
	}
	// Redacting the output again changes nothing and counts nothing.
	before := r.Counts()
	if again := r.String(out); again != out {
		t.Errorf("not idempotent: %q -> %q", out, again)
	}
	if hostileSum(r.Counts()) != hostileSum(before) {
		t.Errorf("re-redacting the output counted: %v -> %v", before, r.Counts())
	}
}

func TestHostileTally_BareBeforeAcrossJSON(t *testing.T) {
	r := New(BuiltinPatterns())
	doc := fmt.Sprintf(`{"notes":["first %[1]s", {"%[1]s":"as a key"}],"aws":"%[2]s is mine",`+
		`"h":{"Authorization":"Bearer %[1]s"},"aws_secret_access_key":"%[2]s"}`, hostileBearer, hostileAWSSec)
	out, err := r.JSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	hostileCheck(t, string(out), r.Counts(), hostileBearer, hostileAWSSec)
	if !json.Valid(out) {
		t.Errorf("output is not JSON: %s", out)
	}
	if c := r.Counts(); c["bearer-token"] != 3 || c["aws-secret-access-key"] != 2 {
		t.Errorf("counts = %v, want bearer-token 3, aws-secret-access-key 2", c)
	}
}

func TestHostileTally_SameSecretTwoPatterns(t *testing.T) {
	r := New(BuiltinPatterns())
	// The anthropic pattern runs before bearer-token: the key is counted once per occurrence, under one name.
	out := r.String("key " + hostileAnthro + "; Authorization: Bearer " + hostileAnthro + " and again " + hostileAnthro)
	hostileCheck(t, out, r.Counts(), hostileAnthro)
	if c := r.Counts(); c["anthropic-api-key"] != 3 || c["bearer-token"] != 0 {
		t.Errorf("counts = %v, want anthropic-api-key 3 only", c)
	}
	// The same via JSON with the key only recognisable through the bearer shape in a later member.
	r2 := New(BuiltinPatterns())
	doc := fmt.Sprintf(`{"a":"%s","b":"Bearer %s"}`, hostileBearer, hostileBearer)
	out2, err := r2.JSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	hostileCheck(t, string(out2), r2.Counts(), hostileBearer)
}

// A secret that is a substring of another: the shorter one is learned first. The longer one is later
// found by a pattern and must then be redacted whole wherever it appears bare.
func TestHostileTally_SubstringSecretLearnedShortFirst(t *testing.T) {
	short := "ShortBearerSecret_0123456789"
	long := "PREFIXPARTlongsecret." + short + ".SUFFIXPARTlongsecret"
	r := New(BuiltinPatterns())
	r.String("Authorization: Bearer " + short) // learns short
	r.String("Authorization: Bearer " + long)  // learns long (bearer-token runs before the literals)
	out := r.String("later the agent echoes " + long)
	for _, part := range []string{"PREFIXPARTlongsecret", "SUFFIXPARTlongsecret"} {
		if strings.Contains(out, part) {
			t.Errorf("part %q of the learned secret %q is in clear: %q", part, long, out)
		}
	}
	// Same inside one string, through settle: the long secret is bare before its Bearer.
	r2 := New(BuiltinPatterns())
	r2.String("Authorization: Bearer " + short)
	out2 := r2.String("use " + long + " then Authorization: Bearer " + long)
	if strings.Contains(out2, "PREFIXPARTlongsecret") {
		t.Errorf("settle left part of %q in clear: %q", long, out2)
	}
}

// The longer secret learned first, then the shorter one: both are redacted whole.
func TestHostileTally_SubstringSecretLongFirst(t *testing.T) {
	short := "ShortBearerSecret_0123456789"
	long := "PREFIXPARTlongsecret." + short + ".SUFFIXPARTlongsecret"
	r := New(BuiltinPatterns())
	r.String("Authorization: Bearer " + long)
	r.String("Authorization: Bearer " + short)
	out := r.String("echo " + long + " and " + short)
	if strings.Contains(out, "PREFIXPART") || strings.Contains(out, short) {
		t.Errorf("secret in clear: %q", out)
	}
}

func TestHostileTally_EscapedOnlySecret(t *testing.T) {
	r := New(BuiltinPatterns())
	escaped := `\u0073` + hostileAnthro[1:] // sk-ant-… only through a \u escape
	out := r.String(`cfg={"key":"` + escaped + `"}`)
	hostileCheck(t, out, r.Counts(), hostileAnthro, escaped, hostileAnthro[1:])
	if strings.Count(out, TokenPrefix) != 1 {
		t.Errorf("want the string replaced whole by one token, got %q", out)
	}
	// Learned (not counted) from inside the escaped string: later bare uses are redacted.
	out = r.String("bare " + hostileAnthro[7:] + " / " + hostileAnthro)
	if strings.Contains(out, hostileAnthro) {
		t.Errorf("learned secret in clear: %q", out)
	}
	hostileCheck(t, out, map[string]int{"x": strings.Count(out, TokenPrefix)}, hostileAnthro)

	// Bare before, found only through escapes in a later member: the earlier member is redacted too.
	r2 := New(BuiltinPatterns())
	doc := `{"a":"use ` + hostileBearer + `","b":"Authorization: Bearer \\u0051` + hostileBearer[1:] + `"}`
	out2, err := r2.JSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	hostileCheck(t, string(out2), r2.Counts(), hostileBearer, hostileBearer[1:])
}

func TestHostileTally_InvalidUTF8(t *testing.T) {
	r := New(BuiltinPatterns())
	out := r.String("\xff use " + hostileBearer + " \xfe\xfd Authorization: Bearer " + hostileBearer + "\xc3")
	hostileCheck(t, out, r.Counts(), hostileBearer)
	if !strings.HasPrefix(out, "\xff") || !strings.HasSuffix(out, "\xc3") {
		t.Errorf("bytes around the secrets changed: %q", out)
	}

	// A JSON document with invalid UTF-8 is refused and teaches nothing, counts nothing.
	r2 := New(BuiltinPatterns())
	tally := r2.Tally()
	_, err := tally.JSON([]byte(`{"a":"use ` + hostileBearer2 + `","b":"Bearer ` + hostileBearer2 + "\xff\"}"))
	if err == nil {
		t.Fatal("invalid UTF-8 document accepted")
	}
	tally.Commit()
	if len(r2.Counts()) != 0 || len(r2.Secrets()) != 0 {
		t.Errorf("refused document counted %v / learned %d secrets", r2.Counts(), len(r2.Secrets()))
	}
}

func TestHostileTally_ManyOccurrences(t *testing.T) {
	r := New(BuiltinPatterns())
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "line %d: %s;", i, hostileBearer)
	}
	b.WriteString(" Authorization: Bearer " + hostileBearer)
	out := r.String(b.String())
	hostileCheck(t, out, r.Counts(), hostileBearer)
	if got := r.Counts()["bearer-token"]; got != 301 {
		t.Errorf("bearer-token = %d, want 301", got)
	}
}

func TestHostileTally_CommitTwiceAndNever(t *testing.T) {
	r := New(BuiltinPatterns())
	never := r.Tally()
	out := never.String("use " + hostileBearer + " Authorization: Bearer " + hostileBearer)
	hostileCheck(t, out, never.counts, hostileBearer)
	if c := r.Counts(); len(c) != 0 {
		t.Errorf("uncommitted tally counted: %v", c)
	}
	// Never committed, yet the secret is known.
	if got := r.String("again " + hostileBearer); strings.Contains(got, hostileBearer) {
		t.Errorf("secret of an uncommitted tally not redacted later: %q", got)
	}
	if c := r.Counts(); c["bearer-token"] != 1 || len(c) != 1 {
		t.Errorf("counts = %v, want only the later bearer-token 1", c)
	}

	twice := r.Tally()
	twice.String("Authorization: Bearer " + hostileBearer2)
	twice.Commit()
	twice.Commit()
	if c := r.Counts(); c["bearer-token"] != 2 {
		t.Errorf("counts after committing twice = %v, want bearer-token 2", c)
	}
	// A tally used again after Commit counts only what came after.
	twice.String(hostileBearer2)
	twice.Commit()
	if c := r.Counts(); c["bearer-token"] != 3 {
		t.Errorf("counts after reuse = %v, want bearer-token 3", c)
	}
	// JSON through a tally.
	tj := r.Tally()
	doc, err := tj.JSON([]byte(`{"x":"` + hostileAnthro + `","y":"` + hostileBearer + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Counts(); c["bearer-token"] != 3 || c["anthropic-api-key"] != 0 {
		t.Errorf("tally.JSON counted before Commit: %v", c)
	}
	tj.Commit()
	hostileCheck(t, string(doc), map[string]int{"all": hostileSum(r.Counts()) - 3}, hostileAnthro, hostileBearer)
}

// Many goroutines share one Redactor, each with its own Tally; every output is clean and the counts
// are the sum of the committed tallies.
func TestHostileTally_Concurrent(t *testing.T) {
	r := New(BuiltinPatterns())
	const workers, rounds = 8, 20
	var wg sync.WaitGroup
	tokens := make([]int, workers)
	errs := make(chan string, workers*rounds)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				sec := fmt.Sprintf("worker%02dround%03dSecretValue_abcdefghij", w, i)
				tally := r.Tally()
				out := tally.String("use " + sec + " and " + hostileBearer + "; Authorization: Bearer " + sec +
					" Bearer " + hostileBearer)
				doc, err := tally.JSON([]byte(`{"m":"` + sec + `","n":"Bearer ` + hostileBearer2 + `","o":"` + hostileBearer2 + `"}`))
				if err != nil {
					errs <- err.Error()
					continue
				}
				if i%3 == 0 {
					continue // never committed: its outputs are not counted
				}
				tally.Commit()
				tally.Commit()
				for _, s := range []string{sec, hostileBearer, hostileBearer2} {
					if strings.Contains(out, s) || strings.Contains(string(doc), s) {
						errs <- fmt.Sprintf("secret %q in clear: %q / %s", s, out, doc)
					}
				}
				tokens[w] += strings.Count(out, TokenPrefix) + strings.Count(string(doc), TokenPrefix)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	want := 0
	for _, n := range tokens {
		want += n
	}
	if got := hostileSum(r.Counts()); got != want {
		t.Errorf("counts sum %d (%v), committed outputs hold %d tokens", got, r.Counts(), want)
	}
}

// Another goroutine that learns a secret while a pass runs (the pass finds it by pattern late in
// its input, the other goroutine records it first) must not make settle keep a pass that left the
// secret bare earlier in the input: a pass during which the redactor learned anything is redone.
func TestHostileTally_ConcurrentLearnerDuringAPassIsRedone(t *testing.T) {
	sec := "RaceBearerSecretValue_0123456789abcdef"
	r := New(BuiltinPatterns())
	s := "use " + sec + " then Authorization: Bearer " + sec
	var out string
	first := true
	// Exactly what String does, with another goroutine's r.String completing right after the first pass.
	_ = r.settle(r.counts, func(found *[]finding) error {
		out = r.redactText("", s, found)
		if first {
			first = false
			done := make(chan struct{})
			go func() { defer close(done); r.String("Authorization: Bearer " + sec) }()
			<-done
		}
		return nil
	})
	if strings.Contains(out, sec) {
		t.Errorf("secret in clear: %q", out)
	}
}

// The same race through the public API: one goroutine keeps teaching fresh bearer secrets while
// another redacts strings that hold each of them bare before their Bearer.
func TestHostileTally_ConcurrentLearnerPublicAPI(t *testing.T) {
	r := New(BuiltinPatterns())
	pad := strings.Repeat("filler text without secrets. ", 100)
	leaks := 0
	for i := range 100 {
		sec := fmt.Sprintf("RaceSecret%05dValue_0123456789abcdef", i)
		start := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			<-start
			r.String("Authorization: Bearer " + sec)
		}()
		close(start)
		out := r.String("use " + sec + " " + pad + " Authorization: Bearer " + sec)
		<-done
		if strings.Contains(out, sec) {
			leaks++
		}
	}
	if leaks > 0 {
		t.Errorf("%d of 100 outputs hold their secret in clear", leaks)
	}
}

// An input needing more than maxSettlePasses: each pass's literals uncover the next pattern match (a
// user pattern that reads the value after a token, in a JSON member's second redaction). The last
// secret the redactor finds, and knows, must not be left bare.
func TestHostileTally_MoreThanThreePasses(t *testing.T) {
	after := Pattern{Name: "after-token", Regexp: regexp.MustCompile(`arw:redacted:[0-9a-f]{32}=(?P<secret>[a-z]{24})`)}
	r := New(append(BuiltinPatterns(), after))
	s2, s3, s4 := "secondsecretvalueabcdefg", "thirdsecretvalueabcdefgh", "fourthsecretvalueabcdefg"
	doc := `{"m":"` + hostileBearer + `=` + s2 + ` ` + s2 + `=` + s3 + ` ` + s3 + `=` + s4 + ` ` + s4 +
		` Authorization: Bearer ` + hostileBearer + `"}`
	out, err := r.JSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	known := r.Secrets()
	for _, s := range []string{hostileBearer, s2, s3, s4} {
		if _, learned := known[Token(s)]; learned && strings.Contains(string(out), s) {
			t.Errorf("learned secret %q in clear: %s", s, out)
		}
	}
	hostileCheck(t, string(out), r.Counts())
}

// Counts per pattern equal the output's tokens per pattern on a mixed input (each secret's token is
// looked up to name its pattern).
func TestHostileTally_CountsPerPatternEqualTokens(t *testing.T) {
	r := New(BuiltinPatterns())
	in := "a " + hostileBearer + " b " + hostileAnthro + " c " + hostileAWSSec + " aws_secret_access_key=" + hostileAWSSec +
		" Bearer " + hostileBearer + " x-api-key: " + hostileAnthro + " and ghp_" + strings.Repeat("A1", 18)
	out := r.String(in)
	per := map[string]int{
		"bearer-token":          strings.Count(out, Token(hostileBearer)),
		"anthropic-api-key":     strings.Count(out, Token(hostileAnthro)),
		"aws-secret-access-key": strings.Count(out, Token(hostileAWSSec)),
		"github-token":          strings.Count(out, Token("ghp_"+strings.Repeat("A1", 18))),
	}
	c := r.Counts()
	for name, n := range per {
		if c[name] != n {
			t.Errorf("%s: count %d, tokens %d (%v) in %q", name, c[name], n, c, out)
		}
	}
	hostileCheck(t, out, c, hostileBearer, hostileAnthro, hostileAWSSec)
}

// An encoded form (base64, percent-encoding) of a secret that stands before the secret's pattern is
// redacted in the same string, and counted as the token it became.
func TestHostileTally_EncodedFormBeforePattern(t *testing.T) {
	r := New(BuiltinPatterns())
	b64 := base64.StdEncoding.EncodeToString([]byte(hostileBearer2))
	out := r.String("b64 " + b64 + " raw " + base64.RawURLEncoding.EncodeToString([]byte(hostileBearer2)) +
		" then Authorization: Bearer " + hostileBearer2)
	hostileCheck(t, out, r.Counts(), hostileBearer2, b64, strings.TrimRight(b64, "="))
}
