package ui

import (
	"fmt"
	"testing"
)

// TestPagedEndpointsReportTheOffsetTheyServed: a page asked for past the end (or from a hand-edited
// huge offset) is empty and says it starts at the end, on every paged endpoint, so a page that
// scrolls by the offset it is told never places rows that do not exist.
func TestPagedEndpointsReportTheOffsetTheyServed(t *testing.T) {
	ts := serve(t, triageRoot(t), Options{})
	for _, offset := range []int64{3, 10, 99_999_999_999} {
		events := getJSON[Page](t, ts, fmt.Sprintf("/api/sessions/triage-fix/events?offset=%d&limit=5", offset))
		fork := getJSON[ForkView](t, ts, fmt.Sprintf("/api/sessions/triage-fix/fork?offset=%d&limit=5", offset))
		for name, p := range map[string]struct{ total, offset, rows int }{
			"events": {events.Total, events.Offset, len(events.Rows)},
			"fork":   {fork.Total, fork.Offset, len(fork.Rows)},
		} {
			want := min(int(offset), p.total)
			if p.offset != want || p.rows != min(5, p.total-want) {
				t.Errorf("%s from offset %d: offset %d with %d rows of %d; want offset %d", name, offset, p.offset, p.rows, p.total, want)
			}
		}
	}
}
