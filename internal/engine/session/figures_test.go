package session_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/replay/agenttest"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// figure is what storing a synthetic run cost.
type figure struct {
	stored, former, transcript int64
	write, load                time.Duration
}

// storeRun writes the events of a run of turns (about 200 tokens of answer a turn, a 1 KiB tool
// result between) into a session and opens it again.
func storeRun(t testing.TB, turns, resultBytes int) figure {
	t.Helper()
	events, err := agenttest.Agent{Turns: turns, AnswerBytes: 800, ResultBytes: resultBytes}.Events()
	if err != nil {
		t.Fatal(err)
	}
	var f figure
	if f.former, err = agenttest.FormerBytes(events); err != nil {
		t.Fatal(err)
	}
	if f.transcript, err = agenttest.TranscriptBytes(events); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), fmt.Sprint(turns))
	n, lastMessages := len(events), len(events[len(events)-3].Request.Messages)
	runtime.GC() // time the writer, not the collection of what building the events left behind
	start := time.Now()
	w, err := session.Create(dir, session.Meta{ID: "run", FingerprintMode: "strict"}, session.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	f.write = time.Since(start)
	events = nil // the run's requests, each holding the conversation so far, are not the reader's to scan
	runtime.GC()
	start = time.Now()
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.load = time.Since(start)
	if last := s.Events[len(s.Events)-3].Request; len(s.Events) != n || len(last.Messages) != lastMessages {
		t.Fatalf("read back %d events, the last request with %d messages; wrote %d and %d", len(s.Events), len(last.Messages), n, lastMessages)
	}
	if f.stored, err = agenttest.DirBytes(dir); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAThousandTurnRunStoresAtMostTwiceItsTranscript: requests that carry the whole conversation
// grow the stored bytes linearly, within twice the final transcript at 1,000 turns; storing every
// request whole (schema 2) would take hundreds of times the transcript.
func TestAThousandTurnRunStoresAtMostTwiceItsTranscript(t *testing.T) {
	f := storeRun(t, 1000, 1024)
	ratio, former := float64(f.stored)/float64(f.transcript), float64(f.former)/float64(f.transcript)
	t.Logf("1000 turns: transcript %d bytes, stored %d (%.2fx), schema 2 %d (%.1fx); write %v, load %v", f.transcript, f.stored, ratio, f.former, former, f.write, f.load)
	if ratio > 2 {
		t.Fatalf("1,000 turns store %.2f times their final transcript, want at most 2", ratio)
	}
	if former < 100*ratio {
		t.Fatalf("schema 2 would store %.1fx and schema 3 %.2fx: the run does not repeat its history enough to tell them apart", former, ratio)
	}
}

// BenchmarkStorageScaling reports, for runs of 10, 100 and 1,000 turns, the stored bytes over the
// final transcript's bytes for schema 3 (what this build writes) and schema 2 (every request whole,
// computed by agenttest.FormerBytes), and the time to write and to load each; compare 100 -> 1,000
// (linear is 10x). Both sides store the same events.
func BenchmarkStorageScaling(b *testing.B) {
	for _, result := range []int{1024, 400} {
		var prev figure
		for _, turns := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("result=%dB/turns=%d", result, turns), func(b *testing.B) {
				var f figure
				for b.Loop() {
					f = storeRun(b, turns, result)
				}
				b.ReportMetric(float64(f.stored)/float64(f.transcript), "stored/transcript")
				b.ReportMetric(float64(f.former)/float64(f.transcript), "schema2/transcript")
				if turns == 1000 && prev.write > 0 {
					b.ReportMetric(float64(f.write)/float64(prev.write), "write-1000/100")
					b.ReportMetric(float64(f.load)/float64(prev.load), "load-1000/100")
				}
				prev = f
			})
		}
	}
}
