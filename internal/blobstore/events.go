package blobstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// EventStream reads a stored session's events one at a time, without downloading the session.
//
// The log is hashed as it is read and checked against the eventsHash when it ends: Next returns
// io.EOF only for a log that matched, and *session.DigestMismatchError otherwise. Events returned
// before the end come from a log not yet verified, so a caller that must not act on tampered data
// either waits for io.EOF or uses Pull. Each event's blob fields are resolved and verified, and the
// log's structure is checked as it streams (session.StructureChecker): an event out of place fails
// with *session.CorruptEventError, and an event count other than meta.json's at the end with
// *session.CorruptMetaError.
type EventStream struct {
	meta     session.Meta
	metaName string // meta.json's name in errors
	name     string
	body     io.ReadCloser
	br       *bufio.Reader
	hash     hash.Hash
	// expand resolves blob fields and the stored form's references, in log order.
	expand *session.Expander
	// check applies the log's structural rules (session.StructureChecker) as it streams: an event
	// that breaks them ends the stream with a *session.CorruptEventError, and a count that differs
	// from meta.json's with a *session.CorruptMetaError instead of io.EOF.
	check  *session.StructureChecker
	line   int
	offset int64
	err    error // sticky
}

// OpenEvents opens the events of the committed session id for streaming.
func (s *SessionStore) OpenEvents(ctx context.Context, id string) (*EventStream, error) {
	_, meta, err := s.readMeta(ctx, id)
	if err != nil {
		return nil, err
	}
	body, name, err := s.openLog(ctx, meta)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	return &EventStream{meta: meta, name: name, body: body, hash: h, check: session.NewStructureChecker(name),
		br: bufio.NewReaderSize(io.TeeReader(body, h), 64<<10), expand: session.NewExpander(s.BlobSource(ctx), name), metaName: s.name(s.layout.SessionMeta(id))}, nil
}

// Meta is the session's verified meta.json.
func (e *EventStream) Meta() session.Meta { return e.meta }

// Next returns the next event, or io.EOF after the last one of a log that matched its eventsHash.
func (e *EventStream) Next() (session.Event, error) {
	if e.err != nil {
		return session.Event{}, e.err
	}
	ev, err := e.next()
	if err != nil {
		e.err = err
	}
	return ev, err
}

func (e *EventStream) next() (session.Event, error) {
	line, err := e.readLine()
	if err == io.EOF {
		if got := hex.EncodeToString(e.hash.Sum(nil)); got != e.meta.EventsHash {
			return session.Event{}, &session.DigestMismatchError{Object: e.name, Want: e.meta.EventsHash, Got: got}
		}
		if err := e.check.Finish(e.meta, e.metaName); err != nil {
			return session.Event{}, err
		}
		return session.Event{}, io.EOF
	}
	if err != nil {
		return session.Event{}, err
	}
	e.line++
	start := e.offset
	e.offset += int64(len(line))
	if line[len(line)-1] != '\n' {
		return session.Event{}, &session.CorruptEventError{File: e.name, Line: e.line, Offset: start, Err: errors.New("truncated: the last line has no newline")}
	}
	events, err := session.ReadEvents(bytes.NewReader(line), "", nil, e.name)
	if err != nil {
		return session.Event{}, relocate(err, e.line, start)
	}
	ev := events[0]
	if err := e.check.Add(&ev, e.line, start); err != nil {
		return session.Event{}, err
	}
	if err := e.expand.Resolve(&ev); err != nil {
		return session.Event{}, err
	}
	e.meta.RestoreProvenance(&ev)
	return ev, nil
}

// readLine returns the next line with its newline, or io.EOF at the end of the object.
func (e *EventStream) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := e.br.ReadSlice('\n')
		line = append(line, chunk...)
		// Large fields live in blobs, so a line past the session format's cap is damage.
		if len(line) > session.MaxLineBytes {
			return nil, &session.CorruptEventError{File: e.name, Line: e.line + 1, Offset: e.offset, Err: fmt.Errorf("line longer than %d bytes", session.MaxLineBytes)}
		}
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return line, nil
		case err == io.EOF:
			return nil, io.EOF
		default:
			return nil, fmt.Errorf("%s: reading at byte offset %d: %w", e.name, e.offset, err)
		}
	}
}

// relocate gives a one-line decoding error the line number and offset it has in the whole log.
func relocate(err error, line int, offset int64) error {
	var ce *session.CorruptEventError
	if errors.As(err, &ce) {
		return &session.CorruptEventError{File: ce.File, Line: line, Offset: offset, Err: ce.Err}
	}
	return err
}

// Close releases the connection.
func (e *EventStream) Close() error {
	if e.err == nil {
		e.err = errors.New("event stream closed")
	}
	return e.body.Close()
}
