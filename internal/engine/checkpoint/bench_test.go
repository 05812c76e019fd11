package checkpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
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
