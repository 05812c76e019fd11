package session

import (
	"bytes"
	"fmt"
)

// Caps on what one read holds in memory. A reader holds one line of events.jsonl, one blob or
// meta.json whole while it checks it, so without a cap its memory would follow the input: a bundle of
// under a megabyte can hold a line of hundreds. Each cap is far above what a recorder writes (fields
// above BlobThreshold go to blobs; the proxy takes request bodies of 10 MiB and upstream answers of
// 64 MiB), and the writer refuses to write past it, so a session it wrote always reads back.
const (
	// MaxLineBytes caps one line of events.jsonl, its newline included.
	MaxLineBytes = 64 << 20
	// MaxBlobBytes caps one blob: one JSON value, a request, a response, a stream, a tool's arguments
	// or result.
	MaxBlobBytes = 256 << 20
	// MaxMetaBytes caps meta.json.
	MaxMetaBytes = 16 << 20
)

// The caps as the code applies them; tests lower them.
var (
	lineLimit int64 = MaxLineBytes
	blobLimit int64 = MaxBlobBytes
	metaLimit int64 = MaxMetaBytes
)

// TooLargeError refuses a line, blob or meta.json over its cap. A line's error comes inside a
// *CorruptEventError, which says where the line starts.
type TooLargeError struct {
	What string // "the line", "blob <hash>", "meta.json"
	// Size is its size when known, or the bytes read before the cap was passed (Partial).
	Size    int64
	Partial bool
	Limit   int64
}

func (e *TooLargeError) Error() string {
	if e.Partial {
		return fmt.Sprintf("%s is longer than the %d-byte (%s) cap on what a reader holds in memory", e.What, e.Limit, mib(e.Limit))
	}
	return fmt.Sprintf("%s holds %d bytes, over the %d-byte (%s) cap on what a reader holds in memory", e.What, e.Size, e.Limit, mib(e.Limit))
}

func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// LineChecker follows the lines of an events.jsonl written through it and fails the first write
// that makes a line longer than MaxLineBytes, with a *CorruptEventError naming the line and the
// byte offset it starts at: an extraction that streams the log to disk refuses it there, without
// writing or reading the rest of it.
type LineChecker struct {
	name       string
	line       int
	start, cur int64 // the current line's offset, and its bytes so far
}

// NewLineChecker checks the lines of the log name (for errors).
func NewLineChecker(name string) *LineChecker { return &LineChecker{name: name, line: 1} }

func (c *LineChecker) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		seg := len(p)
		if i >= 0 {
			seg = i + 1
		}
		c.cur += int64(seg)
		if c.cur > lineLimit {
			return 0, tooLongLine(c.name, c.line, c.start)
		}
		if i >= 0 {
			c.line++
			c.start += c.cur
			c.cur = 0
		}
		p = p[seg:]
	}
	return n, nil
}

func tooLongLine(name string, line int, offset int64) error {
	return &CorruptEventError{File: name, Line: line, Offset: offset,
		Err: &TooLargeError{What: "the line", Partial: true, Limit: lineLimit}}
}
