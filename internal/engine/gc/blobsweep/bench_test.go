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
// and the ratios sweep/listing of time and of requests, for a cold sweep (no mark cache: every
// events.jsonl is read) and a warm one (the orphans put back, the cache of the cold sweep reused,
// as every sweep after the first finds it). Both sides use one connection pool and the listing's
// page size; a sweep additionally reads events.jsonl (8 at a time), lists sessions/ twice and
// checkpoints/, and deletes the orphans in batches. The blobs are written straight into the
// server's directory (the posix backend), as uploading a million objects would dominate the run;
// the sessions are uploaded, so they carry the ETags the cache relies on. Run with -benchtime 1x.
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
				for key, data := range map[string]string{e.layout.SessionEvents(id): ev.String(),
					e.layout.SessionMetaSum(id, strings.Repeat("0", 64)): "0000  meta.json\n", e.layout.SessionMeta(id): `{"id":"` + id + `"}`} {
					if err := e.objects.Put(context.Background(), key, strings.NewReader(data), int64(len(data))); err != nil {
						b.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	b.Logf("wrote %d sessions and %d blobs in %s", nSessions, nBlobs, time.Since(setup).Round(time.Millisecond))
	ctx := context.Background()

	if b.Failed() {
		return
	}
	restoreOrphans := func() {
		for i := perSession * nSessions; i < nBlobs; i++ {
			write(e.layout.Blob(hash(i)), []byte(strconv.Itoa(i)))
		}
	}
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
		listReq := float64(listPages) / float64(nBlobs)
		b.ReportMetric(list.Seconds(), "list-s")
		b.ReportMetric(listReq, "list-req/blob")
		for _, pass := range []string{"cold", "warm"} {
			rep, err := blobsweep.Run(ctx, e.objects, blobsweep.Options{Layout: e.layout, Margin: time.Hour, Lock: &blobsweep.MemLock{}, Holder: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			if want := int64(nBlobs - perSession*nSessions); rep.Deleted != want {
				b.Fatalf("%s sweep deleted %d, want the %d orphans", pass, rep.Deleted, want)
			}
			if (pass == "warm") != (rep.Cached == int64(nSessions)) {
				b.Fatalf("%s sweep took %d of %d roots from the cache (%s)", pass, rep.Cached, nSessions, rep.CacheProblem)
			}
			sweepReq := float64(rep.Requests.Total()) / float64(nBlobs)
			b.ReportMetric(rep.Duration.Seconds()/float64(nSessions)*1000, pass+"-s/1k-sessions")
			b.ReportMetric(rep.Duration.Seconds()/list.Seconds(), pass+"-time-sweep/list")
			b.ReportMetric(sweepReq, pass+"-sweep-req/blob")
			b.ReportMetric(sweepReq/listReq, pass+"-req-sweep/list")
			b.Logf("%s sweep: %s, requests %+v; listing: %s, %d pages", pass, rep.Duration.Round(time.Millisecond), rep.Requests,
				list.Round(time.Millisecond), listPages)
			restoreOrphans() // so the next sweep has the same work
		}
		// The next iteration starts cold again.
		if err := e.objects.Delete(ctx, e.layout.SweepMarks()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(nSessions), "sessions")
	b.ReportMetric(float64(nBlobs), "blobs")
}
