// Package apimap is the one place where the engine's spellings become api/v1alpha1 values and back:
// verdicts, decisions and policies, and the outcome of a fork or replay. The engine keeps its own
// spellings (the seeds' RESUMABLE, NO_REWIND, no-plan …) and never imports the API; controllers never
// compare engine strings. Every mapping is a total table, pinned both ways by a test against the
// generated CRDs, so a value one side has and the other lacks fails a test rather than a status write.
package apimap
