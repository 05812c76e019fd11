package session

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Meta describes a session. It is written to meta.json last, when the recording closes: its presence,
// with EventsHash, is what makes a session committed.
type Meta struct {
	ID              string        `json:"id"`
	Parent          string        `json:"parent,omitempty"`
	ForkedAtStep    *int64        `json:"forkedAtStep,omitempty"`
	CreatedAt       int64         `json:"createdAt"`
	RecorderVersion string        `json:"agentRewindVersion"`
	SchemaVersion   int           `json:"schemaVersion"`
	Provider        string        `json:"provider,omitempty"`
	FingerprintMode string        `json:"fingerprintMode"`
	Redaction       RedactionInfo `json:"redaction"`
	EventsHash      string        `json:"eventsHash,omitempty"`
	Events          int64         `json:"events,omitempty"`
	// VaultHash is the SHA-256 of the sealed vault.enc, when the session has one, so a copy of the
	// vault fetched from object storage can be checked before it is trusted.
	VaultHash string `json:"vaultHash,omitempty"`
	// InheritedSteps are the steps of a fork stored as its parent's lines (WriterOptions.Parent):
	// their boundary events read back with provenance "recorded", which the shared lines leave out.
	InheritedSteps []StepRange `json:"inheritedSteps,omitempty"`
}

// StepRange is the steps From to To, both included.
type StepRange struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Inherited reports whether step is one of m's inherited steps: a fork's step stored as its parent's
// line.
func (m *Meta) Inherited(step int64) bool {
	for _, r := range m.InheritedSteps {
		if step >= r.From && step <= r.To {
			return true
		}
	}
	return false
}

// RestoreProvenance gives ev the provenance its stored line leaves out: "recorded" for a boundary
// event at an inherited step. Readers of a log call it on every event (Open does).
func (m *Meta) RestoreProvenance(ev *Event) {
	if ev.Provenance == "" && ev.Kind.IsBoundary() && len(m.InheritedSteps) > 0 && m.Inherited(ev.Step) {
		ev.Provenance = ProvenanceRecorded
	}
}

// RedactionInfo records how the session was redacted, without any secret.
type RedactionInfo struct {
	Enabled  bool     `json:"enabled"`
	Patterns []string `json:"patterns,omitempty"`
	// Counts is the number of secrets redacted, by pattern name.
	Counts map[string]int `json:"counts,omitempty"`
}

// CheckVault verifies the sealed vault.enc in dir against meta's vaultHash: a session that declares
// none has nothing to check; a declared one that is missing fails with fs.ErrNotExist, one that does
// not hash to it with *DigestMismatchError. Only the ciphertext is read; no key is needed.
func CheckVault(dir string, meta Meta) error {
	if meta.VaultHash == "" {
		return nil
	}
	path := filepath.Join(dir, VaultFile)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("meta.json declares a sealed vault (vaultHash %s), and forks and replays need it: %w", meta.VaultHash, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != meta.VaultHash {
		return &DigestMismatchError{Object: path, Want: meta.VaultHash, Got: got}
	}
	return nil
}
