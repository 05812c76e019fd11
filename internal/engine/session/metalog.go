package session

import (
	"fmt"
	"slices"
)

// checkWrittenSchema checks that a line of the log was written at the schema meta.json records: a
// recorder writes every line and meta.json at one version.
func checkWrittenSchema(meta Meta, metaFile, logFile string, written, line int) error {
	if written == meta.SchemaVersion {
		return nil
	}
	return &CorruptMetaError{File: metaFile, Field: "schemaVersion",
		Err: fmt.Errorf("records schema %d, but line %d of %s was written at schema %d", meta.SchemaVersion, line, logFile, written)}
}

// checkMetaAgainstStart checks meta.json against the meta session_start carries, when it carries one:
// meta.json is that meta plus what the recorder learns at the end (eventsHash, events, vaultHash,
// redaction.counts), so every other field must be the same.
func checkMetaAgainstStart(meta Meta, start *Meta, metaFile string) error {
	if start == nil {
		return nil
	}
	differ := func(field string, got, want any) error {
		return &CorruptMetaError{File: metaFile, Field: field,
			Err: fmt.Errorf("is %s, but the session_start event records %s: meta.json does not belong to this log", got, want)}
	}
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	step := func(p *int64) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprint(*p)
	}
	switch {
	case meta.ID != start.ID:
		return differ("id", q(meta.ID), q(start.ID))
	case meta.Parent != start.Parent:
		return differ("parent", q(meta.Parent), q(start.Parent))
	case step(meta.ForkedAtStep) != step(start.ForkedAtStep):
		return differ("forkedAtStep", step(meta.ForkedAtStep), step(start.ForkedAtStep))
	case meta.SchemaVersion != start.SchemaVersion:
		return differ("schemaVersion", fmt.Sprint(meta.SchemaVersion), fmt.Sprint(start.SchemaVersion))
	case meta.CreatedAt != start.CreatedAt:
		return differ("createdAt", fmt.Sprint(meta.CreatedAt), fmt.Sprint(start.CreatedAt))
	case meta.RecorderVersion != start.RecorderVersion:
		return differ("agentRewindVersion", q(meta.RecorderVersion), q(start.RecorderVersion))
	case meta.Provider != start.Provider:
		return differ("provider", q(meta.Provider), q(start.Provider))
	case meta.FingerprintMode != start.FingerprintMode:
		return differ("fingerprintMode", q(meta.FingerprintMode), q(start.FingerprintMode))
	case meta.Redaction.Enabled != start.Redaction.Enabled:
		return differ("redaction.enabled", fmt.Sprint(meta.Redaction.Enabled), fmt.Sprint(start.Redaction.Enabled))
	case !slices.Equal(meta.Redaction.Patterns, start.Redaction.Patterns):
		return differ("redaction.patterns", fmt.Sprintf("%q", meta.Redaction.Patterns), fmt.Sprintf("%q", start.Redaction.Patterns))
	}
	return nil
}
