package session

import (
	"errors"
	"fmt"
)

// ErrNotCommitted is returned for a session directory without meta.json: the recording never closed,
// so its log may be incomplete and it is not served.
var ErrNotCommitted = errors.New("session is not committed (no meta.json): the recording did not close")

// ErrIncomplete is returned by Session.CheckComplete for a committed session whose log has no
// session_end: the run stopped before the recorder could frame it. It is readable, and resumable, but
// it is not a finished run to verify as intact or to compare against.
var ErrIncomplete = errors.New("session is incomplete (no session_end): the run did not finish")

// CorruptEventError reports a line of events.jsonl that cannot be read, or that breaks the log's
// structure (step order, lane sequence, session markers).
type CorruptEventError struct {
	File   string
	Line   int   // 1-based
	Offset int64 // byte offset of the start of the line in the file
	// Field names the event field at fault ("step", "seq", "kind"), when one is.
	Field string
	Err   error
}

func (e *CorruptEventError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: line %d (byte offset %d): %s: %v", e.File, e.Line, e.Offset, e.Field, e.Err)
	}
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

// CorruptMetaError reports a meta.json that cannot be read or that disagrees with the log it commits.
type CorruptMetaError struct {
	File  string
	Field string // the meta field at fault, when one is
	Err   error
}

func (e *CorruptMetaError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %v", e.File, e.Field, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *CorruptMetaError) Unwrap() error { return e.Err }

// MissingError reports a file a committed session needs that is not there: events.jsonl, or a blob an
// event references.
type MissingError struct {
	Object string // events.jsonl, or blobs/<sha256>
	// Step and Field say which event referenced a missing blob; Field is empty for events.jsonl.
	Step  int64
	Field string
	Err   error
}

func (e *MissingError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s is missing: the %s of step %d is stored there: %v", e.Object, e.Field, e.Step, e.Err)
	}
	return fmt.Sprintf("%s is missing from a committed session: %v", e.Object, e.Err)
}

func (e *MissingError) Unwrap() error { return e.Err }

// BlobRefError reports an event's blob reference that cannot be honoured: an unknown field name, a
// name that is not a sha256 hex digest, a field stored both inline and in a blob, or blob content that
// does not decode as the field.
type BlobRefError struct {
	Step  int64
	Field string
	Hash  string
	Err   error
}

func (e *BlobRefError) Error() string {
	return fmt.Sprintf("step %d: blob %q for %s: %v", e.Step, e.Hash, e.Field, e.Err)
}

func (e *BlobRefError) Unwrap() error { return e.Err }

// InsideSessionError refuses a directory to record into that lies inside another session's
// directory, such as a parent's blobs/: the new session's files would land among that session's and
// it would no longer verify.
type InsideSessionError struct {
	Dir      string // as given
	Resolved string // with symbolic links and ".." resolved
	Session  string // the session directory it lies in
}

func (e *InsideSessionError) Error() string {
	return fmt.Sprintf("session: %s resolves to %s, inside the session directory %s: record into a directory outside it", e.Dir, e.Resolved, e.Session)
}
