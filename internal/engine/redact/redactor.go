package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// TokenPrefix starts every redaction token.
const TokenPrefix = "arw:redacted:"

// TokenHexLen is how many hex characters of sha256(secret) follow TokenPrefix: 128 bits, so that
// two secrets sharing a token cannot be searched for.
const TokenHexLen = 32

// LegacyTokenHexLen is the length of the tokens of recordings made before tokens carried 128 bits.
// They are still recognised (a vault restores them) but never minted.
const LegacyTokenHexLen = 12

// Token returns the deterministic token that stands for secret in redacted output.
func Token(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return TokenPrefix + hex.EncodeToString(sum[:])[:TokenHexLen]
}

// tokenCandidates calls f with the spans of s that may be tokens: TokenPrefix followed by a run of
// TokenHexLen, then of LegacyTokenHexLen, lower-case hex characters, whatever follows them. f picks at
// most one per prefix by returning true; which spans are really tokens is for the caller to know.
func tokenCandidates(s string, f func(start, end int) bool) {
	for off := 0; ; {
		i := strings.Index(s[off:], TokenPrefix)
		if i < 0 {
			return
		}
		start := off + i
		hexStart := start + len(TokenPrefix)
		for _, n := range []int{TokenHexLen, LegacyTokenHexLen} {
			if hexStart+n <= len(s) && isLowerHex(s[hexStart:hexStart+n]) && f(start, hexStart+n) {
				break
			}
		}
		off = hexStart
	}
}

// FindTokens returns the spans of the whole tokens in b, of either length: TokenPrefix and a hex run
// of TokenHexLen or LegacyTokenHexLen characters that ends b, or is followed by a character that is
// not a letter or a digit, or by another token. Text that merely starts like a token ("arw:redacted:"
// before a secret whose first characters happen to be hex) is not one. It is for counting tokens in
// stored bytes; redaction itself only honours the tokens it minted.
func FindTokens(b []byte) [][]int {
	var spans [][]int
	s := string(b)
	tokenCandidates(s, func(start, end int) bool {
		rest := s[end:]
		if rest == "" || !isAlnum(rest[0]) || strings.HasPrefix(rest, TokenPrefix) {
			spans = append(spans, []int{start, end})
			return true
		}
		return false
	})
	return spans
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Redactor replaces secrets by tokens and remembers what it replaced. It is safe for concurrent use.
//
// Every secret it has found is afterwards redacted wherever it appears, like a literal: a key first
// seen next to its name ("aws_secret_access_key=…") is still redacted when it later shows up bare.
type Redactor struct {
	patterns []compiledPattern // configured, fixed after New
	// literals are the secrets learned while recording (AddLiteral) and every secret found so far,
	// copy-on-write, written under mu.
	literals atomic.Pointer[[]compiledPattern]

	// generation counts the changes to what the redactor knows (literals, minted tokens): the same
	// text redacts the same way while it stays the same (Generation).
	generation atomic.Uint64

	mu      sync.Mutex
	counts  map[string]int    // pattern name → occurrences redacted
	secrets map[string]string // token → secret
	known   map[string]bool   // the literal of every entry of literals
	// withheld maps each form of a secret withheld from the agent to the secret (MarkWithheld).
	withheld map[string]string
}

type compiledPattern struct {
	name  string
	re    *regexp.Regexp
	group int      // index of the "secret" group, or 0 for the whole match
	hints [][]byte // lower-case literals every match contains; nil means none known
	// literal is the secret itself for a learned secret (AddLiteral, or found by a pattern).
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
	// silent: the secret is learned (and kept in the vault) but not counted, because its token is not
	// in the output: a string holding it was replaced as a whole.
	silent bool
	// whole: the secret is a whole string replaced because of a secret its escapes hid; it is kept in
	// the vault but not learned as a literal (the secrets inside it are).
	whole bool
}

// New returns a Redactor applying patterns in order (typically append(BuiltinPatterns(), user...)).
// It panics on a pattern without a Regexp: that is a programming error, not an input error.
func New(patterns []Pattern) *Redactor {
	r := &Redactor{counts: map[string]int{}, secrets: map[string]string{}, known: map[string]bool{}}
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

// String replaces every secret in s by its token. Like a JSON string value, s is replaced as a whole
// when a secret can only be read from it through JSON escapes (see JSON).
func (r *Redactor) String(s string) string { return r.stringCounted(r.counts, s) }

// stringCounted is String counting into counts.
func (r *Redactor) stringCounted(counts map[string]int, s string) string {
	var out string
	_ = r.settle(counts, func(found *[]finding) error {
		out = r.redactText("", s, found)
		return nil
	})
	return out
}

// maxSettlePasses bounds settle. A second pass redacts what the first taught; more are needed only
// when a pass's literals uncover another pattern's match, or while other goroutines keep teaching
// the redactor. Past the bound the last pass is kept: it is never less redacted than the one before.
const maxSettlePasses = 8

// settle runs pass, which redacts its input with what the redactor knows and appends what it found,
// and records the findings of the last pass, counting them into counts. A pass that finds a secret
// the redactor did not know may have left that secret bare earlier in the same input, where no
// pattern saw it ("use S ... Authorization: Bearer S"): its findings are then learned, not counted,
// and the input is redacted again, so the output holds the secret nowhere and the counts are of the
// output's tokens. So is a pass during which another goroutine taught the redactor: the secret it
// learned may stand in this input, and this pass did not know it.
func (r *Redactor) settle(counts map[string]int, pass func(found *[]finding) error) error {
	for n := 1; ; n++ {
		learned := r.Generation()
		var found []finding
		if err := pass(&found); err != nil {
			return err // record nothing: the caller gets no output to pair with it
		}
		if n == maxSettlePasses || (!r.teaches(found) && r.Generation() == learned) {
			r.learn(found, counts)
			return nil
		}
		r.learn(found, nil)
	}
}

// teaches reports whether found holds a secret the redactor has not recorded.
func (r *Redactor) teaches(found []finding) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range found {
		if _, known := r.secrets[f.token]; !known {
			return true
		}
	}
	return false
}

// Counts returns how many occurrences each pattern redacted so far (a copy).
func (r *Redactor) Counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.counts)
}

