package blobstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// proxiedStore pushes a session cleanly, then opens a store on the same prefix through a fault
// proxy that injects f, on the requests only accepts, up to maxPerRequest times per request.
func proxiedStore(t *testing.T, payloads []payload, f fault, maxPerRequest int, only func(*http.Request) bool, tune func(*Config)) (dir string, clean, faulty *SessionStore, proxy *faultProxy) {
	t.Helper()
	env := startS3(t)
	clean, _ = env.sessionStore(t, StoreOptions{Parallelism: 4})
	dir = filepath.Join(t.TempDir(), "run-1")
	writeSession(t, dir, "run-1", "", payloads)
	if _, err := clean.Push(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	proxy = startFaultProxy(t, env.srv.Endpoint, 1, map[fault]int{f: 1}, maxPerRequest)
	proxy.only = only
	cfg := env.config(proxy.addr)
	if tune != nil {
		tune(&cfg)
	}
	faulty = NewSessionStore(env.open(t, cfg), clean.Layout(), StoreOptions{Parallelism: 4})
	return dir, clean, faulty, proxy
}

func isBlob(r *http.Request) bool { return strings.Contains(r.URL.Path, "/blobs/") }

func isMeta(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/"+session.MetaFile) }

// freshReads counts, per blob, the answers a client received to GETs without If-Match: a reader
// sends If-Match from its first answer on, when it resumes or opens the object again, so these
// are the reads begun anew. An attempt that got no answer is not counted.
type freshReads struct {
	mu   sync.Mutex
	n    map[string]int
	next http.RoundTripper
}

func (c *freshReads) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil && r.Method == http.MethodGet && isBlob(r) && r.Header.Get("If-Match") == "" {
		c.mu.Lock()
		c.n[r.URL.Path]++
		c.mu.Unlock()
	}
	return resp, err
}

// TestS3PullAbandonsATricklingServer: a server that sends one byte every 20 ms makes progress on
// every attempt, so progress alone would keep resuming it for hours; the throughput floor, counted
// over all the resumed attempts, must end it within seconds with a clear error.
func TestS3PullAbandonsATricklingServer(t *testing.T) {
	reads := &freshReads{n: map[string]int{}}
	_, _, faulty, proxy := proxiedStore(t, payloads(1, 1, 320<<10), faultTrickle, 1<<30, isBlob, func(c *Config) {
		c.RequestTimeout = 300 * time.Millisecond
		c.MinThroughput = 64 << 10
		c.wrapTransport = func(next http.RoundTripper) http.RoundTripper { reads.next = next; return reads }
	})
	grace := Config{RequestTimeout: 300 * time.Millisecond, Retry: RetryPolicy{BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond}}.NoAnswerBudget()
	// Only a hang guard: without the floor the pull would trickle for hours. That it ends within
	// seconds is checked below on what a loaded machine cannot stretch, as it stretches every
	// request and write of the pull: the waiting time the reader counts, and the reads begun.
	ctx, cancel := context.WithTimeout(context.Background(), grace+10*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out")
	_, err := faulty.Pull(ctx, "run-1", out)
	var slow *TooSlowError
	if !errors.Is(err, ErrTooSlow) || !errors.As(err, &slow) || !strings.Contains(err.Error(), "below the minimum of 64.0 KiB/s") {
		t.Fatalf("pull from a trickling server: %v, want ErrTooSlow saying the minimum", err)
	}
	// The floor allows the grace plus what the bytes delivered allow at the minimum, and no more
	// than a late timer beyond that.
	allowed := grace + time.Duration(float64(slow.Bytes)/float64(64<<10)*float64(time.Second))
	if slow.Elapsed < allowed || slow.Elapsed > allowed+time.Second {
		t.Fatalf("the trickling read was abandoned after %s of waiting with %d bytes, want within a second after the %s they allow",
			slow.Elapsed, slow.Bytes, allowed)
	}
	if proxy.counts()["trickle"] == 0 {
		t.Fatal("the proxy trickled nothing")
	}
	// Fetching a too-slow blob again, as a damaged one is, would give it the grace again.
	reads.mu.Lock()
	defer reads.mu.Unlock()
	if len(reads.n) == 0 {
		t.Fatal("no blob read was counted")
	}
	for path, n := range reads.n {
		if n > 1 {
			t.Errorf("%s was read %d times from its start, want an abandoned transfer never begun again", path, n)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an abandoned pull left %s", out)
	}
}

// TestS3SlowButSteadyPullIsNotAbandoned keeps the floor honest: a transfer above it completes even
// when it takes many request timeouts.
func TestS3SlowButSteadyPullIsNotAbandoned(t *testing.T) {
	const timeout = 100 * time.Millisecond
	dir, _, faulty, proxy := proxiedStore(t, payloads(1, 1, 32<<10), faultTrickle, 1<<30, isBlob, func(c *Config) {
		c.RequestTimeout = timeout
		// Bytes per second. The trickle moves 32 bytes a millisecond, tens of KB/s even when a loaded
		// machine wakes its timer late, far above the floor, so that the floor, not the machine, is
		// what this test checks.
		c.MinThroughput = 200
	})
	proxy.trickle, proxy.trickleBytes = time.Millisecond, 32
	out := filepath.Join(t.TempDir(), "out")
	start := time.Now()
	if _, err := faulty.Pull(context.Background(), "run-1", out); err != nil {
		t.Fatalf("a pull above the minimum throughput: %v", err)
	}
	assertSameSession(t, dir, out)
	// The 32 KiB blob alone is 1,024 writes at least a millisecond apart.
	if elapsed := time.Since(start); proxy.counts()["trickle"] == 0 || elapsed < 10*timeout {
		t.Fatalf("the pull took %s (trickled %d answers), want it to outlast ten request timeouts of %s",
			elapsed, proxy.counts()["trickle"], timeout)
	}
}

// TestS3SilentEndpointFailsWithinTheBudget: a listener that accepts and never answers must fail
// the first request within NoAnswerBudget, the time the documentation states.
func TestS3SilentEndpointFailsWithinTheBudget(t *testing.T) {
	addr := silentListener(t)
	cfg := Config{Endpoint: "http://" + addr, Bucket: "silent", CreateBucket: true, RequestTimeout: 200 * time.Millisecond,
		Credentials: Credentials{AccessKeyID: "AK", SecretAccessKey: "SK"}}
	budget := cfg.NoAnswerBudget()
	if budget != 5*200*time.Millisecond+1500*time.Millisecond {
		t.Fatalf("NoAnswerBudget = %s, want 5 × 200ms + 1.5s of backoff", budget)
	}
	start := time.Now()
	_, err := Open(context.Background(), cfg)
	elapsed := time.Since(start)
	var op *OpError
	if !errors.As(err, &op) || op.Attempts != 5 || !strings.Contains(err.Error(), "no complete answer within 200ms") {
		t.Fatalf("open against a silent endpoint: %v, want 5 attempts without an answer", err)
	}
	// The budget holds the longest backoffs already; the two seconds over it are for the timers and
	// dials of five attempts, which a loaded machine serves late. The attempts are counted exactly
	// above, so this only has to catch an attempt that outlives its timeout (the 30 s default would).
	if elapsed > budget+2*time.Second || elapsed < 5*200*time.Millisecond {
		t.Fatalf("a silent endpoint failed after %s, want within the stated %s", elapsed, budget)
	}
}

// silentListener accepts connections and never answers.
func silentListener(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestS3BlobDamagedOnTheWayIsFetchedAgain: a blob whose answer is altered once on the way is
// fetched again and the pull succeeds; one altered on every read fails as damaged, after three.
func TestS3BlobDamagedOnTheWayIsFetchedAgain(t *testing.T) {
	dir, _, faulty, proxy := proxiedStore(t, payloads(1, 6, 8<<10), faultFlip, 1, isBlob, nil)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := faulty.Pull(context.Background(), "run-1", out); err != nil {
		t.Fatalf("pull through blobs damaged once on the way: %v", err)
	}
	assertSameSession(t, dir, out)
	// The log's segments are blobs too, and damaged and fetched again the same way.
	if n, want := proxy.counts()["flip"], 6+localSegments(t, dir); n != want {
		t.Fatalf("the proxy damaged %d blob answers, want all %d (6 blobs and the log's segments)", n, want)
	}

	_, _, always, _ := proxiedStore(t, payloads(1, 2, 8<<10), faultFlip, 1<<30, isBlob, nil)
	_, err := always.Pull(context.Background(), "run-1", filepath.Join(t.TempDir(), "out"))
	var dm *session.DigestMismatchError
	if !errors.As(err, &dm) || !strings.Contains(err.Error(), "read 3 times") {
		t.Fatalf("pull through blobs damaged on every read: %v, want a DigestMismatchError after 3 reads", err)
	}
}

// TestS3MetaJSONDamagedOnTheWay: a meta.json whose answer is altered on the way into other valid
// JSON (a renamed key) is read again by a pull, and never passes for a conflict on a re-push.
func TestS3MetaJSONDamagedOnTheWay(t *testing.T) {
	renameKey := func(b []byte) {
		if i := bytes.Index(b, []byte(`"createdAt"`)); i >= 0 {
			b[i+9] ^= 0x01 // "createdAu": valid JSON that encoding/json would take without createdAt
		}
	}
	dir, _, once, proxy := proxiedStore(t, payloads(1, 2, 8<<10), faultFlip, 1, isMeta, nil)
	proxy.flip = renameKey
	out := filepath.Join(t.TempDir(), "out")
	if _, err := once.Pull(context.Background(), "run-1", out); err != nil {
		t.Fatalf("pull through a meta.json damaged once on the way: %v", err)
	}
	assertSameSession(t, dir, out)
	if proxy.counts()["flip"] == 0 {
		t.Fatal("the proxy damaged no meta.json")
	}

	dir, clean, always, proxy := proxiedStore(t, payloads(1, 2, 8<<10), faultFlip, 1<<30, isMeta, nil)
	proxy.flip = renameKey
	_, err := always.Pull(context.Background(), "run-1", filepath.Join(t.TempDir(), "out"))
	var dm *session.DigestMismatchError
	if !errors.As(err, &dm) || !strings.HasSuffix(dm.Object, "/sessions/run-1/meta.json") {
		t.Fatalf("pull through a meta.json damaged on every read: %v, want a DigestMismatchError naming it", err)
	}
	res, err := always.Push(context.Background(), dir)
	if err != nil || !res.AlreadyCommitted {
		t.Fatalf("re-push while every meta.json read is damaged: %+v, %v; want it found committed, not a conflict", res, err)
	}
	if _, err := clean.Pull(context.Background(), "run-1", filepath.Join(t.TempDir(), "clean")); err != nil {
		t.Fatalf("the store after that re-push: %v", err)
	}
}

// TestS3MetaJSONDamagedAtRest flips a bit of meta.json on the server's disk, keeping it valid JSON.
func TestS3MetaJSONDamagedAtRest(t *testing.T) {
	env := startS3(t)
	store, _ := env.sessionStore(t, StoreOptions{})
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "run-1")
	writeSession(t, dir, "run-1", "", payloads(1, 2, 8<<10))
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	path := env.srv.ObjectPath(env.bucket, store.Layout().SessionMeta("run-1"))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(`"fingerprintMode"`))
	data[i+15] ^= 0x01 // "fingerprintModd"
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var dm *session.DigestMismatchError
	if err := pullErr(t, store); !errors.As(err, &dm) || !strings.HasSuffix(dm.Object, "/meta.json") {
		t.Fatalf("pull of a meta.json damaged at rest: %v, want a DigestMismatchError naming it", err)
	}
	if res, err := store.Push(ctx, dir); err != nil || !res.AlreadyCommitted {
		t.Fatalf("re-push over a meta.json damaged at rest: %+v, %v; want a repair", res, err)
	}
	if err := pullErr(t, store); err != nil {
		t.Fatalf("pull after the repair: %v", err)
	}
}

// TestS3UnknownAccessKeyIsReportedAsBadCredentials: an access key the server does not know is a
// credentials problem, never a missing bucket.
func TestS3UnknownAccessKeyIsReportedAsBadCredentials(t *testing.T) {
	env := startS3(t)
	env.open(t, env.config("")) // the bucket exists
	for _, create := range []bool{false, true} {
		for _, bucket := range []string{env.bucket, "no-such-bucket"} {
			cfg := env.config("")
			cfg.Bucket, cfg.CreateBucket = bucket, create
			cfg.Credentials.AccessKeyID = "AKIAUNKNOWNKEY000000"
			_, err := Open(context.Background(), cfg)
			if err == nil || errors.Is(err, ErrBucketNotFound) || !strings.Contains(err.Error(), "check the credentials") {
				t.Errorf("open of %s (create %v) with an unknown access key: %v, want a credentials error", bucket, create, err)
			}
		}
	}
}

// TestS3UploadDamagedOnTheWayDoesNotBlameTheCredentials: the server refuses an upload whose bytes
// were altered after signing. Once is retried away; every time fails, saying so, not blaming keys
// that signed every other request.
func TestS3UploadDamagedOnTheWayDoesNotBlameTheCredentials(t *testing.T) {
	isPut := func(r *http.Request) bool { return r.Method == http.MethodPut && isBlob(r) }
	for _, tc := range []struct {
		name          string
		maxPerRequest int
		succeed       bool
	}{{"once", 1, true}, {"always", 1 << 30, false}} {
		t.Run(tc.name, func(t *testing.T) {
			env := startS3(t)
			env.open(t, env.config(""))
			proxy := startFaultProxy(t, env.srv.Endpoint, 1, map[fault]int{faultAlterUpload: 1}, tc.maxPerRequest)
			proxy.only = isPut
			store := env.storeVia(t, proxy.addr, "team/prod", 0)
			dir := filepath.Join(t.TempDir(), "run-1")
			writeSession(t, dir, "run-1", "", payloads(1, 3, 8<<10))
			_, err := store.Push(context.Background(), dir)
			if proxy.counts()["alter-upload"] == 0 {
				t.Fatal("the proxy altered no upload")
			}
			if tc.succeed {
				if err != nil {
					t.Fatalf("push through uploads altered once: %v", err)
				}
				return
			}
			if err == nil || strings.Contains(err.Error(), "check the credentials") || strings.Contains(err.Error(), "Check your key") ||
				!strings.Contains(err.Error(), "SignatureDoesNotMatch") || !strings.Contains(err.Error(), "altered the upload") {
				t.Fatalf("push through uploads altered every time: %v, want an error about the path, not the credentials", err)
			}
		})
	}
}

// TestS3ACallerThatReadsSlowlyIsNotAbandoned: the throughput floor holds the server to account,
// not the caller; time between reads (a replay working through events) does not count.
func TestS3ACallerThatReadsSlowlyIsNotAbandoned(t *testing.T) {
	env := startS3(t)
	cfg := env.config("")
	// A short grace, so that the caller's pause outlasts it by far in little time, yet attempts that
	// give a server on a loaded machine half a second each to answer and 1.5 s in all, where
	// 100 ms × 5 gave up on a stall of 0.6 s.
	cfg.RequestTimeout, cfg.Retry.MaxAttempts, cfg.MinThroughput = 500*time.Millisecond, 3, 1<<10
	grace := cfg.NoAnswerBudget()
	objs := env.open(t, cfg)
	ctx := context.Background()
	// More than the sockets between server and client hold during the pause (Linux lets the
	// sender's buffer grow to 4 MiB by default), so the rest must come from the server after it,
	// where a floor that counted the pause would cut it off: 64 KiB arrived whole before the pause
	// and sometimes read on unharmed.
	data := sealedBytes(5, 16<<20)
	if err := objs.Put(ctx, "slow/reader", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	rc, err := objs.Get(ctx, "slow/reader")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	head := make([]byte, 100)
	if _, err := io.ReadFull(rc, head); err != nil {
		t.Fatal(err)
	}
	time.Sleep(grace + time.Second) // far beyond the grace and what 100 bytes allow at 1 KiB/s (0.1 s)
	rest, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(append(head, rest...), data) {
		t.Fatalf("reading on after a pause of the caller's: %d bytes, %v", len(rest), err)
	}
}

func isIndex(r *http.Request) bool { return strings.Contains(path.Base(r.URL.Path), "segments.") }

// TestS3SegmentIndexDamagedOnTheWayIsReadAgain: the log's index gets the tries every other object
// gets, whether its answer is cut short or garbled on the way; damaged on every read, the pull says
// how many times it read it.
func TestS3SegmentIndexDamagedOnTheWayIsReadAgain(t *testing.T) {
	garble := func(b []byte) { b[len(b)/2] = 0xff }
	for _, f := range []fault{faultTruncate, faultFlip} {
		t.Run(f.String(), func(t *testing.T) {
			dir, _, once, proxy := proxiedStore(t, payloads(1, 2, 8<<10), f, 1, isIndex, nil)
			proxy.flip = garble
			out := filepath.Join(t.TempDir(), "out")
			if _, err := once.Pull(context.Background(), "run-1", out); err != nil {
				t.Fatalf("pull through an index damaged once on the way: %v", err)
			}
			assertSameSession(t, dir, out)
			if proxy.counts()[f.String()] == 0 {
				t.Fatal("the proxy damaged no index read")
			}
		})
	}
	_, _, always, proxy := proxiedStore(t, payloads(1, 2, 8<<10), faultFlip, 1<<30, isIndex, nil)
	proxy.flip = garble
	_, err := always.Pull(context.Background(), "run-1", filepath.Join(t.TempDir(), "out"))
	if err == nil || !strings.Contains(err.Error(), "read 3 times") || !strings.Contains(err.Error(), "segments.") {
		t.Fatalf("pull through an index damaged on every read: %v, want it named and read 3 times", err)
	}
}

func isListing(r *http.Request) bool { return r.URL.Query().Has("list-type") }

// TestS3ListPagesEndsWhenAListingTrickles: the sweep's page-by-page listing gives each attempt a
// deadline that covers the answer's body, so a server that sends a listing a byte at a time (or half
// of it and then nothing) fails the sweep within its budget instead of holding it for ever.
func TestS3ListPagesEndsWhenAListingTrickles(t *testing.T) {
	_, _, faulty, proxy := proxiedStore(t, payloads(1, 3, 2<<10), faultTrickle, 1<<30, isListing, func(c *Config) {
		c.RequestTimeout = 300 * time.Millisecond
		c.Retry = RetryPolicy{MaxAttempts: 2, BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond}
	})
	objs := faulty.objects.(*S3ObjectStore)
	start := time.Now()
	err := objs.ListPages(context.Background(), faulty.Layout().SessionsPrefix(), func([]ObjectInfo) error { return nil })
	if took := time.Since(start); err == nil || took > 10*time.Second {
		t.Fatalf("listing from a trickling server: %v after %s, want a failure within seconds", err, took)
	}
	if proxy.counts()["trickle"] == 0 {
		t.Fatal("the proxy trickled no listing")
	}
}
