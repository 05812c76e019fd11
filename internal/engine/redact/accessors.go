package redact

import "maps"

// PatternNames lists the names of the patterns the redactor applies, in order, for the session's
// metadata (which records how it was redacted, never what).
func (r *Redactor) PatternNames() []string {
	names := make([]string, len(r.patterns))
	for i, p := range r.patterns {
		names[i] = p.name
	}
	return names
}

// Secrets returns a copy of the vault's token → secret map, so a fork can carry its parent's vault
// into its own.
func (v *Vault) Secrets() map[string]string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return maps.Clone(v.secrets)
}