// Secrets returns the token → secret map of everything redacted so far (a copy), ready for
// Vault.Merge, with the mark of each secret withheld from the agent that was redacted (MarkWithheld).
func (r *Redactor) Secrets() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := maps.Clone(r.secrets)
	r.withheldMarksLocked(m)
	return m
}

// Snapshot returns a Redactor that knows what r knows now — its patterns, the secrets it learned and
// the tokens it minted — and learns and counts on its own from then on. It is for text that must be
// redacted but must not teach r: what r learns changes how later requests are stored, and a replay,
// which never sees that text, would not learn it.
func (r *Redactor) Snapshot() *Redactor {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &Redactor{patterns: r.patterns, counts: map[string]int{}, secrets: maps.Clone(r.secrets), known: maps.Clone(r.known),
		withheld: maps.Clone(r.withheld)}
	s.literals.Store(r.literals.Load()) // copy-on-write: never changed in place
	s.generation.Store(r.generation.Load())
	return s
}

// A Tally redacts with its Redactor and teaches it every secret it finds at once, but keeps the
// counts until Commit. A caller that may redo its work commits only the pass it keeps: a request
// prepared again because one of its parts taught the redactor a secret counts its secrets once. A
// Tally is for one goroutine; its Redactor may be shared.
type Tally struct {
	r      *Redactor
	counts map[string]int // written under r.mu
}

// Tally starts a tally of redactions to commit later.
func (r *Redactor) Tally() *Tally { return &Tally{r: r, counts: map[string]int{}} }

// String is Redactor.String, counted into the tally.
func (t *Tally) String(s string) string { return t.r.stringCounted(t.counts, s) }

// JSON is Redactor.JSON, counted into the tally.
func (t *Tally) JSON(doc []byte) ([]byte, error) { return t.r.jsonCounted(t.counts, doc) }

// Commit adds the tally's counts to the Redactor's and empties the tally.
func (t *Tally) Commit() {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	for name, n := range t.counts {
		t.r.counts[name] += n
	}
	clear(t.counts)
}

// record counts found into the Redactor's counts and learns its secrets.
func (r *Redactor) record(found []finding) { r.learn(found, r.counts) }

// learn learns found's secrets, counting them into counts unless it is nil. Two secrets behind one token would
// make the vault restore the wrong one: with 128-bit tokens that takes a SHA-256 collision, so it
// panics.
func (r *Redactor) learn(found []finding, counts map[string]int) {
	if len(found) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var learn []compiledPattern
	minted := false
	for _, f := range found {
		if prev, ok := r.secrets[f.token]; ok && prev != f.secret {
			panic("redact: two different secrets share token " + f.token)
		}
		if counts != nil && !f.silent {
			counts[f.pattern]++
		}
		if _, known := r.secrets[f.token]; !known {
			minted = true // a minted token shields its text from then on
		}
		r.secrets[f.token] = f.secret
		if !f.whole {
			learn = r.literalFormsLocked(learn, f.pattern, f.secret)
		}
	}
	r.storeLiteralsLocked(learn)
	if minted && len(learn) == 0 {
		r.generation.Add(1)
	}
}

// redact applies every pattern in order. Only secrets starting at or after byte from are replaced:
// that lets a caller prepend context (a JSON key) that patterns may match on but must not rewrite.
func (r *Redactor) redact(s string, from int, found *[]finding) string {
	for _, p := range r.all() {
		s = r.replace(p, s, from, found)
	}
	return s
}

