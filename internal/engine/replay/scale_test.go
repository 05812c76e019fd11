package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

// The scale figures: a session of n model calls (benchRequest, one per step) is recorded, then a fresh
// process loads it (session.Open: every line decoded, every definition and blob resolved, the events
// hash compared) and replays it through the matcher with the same harness. The child process reports
// its peak resident set (VmHWM), so what the parent built never counts; time and memory must grow
// linearly with n: a quadratic step shows as a ratio near 100 where linear is near 10.

const (
	scaleChildDir = "ARW_SCALE_CHILD_DIR"
	scaleChildN   = "ARW_SCALE_CHILD_N"
)

// scaleFigures is what one child process measured over one session.
type scaleFigures struct {
	Events      int64   `json:"events"`
	LoadSeconds float64 `json:"loadSeconds"`
	// ReplaySeconds is the replay alone, after the load.
	ReplaySeconds float64 `json:"replaySeconds"`
	// CPUSeconds is the process's CPU time, user and system, over the load and the replay.
	CPUSeconds   float64 `json:"cpuSeconds"`
	PeakRSSBytes int64   `json:"peakRSSBytes"`
}

func (f scaleFigures) rssPerEvent() float64 { return float64(f.PeakRSSBytes) / float64(f.Events) }

// TestScaleChildProcess is the child's side: it runs only when measureScale starts it.
func TestScaleChildProcess(t *testing.T) {
	dir := os.Getenv(scaleChildDir)
	if dir == "" {
		t.Skip("runs only as the child process of the scale test and benchmark")
	}
	n, err := strconv.Atoi(os.Getenv(scaleChildN))
	if err != nil {
		t.Fatal(err)
	}
	start, cpu := time.Now(), testenv.CPUTime(t)
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	loaded := time.Now()
	res, err := Replay(context.Background(), ReplayOptions{Session: s}, benchHarness(n))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Drifts) != 0 || res.LiveCalls != 0 {
		t.Fatalf("the replay drifted %d times and went live %d times", len(res.Drifts), res.LiveCalls)
	}
	figures := scaleFigures{Events: int64(len(s.Events)), LoadSeconds: loaded.Sub(start).Seconds(),
		ReplaySeconds: time.Since(loaded).Seconds(), CPUSeconds: (testenv.CPUTime(t) - cpu).Seconds(), PeakRSSBytes: peakRSS(t)}
	out, _ := json.Marshal(figures)
	fmt.Printf("scale-figures %s\n", out)
}

// peakRSS is this process's peak resident set, from /proc.
func peakRSS(t testing.TB) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status here: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("/proc/self/status has no VmHWM")
	return 0
}

// measureScale records n calls into a session and measures a fresh process loading and replaying it.
func measureScale(t testing.TB, n int) scaleFigures {
	if runtime.GOOS != "linux" {
		t.Skip("peak RSS is read from /proc")
	}
	dir := filepath.Join(t.TempDir(), "scale")
	if _, err := Record(context.Background(), RecordOptions{Dir: dir, Model: constModel{}}, benchHarness(n)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestScaleChildProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), scaleChildDir+"="+dir, scaleChildN+"="+strconv.Itoa(n))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child process: %v\n%s", err, out)
	}
	for line := range bytes.Lines(out) {
		if rest, ok := bytes.CutPrefix(line, []byte("scale-figures ")); ok {
			var f scaleFigures
			if err := json.Unmarshal(rest, &f); err != nil {
				t.Fatal(err)
			}
			if want := int64(n) + 3; f.Events != want { // session_start, and the recorder's END and session_end, around the calls
				t.Fatalf("the child loaded %d events, want %d", f.Events, want)
			}
			return f
		}
	}
	t.Fatalf("the child printed no figures:\n%s", out)
	return scaleFigures{}
}

// TestLoadAndReplayGrowLinearly: ten times the events costs about ten times the time and the memory,
// not a hundred. Time is the child's CPU time, not wall time, because go test runs other packages
// beside this one, and the small side is the cheapest of three runs; the bounds are loose still, so
// only a step that is worse than linear fails it.
func TestLoadAndReplayGrowLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("records 55,000 calls")
	}
	small := measureScale(t, 5_000)
	for range 2 {
		if f := measureScale(t, 5_000); f.CPUSeconds < small.CPUSeconds {
			small.CPUSeconds = f.CPUSeconds
		}
	}
	large := measureScale(t, 50_000)
	t.Logf("5k: %+v (%.0f B/event)", small, small.rssPerEvent())
	t.Logf("50k: %+v (%.0f B/event)", large, large.rssPerEvent())
	if r := float64(large.PeakRSSBytes) / float64(small.PeakRSSBytes); r > 14 {
		t.Errorf("peak RSS grew %.1fx for 10x the events; linear is at most 10x", r)
	}
	if r := large.CPUSeconds / small.CPUSeconds; r > 25 {
		t.Errorf("load and replay CPU time grew %.1fx for 10x the events; linear is about 10x", r)
	}
}

// BenchmarkScale reports, for 100,000 and 1,000,000 recorded calls (ARW_SCALE_MAX lowers the top),
// the time to load and to replay, the peak RSS per event of the process doing it, and the 100k -> 1M
// ratios (linear is 10).
func BenchmarkScale(b *testing.B) {
	top := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("ARW_SCALE_MAX")); err == nil && v > 100_000 {
		top = v
	}
	for i := 0; i < b.N; i++ {
		base, big := measureScale(b, 100_000), measureScale(b, top)
		for _, f := range []scaleFigures{base, big} {
			b.Logf("%d events: load %.2fs, replay %.2fs, peak RSS %d MiB (%.0f B/event)",
				f.Events, f.LoadSeconds, f.ReplaySeconds, f.PeakRSSBytes>>20, f.rssPerEvent())
		}
		b.ReportMetric(base.rssPerEvent(), "rss-B/event@100k")
		b.ReportMetric(big.rssPerEvent(), "rss-B/event@top")
		b.ReportMetric(big.LoadSeconds/base.LoadSeconds, "load-ratio")
		b.ReportMetric(big.ReplaySeconds/base.ReplaySeconds, "replay-ratio")
		b.ReportMetric(float64(big.PeakRSSBytes)/float64(base.PeakRSSBytes), "rss-ratio")
	}
}
