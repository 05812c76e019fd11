package session

import (
	"errors"
	"fmt"
)

// ErrNotCommitted is returned for a session directory without meta.json: the recording never closed,
// so its log may be incomplete and it is not served.
var ErrNotCommitted = errors.New("session is not committed (no meta.json): the recording did not close")

// CorruptEventError reports a line of events.jsonl that cannot be read.
type CorruptEventError struct {
	File   string
	Line   int   // 1-based
	Offset int64 // byte offset of the start of the line in the file
	Err    error
}

func (e *CorruptEventError) Error() string {
	return fmt.Sprintf("%s: line %d (byte offset %d): %v", e.File, e.Line, e.Offset, e.Err)
}

func (e *CorruptEventError) Unwrap() error { return e.Err }

// DigestMismatchError reports stored bytes that do not hash to the digest recorded for them.
type DigestMismatchError struct {
	Object string // the file or object whose bytes were hashed
	Want   string
	Got    string
}

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("%s is corrupt or was tampered with: its sha256 is %s, the session recorded %s", e.Object, e.Got, e.Want)
}

// MigrationError reports an event that cannot be brought to the current schema.
type MigrationError struct {
	From, To int
	Err      error
}

func (e *MigrationError) Error() string {
	if e.From > e.To {
		return fmt.Sprintf("schema version %d is newer than this build understands (up to %d): upgrade agentrewind to read this session", e.From, e.To)
	}
	return fmt.Sprintf("migrating schema version %d to %d: %v", e.From, e.To, e.Err)
}

func (e *MigrationError) Unwrap() error { return e.Err }
