package redact

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Pattern is a named secret shape. If Regexp has a capture group named "secret", only that group is
// replaced (e.g. the token after "Bearer "); otherwise the whole match is.
type Pattern struct {
	Name   string
	Regexp *regexp.Regexp
	// Hints are lower-case literals at least one of which every match contains. A document holding
	// none of them cannot match, so the regexp is not run over it: the common clean document costs a
	// few substring searches instead of a backtracking scan per pattern. Empty means always run.
	Hints []string
}

// secretGroup is the capture group that, when present, narrows a match to the secret itself, so the
// surrounding context ("Bearer ", "aws_secret_access_key=") survives redaction and stays readable.
const secretGroup = "secret"

// BuiltinPatterns returns the secret shapes redacted by default, in the order they are applied.
// Order matters: the Anthropic key runs before the OpenAI key (both start with "sk-"), and a token
// produced by an earlier pattern is never matched again by a later one.
//
// Each shape anchors on a vendor prefix or an explicit key name and demands a long body, because a
// false positive silently corrupts a recording while a false negative is visible in the pack summary.
func BuiltinPatterns() []Pattern {
	return []Pattern{
		// sk-ant-api03-<~95 chars>; the 32-char floor keeps "sk-ant-" mentioned in prose intact.
		{Name: "anthropic-api-key", Regexp: regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]{32,}`), Hints: []string{"sk-ant-"}},
		// Project/service/admin keys carry '-' and '_'; legacy keys are sk- plus 48 alphanumerics.
		// The legacy branch demands an unbroken alphanumeric run so "sk-ant-..." can never match it.
		{Name: "openai-api-key", Regexp: regexp.MustCompile(`\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{32,}|[A-Za-z0-9]{32,})`), Hints: []string{"sk-"}},
		{Name: "aws-access-key-id", Regexp: regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`), Hints: []string{"akia", "asia"}},
		// A secret access key is 40 base64 characters with no prefix of its own, so it is only
		// recognised next to its name (ini, env, YAML or JSON spelling). The trailing class stands
		// in for a lookahead (RE2 has none): a 41st key character means it is something else.
		{Name: "aws-secret-access-key", Regexp: regexp.MustCompile(
			`(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`), Hints: []string{"access"}},
		{Name: "github-token", Regexp: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b`), Hints: []string{"gh", "github_pat_"}},
		// RFC 6750 token68 characters; 20+ of them so "the bearer of this letter" is left alone.
		{Name: "bearer-token", Regexp: regexp.MustCompile(`\b(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{20,}=*)`), Hints: []string{"bearer"}},
	}
}

// validName is what a user pattern name may look like; anything else before the first '=' means the
// whole spec is a bare regexp.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// ParsePatterns parses user patterns given as "name=regexp" or as a bare regexp (named user-1,
// user-2, ... by position among the bare ones). The text before the first '=' is taken as a name only
// if it looks like one (letters, digits, '-', '_', '.'); a bare regexp that itself starts with such a
// text and an '=' must therefore be given a name. A regexp that matches the empty string is refused:
// it would "redact" nothing everywhere.
func ParsePatterns(specs []string) ([]Pattern, error) {
	patterns := make([]Pattern, 0, len(specs))
	seen := make(map[string]bool, len(specs))
	bare := 0
	for i, spec := range specs {
		name, expr := splitSpec(spec)
		if name == "" {
			bare++
			name = fmt.Sprintf("user-%d", bare)
		}
		re, err := compileUserPattern(expr)
		if err != nil {
			return nil, fmt.Errorf("redact: pattern %d (%s): %w", i, name, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("redact: pattern %d: duplicate pattern name %q", i, name)
		}
		seen[name] = true
		patterns = append(patterns, Pattern{Name: name, Regexp: re})
	}
	return patterns, nil
}

func splitSpec(spec string) (name, expr string) {
	before, after, ok := strings.Cut(spec, "=")
	if ok && validName.MatchString(before) {
		return before, after
	}
	return "", spec
}

func compileUserPattern(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, errors.New("empty regexp")
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	if re.MatchString("") {
		return nil, fmt.Errorf("regexp %q matches the empty string", expr)
	}
	return re, nil
}
