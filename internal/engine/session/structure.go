package session

import (
	"errors"
	"fmt"
)

// StructureChecker checks that an events log has the shape a recorder writes, one event at a time in
// file order:
//
//   - line 1 is the only session_start, at step 0; a session_end, if any, is the last line;
//   - steps strictly increase (a step is the global initiation order; a call that failed before it
//     could be recorded leaves its step unused, so steps may skip but never repeat or go back);
//   - each lane is named and its seq numbers strictly increase among its boundary, note and ledger
//     events, and every seq a lane skips is explained by an unused step or a session marker before it
//     (the recorder numbers the markers in the root lane and a failed call consumes a seq too);
//   - the number of events is the one meta.json records.
//
// The zero value is not usable: call NewStructureChecker.
type StructureChecker struct {
	file       string
	events     int64
	lastStep   int64
	nonMarkers int64 // events so far that are not session markers
	ended      bool
	lanes      map[string]*laneSeq
}

// laneSeq is what the checker remembers of a lane: the seq of its last event and how many steps
// before that event were free (unused, or holding a session marker).
type laneSeq struct {
	seq  int64
	free int64
}

// NewStructureChecker checks the log named file (used in errors).
func NewStructureChecker(file string) *StructureChecker {
	return &StructureChecker{file: file, lastStep: -1, lanes: map[string]*laneSeq{}}
}

// Add checks the next event, read from the given 1-based line starting at byte offset.
func (c *StructureChecker) Add(ev *Event, line int, offset int64) error {
	fail := func(field, format string, args ...any) error {
		return &CorruptEventError{File: c.file, Line: line, Offset: offset, Field: field, Err: fmt.Errorf(format, args...)}
	}
	c.events++
	switch {
	case c.ended:
		return fail("kind", "%s after session_end: session_end must be the last event", ev.Kind)
	case c.events == 1 && ev.Kind != KindSessionStart:
		return fail("kind", "the first event is %s; a session starts with session_start", ev.Kind)
	case c.events > 1 && ev.Kind == KindSessionStart:
		return fail("kind", "a second session_start")
	case c.events == 1 && ev.Step != 0:
		return fail("step", "session_start is at step %d, not 0", ev.Step)
	case ev.Step <= c.lastStep:
		return fail("step", "step %d does not follow step %d: steps must strictly increase", ev.Step, c.lastStep)
	case ev.Lane == "":
		return fail("lane", "the lane is empty")
	case ev.Seq < 0:
		return fail("seq", "seq %d is negative", ev.Seq)
	}
	c.lastStep = ev.Step
	if ev.Kind == KindSessionStart || ev.Kind == KindSessionEnd {
		c.ended = ev.Kind == KindSessionEnd
		return nil // the markers' seq is not checked: their place is
	}
	// Free steps before this one: every step below it that holds no event or a session marker.
	free := ev.Step - c.nonMarkers
	c.nonMarkers++
	prev, ok := c.lanes[ev.Lane]
	if !ok {
		prev = &laneSeq{seq: -1}
		c.lanes[ev.Lane] = prev
	}
	if ev.Seq <= prev.seq {
		return fail("seq", "seq %d in lane %s does not follow seq %d: a lane's seq must strictly increase", ev.Seq, ev.Lane, prev.seq)
	}
	if skipped := ev.Seq - prev.seq - 1; skipped > free-prev.free {
		return fail("seq", "lane %s skips %d seq number(s) before %d, but only %d step(s) before it are unused", ev.Lane, skipped, ev.Seq, free-prev.free)
	}
	prev.seq, prev.free = ev.Seq, free
	return nil
}

// Finish checks the log as a whole once every event was added: that there was one, and that meta.json
// counts the same number. A meta.json of schema 1 may lack the count; the original layout had none.
func (c *StructureChecker) Finish(meta Meta, metaFile string) error {
	if c.events == 0 {
		return &CorruptEventError{File: c.file, Line: 1, Field: "kind", Err: errors.New("the log is empty; a session starts with session_start")}
	}
	if meta.Events == 0 && meta.SchemaVersion < 2 {
		return nil
	}
	if meta.Events != c.events {
		return &CorruptMetaError{File: metaFile, Field: "events", Err: fmt.Errorf("records %d events, but %s holds %d", meta.Events, c.file, c.events)}
	}
	return nil
}

// Ended reports whether the log ended with session_end.
func (c *StructureChecker) Ended() bool { return c.ended }
