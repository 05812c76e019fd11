package blobstore

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// benchParallel is the transfer parallelism of both sides of the throughput comparison.
const benchParallel = 8

// BenchmarkStoreThroughput pushes and pulls a ~100 MB session of 400 blobs through the session
// store, and moves the same files with raw minio-go PutObject/GetObject at the same parallelism,
// reporting MB/s for each side and their ratio: the store's cost over the limit of the server.
// Run with -benchtime 1x; each iteration uses fresh prefixes, so nothing is deduplicated away.
func BenchmarkStoreThroughput(b *testing.B) {
	env := startS3(b)
	_, objs := env.sessionStore(b, StoreOptions{Parallelism: benchParallel})
	dir := filepath.Join(b.TempDir(), "big")
	meta := writeSession(b, dir, "big", "", payloads(1, 400, 256<<10))
	files, total := benchFiles(b, dir)
	mb := float64(total) / 1e6
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		layout, _ := NewLayout(fmt.Sprintf("bench/%d/store", i))
		s := NewSessionStore(objs, layout, StoreOptions{Parallelism: benchParallel})
		push := timed(b, func() error { _, err := s.Push(ctx, dir); return err })
		rawPut := timed(b, func() error { return rawPut(ctx, objs, fmt.Sprintf("bench/%d/raw/", i), files) })
		out := filepath.Join(b.TempDir(), "pulled")
		pull := timed(b, func() error { _, err := s.Pull(ctx, meta.ID, out); return err })
		rawDir := b.TempDir()
		rawGet := timed(b, func() error { return rawGet(ctx, objs, fmt.Sprintf("bench/%d/raw/", i), files, rawDir) })
		b.ReportMetric(mb/push.Seconds(), "push-MB/s")
		b.ReportMetric(mb/rawPut.Seconds(), "rawput-MB/s")
		b.ReportMetric(rawPut.Seconds()/push.Seconds(), "push/raw")
		b.ReportMetric(mb/pull.Seconds(), "pull-MB/s")
		b.ReportMetric(mb/rawGet.Seconds(), "rawget-MB/s")
		b.ReportMetric(rawGet.Seconds()/pull.Seconds(), "pull/raw")
	}
	b.ReportMetric(mb, "session-MB")
	b.ReportMetric(float64(len(files)), "objects")
}

// BenchmarkStoreForkDedup stores 20 forks of one session — each keeps the first 30 of 40 steps and
// records its own last 10 — once through the session store, where they share blobs, and once as
// 20 independent full copies (each under its own prefix), and reports the stored bytes of both.
func BenchmarkStoreForkDedup(b *testing.B) {
	env := startS3(b)
	_, objs := env.sessionStore(b, StoreOptions{Parallelism: benchParallel})
	base := payloads(1, 40, 128<<10)
	var forks []string
	for f := range 20 {
		dir := filepath.Join(b.TempDir(), fmt.Sprintf("fork-%d", f))
		tail := payloads(uint64(1000+100*f), 10, 128<<10)
		writeSession(b, dir, fmt.Sprintf("fork-%d", f), "base", append(base[:30:30], tail...))
		forks = append(forks, dir)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		shared, _ := NewLayout(fmt.Sprintf("dedup/%d/shared", i))
		s := NewSessionStore(objs, shared, StoreOptions{Parallelism: benchParallel})
		for _, dir := range forks {
			if _, err := s.Push(ctx, dir); err != nil {
				b.Fatal(err)
			}
		}
		for f, dir := range forks {
			own, _ := NewLayout(fmt.Sprintf("dedup/%d/copy-%d", i, f))
			if _, err := NewSessionStore(objs, own, StoreOptions{Parallelism: benchParallel}).Push(ctx, dir); err != nil {
				b.Fatal(err)
			}
		}
		dedup := storedBytes(b, objs, fmt.Sprintf("dedup/%d/shared/", i))
		copies := storedBytes(b, objs, fmt.Sprintf("dedup/%d/copy-", i))
		b.ReportMetric(float64(dedup)/(1<<20), "forks-stored-MiB")
		b.ReportMetric(float64(copies)/(1<<20), "copies-stored-MiB")
		b.ReportMetric(float64(copies)/float64(dedup), "dedup-ratio")
	}
}

func timed(b *testing.B, fn func() error) time.Duration {
	start := time.Now()
	if err := fn(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// benchFiles lists the files a push uploads (every one, the sealed vault included), with their
// total size.
func benchFiles(b *testing.B, dir string) (map[string]int64, int64) {
	files := map[string]int64{}
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		files[path] = info.Size()
		total += info.Size()
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return files, total
}

func rawPut(ctx context.Context, objs *S3ObjectStore, prefix string, files map[string]int64) error {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	return forEach(ctx, benchParallel, paths, func(ctx context.Context, path string) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = objs.client.PutObject(ctx, objs.bucket, prefix+filepath.Base(path), f, files[path], minio.PutObjectOptions{})
		return err
	})
}

func rawGet(ctx context.Context, objs *S3ObjectStore, prefix string, files map[string]int64, dir string) error {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	return forEach(ctx, benchParallel, paths, func(ctx context.Context, path string) error {
		obj, err := objs.client.GetObject(ctx, objs.bucket, prefix+filepath.Base(path), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer obj.Close()
		f, err := os.Create(filepath.Join(dir, filepath.Base(path)))
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(f, obj)
		return err
	})
}

func storedBytes(b *testing.B, objs ObjectStore, prefix string) int64 {
	infos, err := objs.List(context.Background(), prefix)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, o := range infos {
		n += o.Size
	}
	return n
}
