package redact

import (
	"strings"
	"testing"
)

func TestBuiltinPatternsRedactTheirShape(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		input   string
		secret  string // the exact substring that must become a token
	}{
		{"anthropic key", "anthropic-api-key", "key " + fakeAnthropicKey + " end", fakeAnthropicKey},
		{"openai legacy key", "openai-api-key", "OPENAI_API_KEY=" + fakeOpenAILegacy, fakeOpenAILegacy},
		{"openai project key", "openai-api-key", `"` + fakeOpenAIProj + `"`, fakeOpenAIProj},
		{"aws access key id", "aws-access-key-id", "id: " + fakeAWSKeyID + ".", fakeAWSKeyID},
		{"aws temporary key id", "aws-access-key-id", fakeAWSSTSKeyID, fakeAWSSTSKeyID},
		{"aws secret in ini", "aws-secret-access-key", "aws_secret_access_key = " + fakeAWSSecret + "\n", fakeAWSSecret},
		{"aws secret in env", "aws-secret-access-key", "AWS_SECRET_ACCESS_KEY=" + fakeAWSSecret, fakeAWSSecret},
		{"aws secret in yaml", "aws-secret-access-key", "awsSecretAccessKey: '" + fakeAWSSecret + "'", fakeAWSSecret},
		{"aws secret in inline json", "aws-secret-access-key", `{"aws_secret_access_key": "` + fakeAWSSecret + `"}`, fakeAWSSecret},
		{"github classic token", "github-token", "token " + fakeGitHubPAT, fakeGitHubPAT},
		{"github fine-grained token", "github-token", fakeGitHubFine + " ok", fakeGitHubFine},
		{"bearer header keeps the scheme", "bearer-token", "Authorization: Bearer " + fakeJWT, fakeJWT},
		{"bearer lowercase scheme", "bearer-token", "authorization: bearer " + fakeJWT + "\r\n", fakeJWT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(BuiltinPatterns())
			got := r.String(tt.input)
			want := strings.Replace(tt.input, tt.secret, Token(tt.secret), 1)
			if got != want {
				t.Fatalf("String(%q)\n got %q\nwant %q", tt.input, got, want)
			}
			if counts := r.Counts(); counts[tt.pattern] != 1 || len(counts) != 1 {
				t.Fatalf("Counts() = %v, want only %s=1", counts, tt.pattern)
			}
		})
	}
}

func TestBuiltinPatternsLeaveLookalikesAlone(t *testing.T) {
	tests := []struct{ name, input string }{
		{"prose", "The bearer of this letter asked for the AKIA docs and a GitHub token; see ghp_ prefixes."},
		{"short anthropic prefix", "use sk-ant-api03-short as a placeholder"},
		{"sk inside a word", "risk-" + strings.Repeat("a", 40)},
		{"hyphenated phrase after sk-", "sk-this-is-not-a-key-but-a-rather-long-hyphenated-phrase"},
		{"scikit-learn", "pip install sk-learn"},
		{"lowercase aws key id", strings.ToLower(fakeAWSKeyID)},
		{"aws key id too long", fakeAWSKeyID + "X"},
		{"aws key id glued to a word", "X" + fakeAWSKeyID},
		{"aws key id too short", "AKIA1234"},
		{"40 chars without the key name", "checksum " + fakeAWSSecret},
		{"aws secret of 41 chars", "aws_secret_access_key=" + fakeAWSSecret + "Q"},
		{"aws secret key name in prose", "set aws_secret_access_key in your profile"},
		{"github prefix alone", "tokens look like ghp_abc"},
		{"bearer word", "Bearer token authentication"},
		{"bearer placeholder", "Authorization: Bearer $TOKEN"},
		{"bearer short value", "Authorization: Bearer abc123"},
		{"an existing token", "Bearer " + Token("x") + " and " + Token("y")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(BuiltinPatterns())
			if got := r.String(tt.input); got != tt.input {
				t.Fatalf("String(%q) = %q, want it unchanged", tt.input, got)
			}
			if counts := r.Counts(); len(counts) != 0 {
				t.Fatalf("Counts() = %v, want none", counts)
			}
		})
	}
}

func TestAnthropicKeyIsNotAlsoCountedAsOpenAI(t *testing.T) {
	r := New(BuiltinPatterns())
	got := r.String("Bearer " + fakeAnthropicKey)
	if want := "Bearer " + Token(fakeAnthropicKey); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	counts := r.Counts()
	if counts["anthropic-api-key"] != 1 || counts["openai-api-key"] != 0 || counts["bearer-token"] != 0 {
		t.Fatalf("Counts() = %v, want the anthropic pattern alone", counts)
	}
}

func TestParsePatterns(t *testing.T) {
	specs := []string{`internal-token=itk_[0-9a-f]{16}`, `zz[0-9]{6}`, `apikey=key=[0-9a-f]{8}`, `(?i)pin=(?P<secret>[0-9]{6})`}
	got, err := ParsePatterns(specs)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, expr string }{
		{"internal-token", `itk_[0-9a-f]{16}`},
		{"user-1", `zz[0-9]{6}`},
		{"apikey", `key=[0-9a-f]{8}`},
		{"user-2", `(?i)pin=(?P<secret>[0-9]{6})`}, // "(?i)pin" is not a name, so the spec is bare
	}
	if len(got) != len(want) {
		t.Fatalf("got %d patterns, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Regexp.String() != w.expr {
			t.Errorf("pattern %d = %s=%s, want %s=%s", i, got[i].Name, got[i].Regexp, w.name, w.expr)
		}
	}
}

func TestParsePatternsRejects(t *testing.T) {
	tests := []struct {
		name    string
		specs   []string
		wantErr []string
	}{
		{"bad regexp names index and cause", []string{`ok=a+`, `broken=(a`}, []string{"pattern 1", "broken", "missing closing )"}},
		{"empty regexp", []string{`empty=`}, []string{"pattern 0", "empty regexp"}},
		{"matches the empty string", []string{`a*`}, []string{"pattern 0", "user-1", "matches the empty string"}},
		{"duplicate names", []string{`x=a+`, `x=b+`}, []string{"pattern 1", `duplicate pattern name "x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePatterns(tt.specs)
			if err == nil {
				t.Fatal("ParsePatterns succeeded, want an error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestHintsAreContainedInEveryMatch guards the fast path: a builtin pattern is skipped for a document
// that holds none of its hints, so every string a pattern matches must contain one of them.
func TestHintsAreContainedInEveryMatch(t *testing.T) {
	samples := map[string]string{
		"anthropic-api-key":     "sk-ant-api03-" + strings.Repeat("Ab1_", 10),
		"openai-api-key":        "sk-proj-" + strings.Repeat("Ab1_", 10),
		"aws-access-key-id":     "AKIAIOSFODNN7EXAMPLE",
		"aws-secret-access-key": "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
		"github-token":          "ghp_" + strings.Repeat("a1B2", 10),
		"bearer-token":          "Authorization: BEARER " + strings.Repeat("x1.Y", 8),
	}
	for _, p := range BuiltinPatterns() {
		sample, ok := samples[p.Name]
		if !ok {
			t.Fatalf("no sample for builtin pattern %s", p.Name)
		}
		if !p.Regexp.MatchString(sample) {
			t.Fatalf("%s does not match its sample %q", p.Name, sample)
		}
		lower := strings.ToLower(sample)
		found := false
		for _, h := range p.Hints {
			found = found || strings.Contains(lower, h)
		}
		if len(p.Hints) == 0 || !found {
			t.Errorf("%s: sample %q holds none of the hints %q", p.Name, sample, p.Hints)
		}
	}
}
