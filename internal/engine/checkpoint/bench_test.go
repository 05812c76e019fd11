package checkpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/testenv"
)

// benchTree writes files pseudo-random files totalling about total bytes (no two alike, so nothing
// dedups by accident) and returns the workspace.
func benchTree(b *testing.B, files int, total int64) string {
	b.Helper()
	ws := b.TempDir()
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	buf := make([]byte, total/int64(files))
	for i := range files {
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		p := filepath.Join(ws, fmt.Sprintf("d%03d", i%100), fmt.Sprintf("f%05d.bin", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return ws
}

func benchSize(b *testing.B) (int, int64) {
	total := int64(1 << 30)
	if v, err := strconv.ParseInt(os.Getenv("ARW_CHECKPOINT_BENCH_BYTES"), 10, 64); err == nil && v > 0 {
		total = v
	}
	return 10000, total
}

// BenchmarkCapture compares a first capture of a workspace with `tar | sha256sum` of the same tree,
// the floor for reading and hashing every byte once. The work is not equal: capture reads each new
// file twice (hash, then upload) and writes every byte into the blob space, which tar does not, so
// the ratio is the cost of storing a checkpoint over the cost of looking at it. The third case
// changes 1 % of the files and captures again; it reports the share of bytes uploaded (the property
// itself, exact incremental bytes, is asserted in TestCaptureUploadsOnlyNewBytes…).
// Set ARW_CHECKPOINT_BENCH_BYTES to shrink the default 1 GiB workspace of 10,000 files.
func BenchmarkCapture(b *testing.B) {
	files, total := benchSize(b)
	ws := benchTree(b, files, total)
	b.Run("tar|sha256sum", func(b *testing.B) {
		if _, err := exec.LookPath("tar"); err != nil {
			b.Skip("no tar")
		}
		b.SetBytes(total)
		for b.Loop() {
			cmd := exec.Command("sh", "-c", "tar -cf - -C \"$1\" . | sha256sum >/dev/null", "sh", ws)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
	b.Run("first", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			b.StopTimer()
			store := OpenStore(b.TempDir())
			b.StartTimer()
			if _, err := store.Create(ctx, ws, CaptureOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("after-1%-change", func(b *testing.B) {
		store := OpenStore(b.TempDir())
		if _, err := store.Create(ctx, ws, CaptureOptions{}); err != nil {
			b.Fatal(err)
		}
		var last Created
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			for f := 0; f < files; f += 100 {
				p := filepath.Join(ws, fmt.Sprintf("d%03d", f%100), fmt.Sprintf("f%05d.bin", f))
				fh, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				_, err = fh.WriteAt([]byte(fmt.Sprintf("change %d", i)), 0)
				fh.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			c, err := store.Create(ctx, ws, CaptureOptions{})
			if err != nil {
				b.Fatal(err)
			}
			last = c
		}
		b.SetBytes(total)
		b.ReportMetric(100*float64(last.Stats.IncrementalBytes)/float64(last.Stats.Bytes), "%uploaded")
	})
}

// BenchmarkIncrementalCapture is issue 18's figure: a workspace of 250,000 small files (set
// ARW_CHECKPOINT_BENCH_FILES to change it), captured once, then 20 times with 10 files changed
// before each capture. It reports the p50 and p95 wall time of those 20 captures, their p50 CPU time
// (user+system of this process: on a shared machine the wall time also measures the other tenants),
// the files each read and the bytes each stored, the size of one manifest (root and chunks) and the
// manifest bytes each uploaded (the root and the chunks its changes touched), and the ratio of a capture
// without a baseline (every file read, as before the quick-check; its blobs are stored already, so
// the two sides differ only in which files they read) to the p50, and of the p50 to `find -newer`
// over the same tree (the lstat of every entry that any quick-check, git's too, pays). Every capture
// goes through Store.Create into a store on local disk, manifest and all; one more, by a Store new to
// the directory as a new process's is, first reads the 21 stored roots to list them and loads the
// baseline's chunks (cold-s). The exact counts are asserted in
// TestAnIncrementalCaptureReadsOnlyWhatChanged and the manifest's share in
// TestACaptureUploadsTheManifestChunksItsChangesTouched; this only reports them.
func BenchmarkIncrementalCapture(b *testing.B) {
	files := 250000
	if v, err := strconv.Atoi(os.Getenv("ARW_CHECKPOINT_BENCH_FILES")); err == nil && v > 0 {
		files = v
	}
	ws := b.TempDir()
	paths := agedTree(b, ws, files)
	store := OpenStore(b.TempDir())
	if _, err := store.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(0)}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		// Without a baseline: read every file (Baseline is only taken from the store when nil, so
		// an empty manifest stands for "none").
		start := time.Now()
		full, err := store.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(0), Baseline: &Manifest{}})
		if err != nil {
			b.Fatal(err)
		}
		fullTime := time.Since(start)
		// The floor of any quick-check: find lstats every entry of the tree (-newer needs each one's
		// mtime), as the capture's walk does, and does nothing else.
		var finds []time.Duration
		for range 3 {
			start := time.Now()
			if out, err := exec.Command("find", ws, "-newer", ws, "-name", "never-matches").CombinedOutput(); err != nil {
				b.Fatalf("find: %v %s", err, out)
			}
			finds = append(finds, time.Since(start))
		}
		slices.Sort(finds)
		var times, cpu []time.Duration
		var hashed, uploaded, manifestUploaded int64
		var last Created
		for i := range 20 {
			for j := range 10 {
				rel := paths[(i*7919+j*104729)%len(paths)]
				if err := os.WriteFile(filepath.Join(ws, rel), fmt.Appendf(nil, "change %d of capture %d", j, i), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			start, cpu0 := time.Now(), testenv.CPUTime(b)
			c, err := store.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(int64(i + 1))})
			if err != nil {
				b.Fatal(err)
			}
			times, cpu = append(times, time.Since(start)), append(cpu, testenv.CPUTime(b)-cpu0)
			last = c
			hashed += int64(c.Stats.Hashed)
			uploaded += c.Stats.IncrementalBytes
			manifestUploaded += c.Stats.ManifestUploadedBytes
		}
		// A capture by a new process (the CLI, an engine Job) has no summaries or baseline in memory:
		// a Store over the same directory lists and loads them first.
		for j := range 10 {
			rel := paths[(j*104729+1)%len(paths)]
			if err := os.WriteFile(filepath.Join(ws, rel), fmt.Appendf(nil, "cold change %d", j), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		start, cpu0 := time.Now(), testenv.CPUTime(b)
		if _, err := OpenStore(storeDir(store)).Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(21)}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "cold-s")
		b.ReportMetric((testenv.CPUTime(b) - cpu0).Seconds(), "cold-cpu-s")
		slices.Sort(times)
		slices.Sort(cpu)
		p50, p95 := times[len(times)/2], times[len(times)*95/100]
		b.ReportMetric(cpu[len(cpu)/2].Seconds(), "cpu-p50-s")
		b.ReportMetric(float64(last.Stats.ManifestBytes), "manifest-bytes")
		b.ReportMetric(float64(manifestUploaded)/20, "manifest-uploaded/capture")
		b.ReportMetric(p50.Seconds(), "p50-s")
		b.ReportMetric(p95.Seconds(), "p95-s")
		b.ReportMetric(float64(hashed)/20, "files-read/capture")
		b.ReportMetric(float64(uploaded)/20, "bytes-stored/capture")
		b.ReportMetric(fullTime.Seconds()/p50.Seconds(), "full/p50")
		b.ReportMetric(p50.Seconds()/finds[1].Seconds(), "p50/find")
		b.ReportMetric(float64(full.Stats.Hashed), "files-read-full")
	}
}
