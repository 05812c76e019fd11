package ui

import (
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestRowsOfHugeRecordedStringsCostTheirRowNotTheirSize: a note and an error of 10 MB each, with a
// NUL and an invalid byte in them, make rows that show 120 and 500 characters, and building a page of
// 50 such rows allocates less than 4 MB, not a copy of any string.
func TestRowsOfHugeRecordedStringsCostTheirRowNotTheirSize(t *testing.T) {
	huge := "\x00\xffé" + strings.Repeat("é<script>", 10<<20/10)
	s := &session.Session{}
	for step := range int64(50) {
		s.Events = append(s.Events, session.Event{Step: step, Kind: session.KindNote, Lane: "0", Text: huge,
			Error: &session.SerializedError{Name: "Boom", Message: huge}})
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rows := rowsOf(s, s.Events)
	runtime.ReadMemStats(&after)
	for _, r := range rows {
		if n := utf8.RuneCountInString(r.What); n != whatMax || !strings.HasSuffix(r.What, "…") || !strings.HasPrefix(r.What, "\x00\xffé") {
			t.Fatalf("a row's note is %d characters (%.40q), want %d ending in an ellipsis", n, r.What, whatMax)
		}
		if n := utf8.RuneCountInString(r.Error); n != errorMax || !strings.HasPrefix(r.Error, "Boom: ") {
			t.Fatalf("a row's error is %d characters, want %d", n, errorMax)
		}
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Errorf("50 rows allocated %d bytes; want under 4 MB, whatever the size of the strings they show", n)
	}
}
