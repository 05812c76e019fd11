package rewind

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/convergence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// TokenKind names an entry of the closed verdict vocabulary.
type TokenKind string

// The built-in vocabulary. Every kind has exactly one kernel-owned template below.
const (
	KindResumeVerdict          TokenKind = "resume-verdict"
	KindConvergenceVerdict     TokenKind = "convergence-verdict"
	KindResidualSteps          TokenKind = "residual-steps"
	KindVerifiedSteps          TokenKind = "verified-steps"
	KindResumePoint            TokenKind = "resume-point"
	KindClaimedWithoutEvidence TokenKind = "claimed-without-evidence"
	KindUnpromisedFiles        TokenKind = "unpromised-files"
)

// Token is one closed verdict token. Its fields are unexported: only the constructors below can fill
// them, and they only accept typed verdicts, counts and well-formed SHAs — never prose. The zero Token
// has no kind and is dropped from any note.
type Token struct {
	kind  TokenKind
	value string // a verdict spelling or a SHA, validated by the constructor
	count int
}

// Kind is the token's vocabulary entry.
func (t Token) Kind() TokenKind { return t.kind }

// ResumeVerdictToken states the resume verdict. An unknown verdict yields the zero Token.
func ResumeVerdictToken(v resume.Verdict) Token {
	if !v.Known() {
		return Token{}
	}
	return Token{kind: KindResumeVerdict, value: string(v)}
}

// ConvergenceToken states the convergence verdict. An unknown verdict yields the zero Token.
func ConvergenceToken(v convergence.Verdict) Token {
	if !v.Known() {
		return Token{}
	}
	return Token{kind: KindConvergenceVerdict, value: string(v)}
}

// ResidualStepsToken counts the steps still to do; a negative count yields the zero Token.
func ResidualStepsToken(n int) Token { return countToken(KindResidualSteps, n) }

// VerifiedStepsToken counts the re-verified prefix; a negative count yields the zero Token.
func VerifiedStepsToken(n int) Token { return countToken(KindVerifiedSteps, n) }

// ClaimedWithoutEvidenceToken counts steps marked done with no evidence behind them.
func ClaimedWithoutEvidenceToken(n int) Token { return countToken(KindClaimedWithoutEvidence, n) }

// UnpromisedFilesToken counts changed files no plan step names.
func UnpromisedFilesToken(n int) Token { return countToken(KindUnpromisedFiles, n) }

// shaPattern is what a resume point must look like to be rendered: hex, at least the abbreviated
// floor, at most a SHA-256 object name. Anything else could carry words.
var shaPattern = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// ResumePointToken names the re-entry commit. Anything but a lower-case hex SHA of 7–64 characters
// yields the zero Token.
func ResumePointToken(sha string) Token {
	sha = strings.ToLower(strings.TrimSpace(sha))
	if !shaPattern.MatchString(sha) {
		return Token{}
	}
	return Token{kind: KindResumePoint, value: sha}
}

func countToken(k TokenKind, n int) Token {
	if n < 0 {
		return Token{}
	}
	return Token{kind: k, count: n}
}

// templates are the kernel-owned renderings; a Token's text is always one of these over its fields.
var templates = map[TokenKind]func(Token) string{
	KindResumeVerdict: func(t Token) string { return "resume verdict: " + t.value },
	KindConvergenceVerdict: func(t Token) string {
		return "convergence verdict: " + t.value
	},
	KindResidualSteps: func(t Token) string {
		return fmt.Sprintf("residual: %d declared step(s) are not re-verified against the workspace", t.count)
	},
	KindVerifiedSteps: func(t Token) string {
		return fmt.Sprintf("verified prefix: %d step(s) re-adjudicated on their commit footprint", t.count)
	},
	KindResumePoint: func(t Token) string { return "re-entry point: commit " + t.value },
	KindClaimedWithoutEvidence: func(t Token) string {
		return fmt.Sprintf("%d step(s) were marked done with no evidence in the recorded tool stream", t.count)
	},
	KindUnpromisedFiles: func(t Token) string {
		return fmt.Sprintf("%d changed file(s) are named by no plan step", t.count)
	},
}

// Registry is the active vocabulary: a subset of the built-in kinds. It cannot hold a template of its
// own, so narrowing the vocabulary is the only thing a caller can do with it.
type Registry struct {
	kinds map[TokenKind]bool
}

// BaseRegistry knows every built-in kind.
func BaseRegistry() *Registry {
	r := &Registry{kinds: map[TokenKind]bool{}}
	for k := range templates {
		r.kinds[k] = true
	}
	return r
}

// NewRegistry knows only the given kinds; kinds outside the built-in vocabulary are ignored.
func NewRegistry(kinds ...TokenKind) *Registry {
	r := &Registry{kinds: map[TokenKind]bool{}}
	for _, k := range kinds {
		if _, ok := templates[k]; ok {
			r.kinds[k] = true
		}
	}
	return r
}

// Known reports whether the registry renders tokens of kind k.
func (r *Registry) Known(k TokenKind) bool { return r != nil && r.kinds[k] }

// Kinds lists the registry's kinds, sorted.
func (r *Registry) Kinds() []TokenKind {
	var out []TokenKind
	for k := range r.kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Render is the token's text through its kernel-owned template; false for a kind the registry does
// not know.
func (r *Registry) Render(t Token) (string, bool) {
	if !r.Known(t.kind) {
		return "", false
	}
	return templates[t.kind](t), true
}
