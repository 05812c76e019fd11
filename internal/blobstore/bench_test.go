package blobstore

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// benchParallel is the transfer parallelism of both sides of the throughput comparison.
const benchParallel = 8

// benchRounds is how many times one iteration of BenchmarkStoreThroughput compares the two sides;
// it reports the median of each figure, since one sample on a shared machine says little.
const benchRounds = 3

// BenchmarkStoreThroughput pushes and pulls a ~100 MB session of 400 blobs through the session
// store, and moves the same files with raw minio-go PutObject/GetObject, reporting MB/s for each side
// and their ratio: the store's cost over the limit of the server. Run with -benchtime 1x; each round
// uses fresh prefixes, so nothing is deduplicated away, and the rounds alternate which side goes
// first, so neither always finds the caches the other warmed.
//
// Both sides move the same files (every blob, events.jsonl, the vault, meta.json: 403 objects on the
// raw side), through the same minio-go client and transport, with at most benchParallel transfers
// at once and single-PUT uploads (every object is far below either side's part size); the store's
// format keeps the log as some 45 content-addressed segments listed by segments.json, and
// meta.json.sha256 beside meta.json, so it moves those bytes as 449 objects. The raw side
// does only that: PutObject of each file; GetObject of each object copied into a new file. The store
// does what its guarantees need on top: a push opens and verifies the session (session.Open) before
// uploading, asks whether each blob is stored (HEAD), hashes every blob as it sends it, confirms
// each upload (HEAD, right after it) before it commits meta.json.sha256 and meta.json; a pull reads
// and verifies meta.json, hashes every object as it downloads it, makes the copy durable (fdatasync
// of every file and fsync of its directories, where the raw side leaves the files in the page
// cache) and opens it with session.Open before renaming it into place. The requests each side sends
// are counted and reported per round (TestS3RequestsPerPushAndPull pins the store's).
func BenchmarkStoreThroughput(b *testing.B) {
	env := startS3(b)
	_, objs, counter := env.countingStore(b, StoreOptions{Parallelism: benchParallel})
	dir := filepath.Join(b.TempDir(), "big")
	meta := writeSession(b, dir, "big", "", payloads(1, 400, 256<<10))
	files, total := benchFiles(b, dir)
	mb := float64(total) / 1e6
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		figures := map[string][]float64{}
		add := func(name string, v float64) { figures[name] = append(figures[name], v) }
		for r := range benchRounds {
			prefix := fmt.Sprintf("bench/%d-%d/", i, r)
			layout, _ := NewLayout(prefix + "store")
			s := NewSessionStore(objs, layout, StoreOptions{Parallelism: benchParallel})
			var push, put, pull, get time.Duration
			var pushReqs, putReqs, pullReqs, getReqs int
			storePush := func() {
				counter.take()
				push = timed(b, func() error { _, err := s.Push(ctx, dir); return err })
				pushReqs = sumCounts(counter.take())
			}
			rawPush := func() {
				counter.take()
				put = timed(b, func() error { return rawPut(ctx, objs, prefix+"raw/", files) })
				putReqs = sumCounts(counter.take())
			}
			storePull := func() {
				out := filepath.Join(b.TempDir(), "pulled")
				counter.take()
				pull = timed(b, func() error { _, err := s.Pull(ctx, meta.ID, out); return err })
				pullReqs = sumCounts(counter.take())
			}
			rawPull := func() {
				rawDir := b.TempDir()
				counter.take()
				get = timed(b, func() error { return rawGet(ctx, objs, prefix+"raw/", files, rawDir) })
				getReqs = sumCounts(counter.take())
			}
			order := []func(){storePush, rawPush, storePull, rawPull}
			if r%2 == 1 {
				order = []func(){rawPush, storePush, rawPull, storePull}
			}
			for _, step := range order {
				step()
			}
			add("push-MB/s", mb/push.Seconds())
			add("rawput-MB/s", mb/put.Seconds())
			add("push/raw", put.Seconds()/push.Seconds())
			add("pull-MB/s", mb/pull.Seconds())
			add("rawget-MB/s", mb/get.Seconds())
			add("pull/raw", get.Seconds()/pull.Seconds())
			add("push-requests", float64(pushReqs))
			add("rawput-requests", float64(putReqs))
			add("pull-requests", float64(pullReqs))
			add("rawget-requests", float64(getReqs))
		}
		for name, vs := range figures {
			b.ReportMetric(median(vs), name)
		}
	}
	b.ReportMetric(mb, "session-MB")
	b.ReportMetric(float64(len(files)), "objects")
}

func sumCounts(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func median(vs []float64) float64 {
	vs = slices.Clone(vs)
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
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

func storedBytes(b testing.TB, objs ObjectStore, prefix string) int64 {
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
