package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
)

// TokenPrefix starts every redaction token.
const TokenPrefix = "arw:redacted:"

// TokenHexLen is how many hex characters of sha256(secret) follow TokenPrefix: 48 bits, enough to
// keep distinct secrets of one recording apart while revealing nothing useful about them.
const TokenHexLen = 12

// tokenRegexp finds tokens. It has no trailing boundary on purpose: a secret may have been followed
// directly by hex characters, and the token must still be recognised in front of them.
var tokenRegexp = regexp.MustCompile(regexp.QuoteMeta(TokenPrefix) + `[0-9a-f]{12}`)

// Token returns the deterministic token that stands for secret in redacted output.
func Token(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return TokenPrefix + hex.EncodeToString(sum[:])[:TokenHexLen]
}

// Redactor replaces secrets by tokens and remembers what it replaced. It is safe for concurrent use.
type Redactor struct {
	patterns []compiledPattern                 // configured, fixed after New
	literals atomic.Pointer[[]compiledPattern] // learned while recording (AddLiteral), copy-on-write

	mu      sync.Mutex
	counts  map[string]int    // pattern name → occurrences redacted
	secrets map[string]string // token → secret
}

type compiledPattern struct {
	name  string
	re    *regexp.Regexp
	group int      // index of the "secret" group, or 0 for the whole match
	hints [][]byte // lower-case literals every match contains; nil means none known
	// literal is the secret itself for a pattern added by AddLiteral.
	literal string
}

// mayMatch reports whether the pattern can match a document whose lower-case form is lower.
func (p compiledPattern) mayMatch(lower []byte) bool {
	if len(p.hints) == 0 {
		return true
	}
	for _, h := range p.hints {
		if bytes.Contains(lower, h) {
			return true
		}
	}
	return false
}

// finding is one secret replaced during a call, recorded under the lock once the call is done so the
// (slow) regexp work runs outside it.
type finding struct {
	pattern, token, secret string
}

// New returns a Redactor applying patterns in order (typically append(BuiltinPatterns(), user...)).
// It panics on a pattern without a Regexp: that is a programming error, not an input error.
func New(patterns []Pattern) *Redactor {
	r := &Redactor{counts: map[string]int{}, secrets: map[string]string{}}
	for i, p := range patterns {
		if p.Regexp == nil {
			panic(fmt.Sprintf("redact: pattern %d (%q) has no Regexp", i, p.Name))
		}
		group := max(p.Regexp.SubexpIndex(secretGroup), 0)
		var hints [][]byte
		for _, h := range p.Hints {
			hints = append(hints, []byte(strings.ToLower(h)))
		}
		r.patterns = append(r.patterns, compiledPattern{name: p.Name, re: p.Regexp, group: group, hints: hints})
	}
	return r
}

// String replaces every secret in s by its token.
func (r *Redactor) String(s string) string {
	var found []finding
	out := r.redact(s, 0, &found)
	r.record(found)
	return out
}

// Counts returns how many occurrences each pattern redacted so far (a copy).
func (r *Redactor) Counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.counts)
}

// Secrets returns the token → secret map of everything redacted so far (a copy), ready for
// Vault.Merge.
func (r *Redactor) Secrets() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.secrets)
}

func (r *Redactor) record(found []finding) {
	if len(found) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range found {
		r.counts[f.pattern]++
		r.secrets[f.token] = f.secret
	}
}

// redact applies every pattern in order. Only secrets starting at or after byte from are replaced:
// that lets a caller prepend context (a JSON key) that patterns may match on but must not rewrite.
func (r *Redactor) redact(s string, from int, found *[]finding) string {
	for _, p := range r.all() {
		s = p.replace(s, from, found)
	}
	return s
}

// all is the configured patterns followed by the learned literals.
func (r *Redactor) all() []compiledPattern {
	lits := r.literals.Load()
	if lits == nil {
		return r.patterns
	}
	return append(r.patterns[:len(r.patterns):len(r.patterns)], *lits...)
}

// AddLiteral makes every later occurrence of secret a redacted secret, counted under name. It is for
// values known to be secret at run time that no pattern describes, such as a credential the agent
// read from its environment. Literals are not part of PatternNames: they are learned, not configured.
func (r *Redactor) AddLiteral(name, secret string) {
	if secret == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var next []compiledPattern
	if cur := r.literals.Load(); cur != nil {
		for _, p := range *cur {
			if p.literal == secret {
				return
			}
		}
		next = append(next, *cur...)
	}
	next = append(next, compiledPattern{name: name, re: regexp.MustCompile(regexp.QuoteMeta(secret)),
		hints: [][]byte{bytes.ToLower([]byte(secret))}, literal: secret})
	r.literals.Store(&next)
}

func (p compiledPattern) replace(s string, from int, found *[]finding) string {
	matches := p.re.FindAllStringSubmatchIndex(s, -1)
	if matches == nil {
		return s
	}
	tokens := tokenRegexp.FindAllStringIndex(s, -1)
	var b strings.Builder
	last := 0
	for _, m := range matches {
		start, end := m[2*p.group], m[2*p.group+1]
		if start < from || end <= start || overlapsAny(tokens, start, end) {
			continue
		}
		secret := s[start:end]
		token := Token(secret)
		b.WriteString(s[last:start])
		b.WriteString(token)
		last = end
		*found = append(*found, finding{pattern: p.name, token: token, secret: secret})
	}
	if b.Len() == 0 {
		return s // nothing replaced (a replacement always writes a non-empty token)
	}
	b.WriteString(s[last:])
	return b.String()
}

// overlapsAny reports whether [start,end) touches one of the spans. Redacting over an existing token
// would lose the original secret's token, and redaction must be idempotent.
func overlapsAny(spans [][]int, start, end int) bool {
	for _, sp := range spans {
		if start < sp[1] && sp[0] < end {
			return true
		}
	}
	return false
}
