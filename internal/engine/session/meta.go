package session

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
}

// RedactionInfo records how the session was redacted, without any secret.
type RedactionInfo struct {
	Enabled  bool     `json:"enabled"`
	Patterns []string `json:"patterns,omitempty"`
	// Counts is the number of secrets redacted, by pattern name.
	Counts map[string]int `json:"counts,omitempty"`
}
