package ui

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/testenv"
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

// TestForkPageCostsItsOwnSize: a page of the fork view of a long fork checks the fingerprints of the
// page's rows only, not of every step from the fork point. Measured as a ratio of CPU time, the
// cheapest of five runs each, taken in turns so that a busy spell falls on both: one fork page of 10
// steps (pairing, the divergence check and 10 rows a side) against building the rows of the whole
// log once. A page that built every row of both logs cost 2.6 of it; a page of its own rows costs
// 0.12-0.15 here, with three busy loops beside it too. CPU time of this process, not wall time,
// because go test runs other packages beside this one (a wall-time bound of 1/3 failed at 0.40 in
// CI); the bound is 1, between the two.
func TestForkPageCostsItsOwnSize(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 60,000-event session")
	}
	root := t.TempDir()
	writeLargeSession(t, filepath.Join(root, "big"), "big", 60_000)
	parent := mustOpen(t, filepath.Join(root, "big"))
	child := mustOpen(t, filepath.Join(root, "big"))
	at := int64(1)
	child.Meta.ForkedAtStep = &at
	page, whole := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	for range 5 {
		start := testenv.CPUTime(t)
		if v := forkView("big", "fork", parent, child, 30_000, 10, price.Default()); len(v.Rows) != 10 || v.Rows[0].Parent == nil || v.Rows[0].Child == nil {
			t.Fatalf("the page: %+v", v.Rows)
		}
		mid := testenv.CPUTime(t)
		rowsOf(parent, parent.Events)
		page, whole = min(page, mid-start), min(whole, testenv.CPUTime(t)-mid)
	}
	ratio := float64(page) / float64(whole)
	t.Logf("a fork page of 10 steps: %v CPU; every row of the log: %v (%.2f)", page, whole, ratio)
	if ratio > 1 {
		t.Errorf("a fork page of 10 steps costs %.2f of building every row of the log (%v against %v of CPU); want under 1", ratio, page, whole)
	}
}
