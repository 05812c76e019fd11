package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"sync"
)

// WithheldPrefix marks a vault entry whose secret was withheld from the agent: a credential the
// recorder held for it (a provider key), which the agent was answered as its token. The entry is
// "arw:withheld:<32 hex>" → secret beside the secret's own token, so a replay that restores the token
// knows to withhold the secret again. Restore never matches it: it is no token.
const WithheldPrefix = "arw:withheld:"

// withheldKey is the vault key marking secret as withheld.
func withheldKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return WithheldPrefix + hex.EncodeToString(sum[:])[:TokenHexLen]
}

// MarkWithheld says that secret is withheld from the agent. It redacts nothing by itself (declare the
// secret too, with AddLiteral); Secrets then lists a WithheldPrefix entry for it once any of its
// forms has been redacted, so the vault keeps the mark exactly when it keeps the secret.
func (r *Redactor) MarkWithheld(secret string) {
	if secret == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.withheld == nil {
		r.withheld = map[string]string{}
	}
	for _, form := range append(quotedForms(secret), encodedForms(secret)...) {
		if form != "" {
			r.withheld[form] = secret
		}
	}
}

// withheldMarksLocked adds to m the marks of the withheld secrets one of whose forms m holds.
func (r *Redactor) withheldMarksLocked(m map[string]string) {
	if len(r.withheld) == 0 {
		return
	}
	marks := map[string]string{}
	for _, secret := range m {
		if root, ok := r.withheld[secret]; ok {
			marks[withheldKey(root)] = root
		}
	}
	for k, v := range marks {
		m[k] = v
	}
}

// Withheld returns the secrets the vault marks as withheld from the agent (MarkWithheld).
func (v *Vault) Withheld() []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []string
	for k, secret := range v.secrets {
		if strings.HasPrefix(k, WithheldPrefix) {
			out = append(out, secret)
		}
	}
	slices.Sort(out)
	return out
}

// A Withholder keeps secrets out of what an agent is answered: the credentials a proxy holds for the
// agent, which the agent must never read, even when an upstream echoes one (a 401 quoting the key).
// Each of their forms (as AddLiteral learns them) is replaced by the secret's token, in documents,
// text and streams alike; every other secret is left alone, since the agent has it already and a
// replay gives it back. It is safe for concurrent use; a WithheldStream is for one goroutine.
type Withholder struct {
	r *Redactor

	mu    sync.RWMutex
	forms []string // every form of every secret, for the streams' hold-back
}

// NewWithholder returns a Withholder of secrets.
func NewWithholder(secrets ...string) *Withholder {
	w := &Withholder{r: New(nil)}
	for _, s := range secrets {
		w.Add(s)
	}
	return w
}

// Add withholds secret too. Secrets shorter than MinWithheldLen are ignored: they could not be
// replaced without replacing ordinary text.
func (w *Withholder) Add(secret string) {
	if len(secret) < MinWithheldLen {
		return
	}
	w.r.AddLiteral("withheld", secret)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, form := range append(quotedForms(secret), encodedForms(secret)...) {
		if form != "" && !slices.Contains(w.forms, form) {
			w.forms = append(w.forms, form)
		}
	}
}

// MinWithheldLen is the shortest secret a Withholder withholds.
const MinWithheldLen = 4

// Empty reports whether there is nothing to withhold.
func (w *Withholder) Empty() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.forms) == 0
}

func (w *Withholder) allForms() []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.forms
}

// String returns s with every withheld secret replaced by its token.
func (w *Withholder) String(s string) string {
	if w.Empty() {
		return s
	}
	return w.r.String(s)
}

// Document returns an answer body with every withheld secret replaced by its token. A JSON document
// stays JSON, its strings rewritten (escaped spellings of a secret included); anything else is
// rewritten as text. A body that holds no withheld secret is returned as it is, byte for byte.
func (w *Withholder) Document(body []byte) []byte {
	if w.Empty() || len(body) == 0 {
		return body
	}
	if json.Valid(body) {
		if out, err := w.r.JSON(body); err == nil {
			var compact bytes.Buffer
			if json.Compact(&compact, body) == nil && bytes.Equal(compact.Bytes(), out) {
				return body // nothing replaced: keep the upstream's spacing
			}
			return out
		}
	}
	return []byte(w.r.String(string(body)))
}
