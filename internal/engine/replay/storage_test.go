package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/replay/agenttest"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

// run is one recorded synthetic run and what it cost.
type run struct {
	dir                        string
	events                     []session.Event
	stored, former, transcript int64
	record, load, replay       time.Duration
	// The same in CPU time of this process: what another process on the machine (go test runs
	// packages side by side) does not change.
	recordCPU, loadCPU, replayCPU time.Duration
}

// recordRun records an agent of the given turns (about 200 tokens of answer a turn and a tool
// result between), then loads and replays it, timing each.
func recordRun(t testing.TB, turns int) run {
	t.Helper()
	agent := agenttest.Agent{Turns: turns, AnswerBytes: 800, ResultBytes: 1024}
	r := run{dir: filepath.Join(t.TempDir(), "run")}
	start, cpu := time.Now(), testenv.CPUTime(t)
	rec, err := replay.Record(context.Background(), replay.RecordOptions{Dir: r.dir, Model: agent.Model(), Tools: agent.Tools()}, agent.Harness())
	if err != nil {
		t.Fatal(err)
	}
	r.record, r.recordCPU = time.Since(start), testenv.CPUTime(t)-cpu
	r.events = rec.Events
	start, cpu = time.Now(), testenv.CPUTime(t)
	s, err := session.Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	r.load, r.loadCPU = time.Since(start), testenv.CPUTime(t)-cpu
	start, cpu = time.Now(), testenv.CPUTime(t)
	if _, err := replay.Replay(context.Background(), replay.ReplayOptions{Session: s}, agent.Harness()); err != nil {
		t.Fatal(err)
	}
	r.replay, r.replayCPU = time.Since(start), testenv.CPUTime(t)-cpu
	if r.stored, err = agenttest.DirBytes(r.dir); err != nil {
		t.Fatal(err)
	}
	if r.former, err = agenttest.FormerBytes(rec.Events); err != nil {
		t.Fatal(err)
	}
	if r.transcript, err = agenttest.TranscriptBytes(rec.Events); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestARecordedRunStoresAtMostTwiceItsTranscript records (and replays) a 1,000-turn run whose
// requests carry the whole conversation: the session stores at most twice the bytes of its final
// transcript, where storing every request whole (schema 2) stores hundreds of times as much.
func TestARecordedRunStoresAtMostTwiceItsTranscript(t *testing.T) {
	if testing.Short() {
		t.Skip("records 1,000 turns")
	}
	const turns = 1000
	r := recordRun(t, turns)
	ratio, former := float64(r.stored)/float64(r.transcript), float64(r.former)/float64(r.transcript)
	t.Logf("%d turns: transcript %d bytes, stored %d (%.2fx), schema 2 would store %d (%.1fx); record %v, load %v, replay %v",
		turns, r.transcript, r.stored, ratio, r.former, former, r.record, r.load, r.replay)
	if ratio > 2 {
		t.Fatalf("%d turns store %.2f times their final transcript, want at most 2", turns, ratio)
	}
	if former < 100*ratio {
		t.Fatalf("schema 2 would store %.1fx and this %.2fx: the run does not repeat its history enough to show the difference", former, ratio)
	}
}

// TestRecordingAndReplayingGrowLinearlyInTurns: ten times the turns costs about ten times the CPU
// time to record, load and replay, although what the agent sends grows a hundredfold (each request
// carries the conversation so far). Preparing every request whole made it 88x and 100x. CPU time,
// not wall time, because go test runs other packages beside this one. It measures 12-26x here: the
// garbage collector's share grows with the heap, and the short runs' fixed costs are small, so the
// bound is 40x, well under the quadratic 88x. Each phase of each side is its cheapest run, of five
// for the short runs and of two for the long ones (a load of 100 turns is 5 ms, so one busy spell
// would move it). TestALongConversationRedactsEachMessageOnce counts the work itself.
func TestRecordingAndReplayingGrowLinearlyInTurns(t *testing.T) {
	if testing.Short() {
		t.Skip("records 2,500 turns")
	}
	cheapest := func(turns, runs int) run {
		best := recordRun(t, turns)
		for range runs - 1 {
			r := recordRun(t, turns)
			best.recordCPU, best.loadCPU, best.replayCPU = min(best.recordCPU, r.recordCPU), min(best.loadCPU, r.loadCPU), min(best.replayCPU, r.replayCPU)
		}
		return best
	}
	small, large := cheapest(100, 5), cheapest(1000, 2)
	for _, m := range []struct {
		what         string
		small, large time.Duration
	}{{"record", small.recordCPU, large.recordCPU}, {"load", small.loadCPU, large.loadCPU}, {"replay", small.replayCPU, large.replayCPU}} {
		ratio := float64(m.large) / float64(m.small)
		t.Logf("%s: 100 turns %v CPU, 1,000 turns %v (%.1fx)", m.what, m.small, m.large, ratio)
		if ratio > 40 {
			t.Errorf("%s CPU time grew %.1fx for 10x the turns; linear is about 10x", m.what, ratio)
		}
	}
}

// TestAForkStoresTheStepsItServedAsItsParentsLines: a fork's log repeats, byte for byte, the lines of
// the steps it served from its parent, so the store can keep them once; read back, they are the
// parent's events with provenance "recorded", and the fork's own steps follow.
func TestAForkStoresTheStepsItServedAsItsParentsLines(t *testing.T) {
	agent := agenttest.Agent{Turns: 30, AnswerBytes: 300, ResultBytes: 300}
	parentDir := filepath.Join(t.TempDir(), "parent")
	if _, err := replay.Record(context.Background(), replay.RecordOptions{Dir: parentDir, ID: "parent", Model: agent.Model(), Tools: agent.Tools()}, agent.Harness()); err != nil {
		t.Fatal(err)
	}
	parent, err := session.Open(parentDir)
	if err != nil {
		t.Fatal(err)
	}
	const at = 41
	live := agent
	live.Variant = "B"
	childDir := filepath.Join(t.TempDir(), "child")
	if _, err := replay.Fork(context.Background(), replay.ForkOptions{Parent: parent, Dir: childDir, AtStep: at, Model: live.Model()}, agent.Harness()); err != nil {
		t.Fatal(err)
	}
	child, err := session.Open(childDir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []session.StepRange{{From: 1, To: at - 1}}; !reflect.DeepEqual(child.Meta.InheritedSteps, want) {
		t.Fatalf("inheritedSteps %v, want %v", child.Meta.InheritedSteps, want)
	}
	lines := func(dir string) [][]byte {
		data, err := os.ReadFile(filepath.Join(dir, session.EventsFile))
		if err != nil {
			t.Fatal(err)
		}
		return bytes.SplitAfter(data, []byte("\n"))
	}
	pl, cl := lines(parentDir), lines(childDir)
	for i := 1; i < at; i++ { // line 1 is session_start, the child's own
		if !bytes.Equal(pl[i], cl[i]) {
			t.Fatalf("line %d (step %d) differs between parent and fork:\n%s\n%s", i+1, i, pl[i], cl[i])
		}
	}
	if bytes.Equal(pl[at], cl[at]) {
		t.Fatalf("line %d, the fork's first live step, is its parent's", at+1)
	}
	for i, ev := range child.Events[1:at] {
		want := parent.Events[i+1]
		if ev.Kind.IsBoundary() {
			want.Provenance = session.ProvenanceRecorded
		}
		if !reflect.DeepEqual(ev, want) {
			t.Fatalf("step %d of the fork reads back as %+v, want the parent's %+v", ev.Step, ev, want)
		}
	}
	if ev := child.Events[at]; ev.Provenance != session.ProvenanceLive {
		t.Fatalf("step %d of the fork has provenance %q, want live", ev.Step, ev.Provenance)
	}
}

// BenchmarkRecordedRunScaling records, loads and replays synthetic runs of 100 and 1,000 turns
// through the recorder (recordRun) and reports stored bytes over the final transcript's, and the
// 1,000 / 100 ratio of each time (linear is 10x). A request holds the whole conversation, so what the
// agent sends grows with the square of the run; the -per-byte-sent ratios divide each time by those
// bytes (1 would be work in proportion to them, 0.1 work in proportion to the turns).
func BenchmarkRecordedRunScaling(b *testing.B) {
	var small run
	for _, turns := range []int{100, 1000} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			var r run
			for b.Loop() {
				r = recordRun(b, turns)
			}
			b.ReportMetric(float64(r.stored)/float64(r.transcript), "stored/transcript")
			b.ReportMetric(float64(r.former)/float64(r.transcript), "schema2/transcript")
			if small.record > 0 {
				b.ReportMetric(float64(r.record)/float64(small.record), "record-1000/100")
				b.ReportMetric(float64(r.load)/float64(small.load), "load-1000/100")
				b.ReportMetric(float64(r.replay)/float64(small.replay), "replay-1000/100")
				// The agent sends the whole conversation with every call, so what it sends grows with the
				// square of the run (schema 2 stored exactly that: every request whole). Per byte sent,
				// linear work is a ratio of 1.
				perSent := func(now, before time.Duration) float64 {
					return (float64(now) / float64(r.former)) / (float64(before) / float64(small.former))
				}
				b.ReportMetric(perSent(r.record, small.record), "record-per-byte-sent-1000/100")
				b.ReportMetric(perSent(r.replay, small.replay), "replay-per-byte-sent-1000/100")
			}
			small = r
		})
	}
}
