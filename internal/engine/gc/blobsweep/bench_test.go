package blobsweep_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
)

// benchScale is the population of BenchmarkSweepVsListing: ARW_GC_BENCH_SESSIONS and
// ARW_GC_BENCH_BLOBS, by default 1,000 sessions and 100,000 blob keys (about a minute here);
// ARW_GC_BENCH_FULL=1 runs the 10,000 sessions and 1,000,000 keys.
func benchScale(b *testing.B) (sessions, blobs int) {
	sessions, blobs = 1000, 100_000
	if os.Getenv("ARW_GC_BENCH_FULL") != "" {
		sessions, blobs = 10_000, 1_000_000
	}
	for _, v := range []struct {
		env string
		n   *int
	}{{"ARW_GC_BENCH_SESSIONS", &sessions}, {"ARW_GC_BENCH_BLOBS", &blobs}} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				b.Fatalf("%s=%q is not a positive number", v.env, s)
			}
			*v.n = n
		}
	}
	return sessions, blobs
}

// BenchmarkSweepVsListing sweeps a store of N sessions and M blob keys on versitygw — nine in ten
// blobs referenced by the sessions' events.jsonl, the rest old orphans — and, over the same store,
// lists the M blob keys with the same paged listing: the least any sweep must do, since it has to
// see every blob. It reports the sweep's time per 1,000 sessions, the S3 requests per blob of both,
// and the ratios sweep/listing of time and of requests. Both sides use one connection pool and the
// listing's page size; the sweep additionally reads every events.jsonl (8 at a time), lists
// sessions/ twice and checkpoints/, and deletes the orphans in batches. The store is written
// straight into the server's directory (the posix backend), as uploading a million objects would
// dominate the run. Run with -benchtime 1x.
func BenchmarkSweepVsListing(b *testing.B) {
	nSessions, nBlobs := benchScale(b)
	e := startS3(b)
	old := time.Now().Add(-48 * time.Hour)
	perSession := nBlobs * 9 / 10 / nSessions
	write := func(key string, data []byte) {
		path := e.srv.ObjectPath(e.bucket, key)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Chtimes(path, old, old); err != nil {
			b.Fatal(err)
		}
	}
	hash := func(i int) string {
		s := sha256.Sum256([]byte(strconv.Itoa(i)))
		return hex.EncodeToString(s[:])
	}
	setup := time.Now()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < nBlobs; i += 8 {
				write(e.layout.Blob(hash(i)), []byte(strconv.Itoa(i)))
			}
			for s := w; s < nSessions; s += 8 {
				id := fmt.Sprintf("s%05d", s)
				var ev strings.Builder
				for j := range perSession {
					fmt.Fprintf(&ev, `{"schemaVersion":3,"step":%d,"kind":"tool_call","blobs":{"result":%q}}`+"\n", j, hash(s*perSession+j))
				}
				write(e.layout.SessionEvents(id), []byte(ev.String()))
				write(e.layout.SessionMetaSum(id), []byte("0000  meta.json\n"))
				write(e.layout.SessionMeta(id), []byte(`{"id":"`+id+`"}`))
			}
		})
	}
	wg.Wait()
	b.Logf("wrote %d sessions and %d blobs in %s", nSessions, nBlobs, time.Since(setup).Round(time.Millisecond))
	ctx := context.Background()

	for b.Loop() {
		var listPages, listed int
		t0 := time.Now()
		err := e.objects.ListPages(ctx, e.layout.BlobsPrefix(), func(p []blobstore.ObjectInfo) error {
			listPages++
			listed += len(p)
			return nil
		})
		list := time.Since(t0)
		if err != nil || listed != nBlobs {
			b.Fatalf("listing: %d keys, %v", listed, err)
		}
		rep, err := blobsweep.Run(ctx, e.objects, blobsweep.Options{Layout: e.layout, Margin: time.Hour, Lock: &blobsweep.MemLock{}, Holder: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if want := int64(nBlobs - perSession*nSessions); rep.Deleted != want {
			b.Fatalf("deleted %d, want the %d orphans", rep.Deleted, want)
		}
		sweepReq := float64(rep.Requests.Total()) / float64(nBlobs)
		listReq := float64(listPages) / float64(nBlobs)
		b.ReportMetric(rep.Duration.Seconds()/float64(nSessions)*1000, "s/1k-sessions")
		b.ReportMetric(rep.Duration.Seconds(), "sweep-s")
		b.ReportMetric(list.Seconds(), "list-s")
		b.ReportMetric(rep.Duration.Seconds()/list.Seconds(), "time-sweep/list")
		b.ReportMetric(sweepReq, "sweep-req/blob")
		b.ReportMetric(listReq, "list-req/blob")
		b.ReportMetric(sweepReq/listReq, "req-sweep/list")
		b.Logf("sweep requests: %+v; listing: %d pages", rep.Requests, listPages)
		// Put the orphans back, so another iteration sweeps the same store.
		for i := perSession * nSessions; i < nBlobs; i++ {
			write(e.layout.Blob(hash(i)), []byte(strconv.Itoa(i)))
		}
	}
	b.ReportMetric(float64(nSessions), "sessions")
	b.ReportMetric(float64(nBlobs), "blobs")
}
