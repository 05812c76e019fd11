// Package session owns the recorded-run format: the event model (session_start, model_call, tool_call,
// entropy, note, ledger, session_end), the session metadata, the on-disk layout (meta.json written last
// as the commit marker, events.jsonl, content-addressed blobs/<sha256>, vault.enc), externalisation of
// large fields to blobs, and forward schema migrations.
//
// It verifies what it reads — the events hash, every blob's hash, every line's text and shape, and the
// log's structure — and reports a problem with the file, line, byte offset and field. A line is decoded
// in one pass that checks as it goes (fastdecode.go); anything unusual, and every refusal, goes through
// encoding/json and checkJSONText, the reference both ways must agree with. It makes no decisions
// about replay and never sees a secret in the clear: callers redact before they write.
//
// Stored form (schema 3, decided): a recorded request carries the whole conversation, so the log
// defines each distinct piece of content once, on its first use, and refers to it by digest after:
// message lists as chains that extend an earlier list, large definitions as shared blobs, and a
// stream's text cut out of its chunks where the response holds it (dedup.go, streamtext.go). The
// reader verifies every definition and returns the logical events unchanged; older logs still read
// (a schema 2 line is a schema 3 line without the new keys) and hash as they always did.
//
// Rule: meta.json = session_start's meta (if any) + eventsHash, events, vaultHash, redaction.counts.
// A committed log without session_end (a crashed run) opens, for resuming; CheckComplete refuses it.
// meta.json is not signed: verification catches accidents and inconsistent edits, not a forger who
// rewrites meta.json to match.
package session