// all is the configured patterns followed by the learned literals.
func (r *Redactor) all() []compiledPattern {
	lits := r.literals.Load()
	switch {
	case lits == nil:
		return r.patterns
	case len(r.patterns) == 0:
		return *lits // never changed in place (copy-on-write)
	}
	return append(r.patterns[:len(r.patterns):len(r.patterns)], *lits...)
}

// AddLiteral makes every later occurrence of secret a redacted secret, counted under name. It is for
// values known to be secret at run time that no pattern describes, such as a credential the agent
// read from its environment. Literals are not part of PatternNames: they are learned, not configured.
//
// The forms the secret takes inside a Go-quoted (%q) or JSON string are learned with it when they
// differ, so a secret holding '"' or '\' is still found once an agent has quoted it; so are its
// encodings an agent or a tool may send it in: base64 and base64url, padded and raw, and percent-
// encoding (query and path, upper- and lower-case hex).
func (r *Redactor) AddLiteral(name, secret string) {
	if secret == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.storeLiteralsLocked(r.literalFormsLocked(nil, name, secret))
}

// literalFormsLocked appends to learn a literal pattern for each form of secret not known yet.
func (r *Redactor) literalFormsLocked(learn []compiledPattern, name, secret string) []compiledPattern {
	for _, form := range append(quotedForms(secret), encodedForms(secret)...) {
		if form == "" || r.known[form] {
			continue
		}
		r.known[form] = true
		learn = append(learn, compiledPattern{name: name, re: regexp.MustCompile(regexp.QuoteMeta(form)),
			hints: [][]byte{bytes.ToLower([]byte(form))}, literal: form})
	}
	return learn
}

func (r *Redactor) storeLiteralsLocked(learn []compiledPattern) {
	if len(learn) == 0 {
		return
	}
	var next []compiledPattern
	if cur := r.literals.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, learn...)
	// Longest first: a secret that holds an earlier, shorter one is replaced whole, not cut around
	// the shorter one's token.
	slices.SortStableFunc(next, func(a, b compiledPattern) int { return len(b.literal) - len(a.literal) })
	r.literals.Store(&next)
	r.generation.Add(1)
}

// Generation changes whenever the redactor learns a secret or mints a token, and only then: a
// document redacted twice under one generation is redacted the same way both times, so a caller may
// keep what it redacted and reuse it while Generation reads the same. (The bump follows the change:
// a caller that reads it, then redacts, then keeps the result under what it read, at worst discards
// a result it could have kept.)
func (r *Redactor) Generation() uint64 { return r.generation.Load() }

// quotedForms is secret followed by the inner text of its Go-quoted (%q, %+q) and JSON-encoded
// (with and without HTML escapes) forms.
func quotedForms(secret string) []string {
	forms := []string{secret, inner(strconv.Quote(secret)), inner(strconv.QuoteToASCII(secret))}
	if j, err := json.Marshal(secret); err == nil {
		forms = append(forms, inner(string(j)))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(secret) == nil {
		forms = append(forms, inner(strings.TrimSuffix(b.String(), "\n")))
	}
	return forms
}

// encodedForms are the base64 (standard and URL alphabets, padded first so a padded form is replaced
// whole) and percent-encoded spellings of secret.
func encodedForms(secret string) []string {
	b := []byte(secret)
	forms := []string{base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b)}
	for _, esc := range []string{url.QueryEscape(secret), url.PathEscape(secret)} {
		forms = append(forms, esc, lowerHexEscapes(esc))
	}
	return forms
}

// lowerHexEscapes spells the %XX escapes of s in lower-case hex.
func lowerHexEscapes(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lowerHex(b[i+1]), lowerHex(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func lowerHex(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// inner strips the quotes around a quoted string.
func inner(q string) string { return q[1 : len(q)-1] }

// replace replaces the matches of p in s. A match overlapping a token this redactor minted (in this
// call or before) is left alone, so redaction is idempotent and never loses a secret's token; text
// that only looks like a token ("arw:redacted:" written before a secret) protects nothing.
func (r *Redactor) replace(p compiledPattern, s string, from int, found *[]finding) string {
	matches := p.re.FindAllStringSubmatchIndex(s, -1)
	if matches == nil {
		return s
	}
	tokens := r.mintedTokens(s, *found)
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

// mintedTokens returns the spans of s holding a token this redactor minted: one of found's, or one
// it recorded before.
func (r *Redactor) mintedTokens(s string, found []finding) [][]int {
	if !strings.Contains(s, TokenPrefix) {
		return nil
	}
	var spans [][]int
	tokenCandidates(s, func(start, end int) bool {
		tok := s[start:end]
		if end-start != len(TokenPrefix)+TokenHexLen || !r.minted(tok, found) {
			return false
		}
		spans = append(spans, []int{start, end})
		return true
	})
	return spans
}

func (r *Redactor) minted(token string, found []finding) bool {
	for _, f := range found {
		if f.token == token {
			return true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.secrets[token]
	return ok
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
