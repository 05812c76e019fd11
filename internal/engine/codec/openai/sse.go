package openai

import (
	"bytes"
)

// sseEvent is one event of a text/event-stream body.
type sseEvent struct {
	name string
	// data is the event's data lines joined by "\n"; nil when it had no data line. Unlike the
	// anthropic codec's, an empty data line counts as data: the OpenAI SDK dispatches such an event
	// (and then fails to decode it), so it must not vanish from a recording.
	data []byte
	// offset is where the event's first line begins in the body.
	offset int64
}

// parseSSE splits a text/event-stream body into events the way the SDK's decoder does: lines end in
// "\n" (a "\r" before it is dropped), a blank line completes an event, "event" names it, "data" lines
// accumulate, lines starting with ":" are comments and other fields (id, retry) are ignored. Where the
// SDK silently drops an event the body ends inside of, parseSSE reports it as ErrTruncated at the
// event's first byte: a recording must not lose an event without saying so.
//
// This is the anthropic codec's sse.go with the data rule above; the two are to be factored into a
// package both share.
func parseSSE(op string, body []byte) ([]sseEvent, error) {
	var (
		events  []sseEvent
		cur     sseEvent
		pending bool // cur has an event or data line, so the body must not end before a blank line
		start   = int64(-1)
	)
	for pos := 0; pos < len(body); {
		line, next := nextLine(body, pos)
		if len(line) == 0 {
			if cur.name != "" || cur.data != nil {
				cur.offset = start
				events = append(events, cur)
			}
			cur, pending, start = sseEvent{}, false, -1
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
			cur.name, pending = string(value), true
		case "data":
			if cur.data != nil {
				cur.data = append(cur.data, '\n')
			} else {
				cur.data = []byte{}
			}
			cur.data = append(cur.data, value...)
			pending = true
		}
		pos = next
	}
	if pending {
		return nil, &CodecError{Op: op, Offset: start, Err: ErrTruncated}
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
