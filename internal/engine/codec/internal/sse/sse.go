// Package sse splits a text/event-stream body into events the way the providers' SDK decoders do, for
// the codecs that record and rebuild streamed answers. It does no I/O and holds no state.
package sse

import (
	"bytes"
	"fmt"
)

// Event is one event of a text/event-stream body.
type Event struct {
	Name string
	// Data is the event's data lines joined by "\n"; nil when it had none (see Parse for empty ones).
	Data []byte
	// Offset is where the event's first line begins in the body.
	Offset int64
}

// TruncatedError says the body ended inside the event that begins at Offset.
type TruncatedError struct{ Offset int64 }

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("the stream ends inside the event at byte %d", e.Offset)
}

// Parse splits body into events: lines end in "\n" (a "\r" before it is dropped), a blank line
// completes an event, "event" names it, "data" lines accumulate, lines starting with ":" are comments
// and other fields (id, retry) are ignored. Where an SDK silently drops an event the body ends inside
// of, Parse returns a *TruncatedError at the event's first byte: a recording must not lose an event
// without saying so. SDKs differ on empty data lines: the Anthropic SDK skips an event whose data lines
// are all empty, the OpenAI SDK dispatches it (and then fails to decode it); keepEmptyData chooses
// the latter, so such an event does not vanish from a recording.
func Parse(body []byte, keepEmptyData bool) ([]Event, error) {
	var (
		events  []Event
		cur     Event
		pending bool // cur has an event or data line, so the body must not end before a blank line
		start   = int64(-1)
	)
	for pos := 0; pos < len(body); {
		line, next := nextLine(body, pos)
		if len(line) == 0 {
			if cur.Name != "" || cur.Data != nil {
				cur.Offset = start
				events = append(events, cur)
			}
			cur, pending, start = Event{}, false, -1
			pos = next
			continue
		}
		if start < 0 {
			start = int64(pos)
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			cur.Name, pending = string(value), true
		case "data":
			cur.Data = appendData(cur.Data, value, keepEmptyData)
			pending = true
		}
		pos = next
	}
	if pending {
		return nil, &TruncatedError{Offset: start}
	}
	return events, nil
}

// nextLine returns the line at pos without its terminator, and where the next line begins.
func nextLine(body []byte, pos int) (line []byte, next int) {
	i := bytes.IndexByte(body[pos:], '\n')
	if i < 0 {
		return bytes.TrimSuffix(body[pos:], []byte("\r")), len(body)
	}
	return bytes.TrimSuffix(body[pos:pos+i], []byte("\r")), pos + i + 1
}

func appendData(data, value []byte, keepEmpty bool) []byte {
	switch {
	case data != nil:
		data = append(data, '\n')
	case len(value) == 0 && !keepEmpty:
		return nil
	case len(value) == 0:
		return []byte{}
	}
	return append(data, value...)
}
