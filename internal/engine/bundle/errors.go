package bundle

import (
	"errors"
	"fmt"
)

// UnsafeEntryError reports an archive entry (or, when packing, a session file) that is refused
// because extracting or shipping it could escape the destination, smuggle something other than a
// session, or exhaust the disk.
type UnsafeEntryError struct {
	Name   string
	Reason string
}

func (e *UnsafeEntryError) Error() string {
	return fmt.Sprintf("bundle: refusing entry %q: %s", e.Name, e.Reason)
}

// BlobHashError reports a blob whose content does not hash to its name: the session would replay
// different bytes from the ones it recorded.
type BlobHashError struct {
	Name string // entry name, blobs/<hex>
	Got  string // hex sha256 of the content
}

func (e *BlobHashError) Error() string {
	return fmt.Sprintf("bundle: blob %q has content with sha256 %s, which does not match its name", e.Name, e.Got)
}

// MissingEntryError reports that a required session file (meta.json or events.jsonl) is absent.
type MissingEntryError struct {
	Name string
}

func (e *MissingEntryError) Error() string {
	return fmt.Sprintf("bundle: %s is missing: a session needs %s and %s", e.Name, metaFile, eventsFile)
}

// TrailingDataError reports bytes after the end of a bundle's gzip stream. Pack writes one stream
// and nothing after it, so the file was damaged, or something was appended to it.
type TrailingDataError struct {
	Offset int64 // where the gzip stream ends and the extra bytes begin
	Bytes  int64 // how many bytes follow it (at least that many when More)
	More   bool
	// Gzip says the bytes that follow begin another gzip stream: two files concatenated, or a
	// bundle compressed as several streams, which Pack never writes.
	Gzip bool
}

func (e *TrailingDataError) Error() string {
	count := fmt.Sprintf("%d bytes", e.Bytes)
	if e.More {
		count = "more than " + count
	}
	msg := fmt.Sprintf("bundle: %s after the end of the gzip stream at offset %d", count, e.Offset)
	if e.Gzip {
		return msg + ": another gzip stream begins there: two files were concatenated, or the bundle was compressed in several streams, which pack never writes"
	}
	return msg + ": the bundle is damaged or two files were concatenated"
}

// ErrDestinationNotEmpty is wrapped when Unpack is pointed at a directory that already has content:
// unpacking over an existing session would mix two recordings.
var ErrDestinationNotEmpty = errors.New("destination is not empty")

// DestinationError reports a destination Unpack cannot put the session in — not empty, a file, a
// symbolic link, or a place it cannot create or rename into. It is about the local file system, not
// the bundle, which may be intact.
type DestinationError struct {
	Dir string
	Err error
}

func (e *DestinationError) Error() string {
	return fmt.Sprintf("bundle: destination %s: %v", e.Dir, e.Err)
}

func (e *DestinationError) Unwrap() error { return e.Err }

func refuse(name, reason string) error { return &UnsafeEntryError{Name: name, Reason: reason} }
