// Package session owns the recorded-run format: the event model (session_start, model_call, tool_call,
// entropy, note, ledger, session_end), the session metadata, the on-disk layout (meta.json written last
// as the commit marker, events.jsonl, content-addressed blobs/<sha256>, vault.enc), externalisation of
// large fields to blobs, and forward schema migrations.
//
// It verifies what it reads — the events hash, every blob's hash, every line's shape — and reports a
// problem with the file, line and byte offset. It makes no decisions about replay and never sees a
// secret in the clear: callers redact before they write.
package session
