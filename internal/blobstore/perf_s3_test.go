package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// requestCounter counts the requests a store sends, by method, through the client's transport.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	next   http.RoundTripper
}

func (c *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.counts[r.Method]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// take returns the counts so far and starts again from zero.
func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}

// countingStore opens a session store on the server whose requests are counted.
func (e *s3Env) countingStore(t testing.TB, opts StoreOptions) (*SessionStore, *S3ObjectStore, *requestCounter) {
	t.Helper()
	counter := &requestCounter{counts: map[string]int{}}
	cfg := e.config("")
	cfg.wrapTransport = func(next http.RoundTripper) http.RoundTripper { counter.next = next; return counter }
	objs := e.open(t, cfg)
	layout, err := NewLayout(cfg.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	counter.take() // the bucket checks of Open
	return NewSessionStore(objs, layout, opts), objs, counter
}

// TestS3RequestsPerPushAndPull pins the requests a push and a pull of a fixed session send, so that
// an extra round trip per object cannot creep in unnoticed. A push of a new session: one GET for
// meta.json (missing, so no record is asked for); per blob and per segment of the log a HEAD (is it
// stored?), a PUT and a HEAD confirming it; a PUT and a confirming HEAD each for the log's index, the
// vault and meta.json's record; meta.json created (a conditional PUT) and read back with one GET;
// and the settle: a HEAD of the bucket for the store's time before and after one GET listing the
// sweeps' delete windows (none, so nothing is checked again). A pull: meta.json (GET) and a HEAD of
// the record its hash names, then the index, every segment, every blob and the vault, one GET each.
func TestS3RequestsPerPushAndPull(t *testing.T) {
	env := startS3(t)
	s, _, counter := env.countingStore(t, StoreOptions{Parallelism: 4})
	const blobs = 6
	dir := filepath.Join(t.TempDir(), "s")
	meta := writeSession(t, dir, "counted", "", payloads(7, blobs, 4<<10))
	ctx := context.Background()
	res, err := s.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	segs := res.Segments
	if segs < 2 {
		t.Fatalf("the log is %d segments, want at least 2 (session_start is a segment of its own)", segs)
	}
	assertRequests(t, "push", counter.take(), map[string]int{
		http.MethodGet:  1 + 1 + 1,
		http.MethodHead: 2*blobs + 2*segs + 3 + 2,
		http.MethodPut:  blobs + segs + 2 + 2,
	})
	out := filepath.Join(t.TempDir(), "pulled")
	if _, err := s.Pull(ctx, meta.ID, out); err != nil {
		t.Fatal(err)
	}
	assertRequests(t, "pull", counter.take(), map[string]int{http.MethodGet: 1 + 1 + segs + blobs + 1, http.MethodHead: 1})
	assertSameSession(t, dir, out)
}

func assertRequests(t *testing.T, op string, got, want map[string]int) {
	t.Helper()
	for m, n := range got {
		if n != want[m] {
			t.Errorf("%s sent %d %s requests, want %d (all: %v)", op, n, m, want[m], got)
		}
	}
	for m, n := range want {
		if _, ok := got[m]; !ok && n != 0 {
			t.Errorf("%s sent no %s request, want %d", op, m, n)
		}
	}
}

// TestS3BlobChangedAfterTheCheckIsNeverStored changes a blob between the checks a push makes before
// uploading and its upload, which hashes the bytes as it sends them: the upload must fail naming the
// file, and the server must hold nothing under the blob's hash, because the last bytes of the body
// are held back once the hash is known not to match.
func TestS3BlobChangedAfterTheCheckIsNeverStored(t *testing.T) {
	env := startS3(t)
	s, objs := env.sessionStore(t, StoreOptions{})
	dir := filepath.Join(t.TempDir(), "s")
	writeSession(t, dir, "changed", "", payloads(11, 1, 300<<10))
	local, err := openLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer local.close()
	b := local.blobs[0]
	path := filepath.Join(dir, session.BlobsDir, b.hash)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0x01 // the very last byte: only the final read can tell
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	key := s.layout.Blob(b.hash)
	err = s.uploadBlob(context.Background(), path, key, b)
	var dm *session.DigestMismatchError
	if !errors.As(err, &dm) || dm.Object != path {
		t.Fatalf("upload of a changed blob: got %v, want a *session.DigestMismatchError naming %s", err, path)
	}
	if _, err := objs.Stat(context.Background(), key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the changed blob reached the store (stat: %v)", err)
	}
}

// TestVerifyingReaderWithholdsTheEndOfAMismatch reads a file through verifyingReader: intact, it
// gives every byte; changed, it gives all but the last read's bytes and then the mismatch; rewound,
// it starts again and hashes afresh.
func TestVerifyingReaderWithholdsTheEndOfAMismatch(t *testing.T) {
	data := sealedBytes(3, 100<<10)
	path := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	newReader := func(want string) *verifyingReader {
		return &verifyingReader{f: f, size: int64(len(data)), want: want, name: path, h: sha256.New()}
	}
	v := newReader(sha256Hex(data))
	for range 2 { // the second pass after a rewind
		got, err := io.ReadAll(v)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("intact file: read %d bytes, err %v; want all %d", len(got), err, len(data))
		}
		if _, err := v.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
	}
	other := bytes.Clone(data)
	other[len(other)-1] ^= 1
	v = newReader(sha256Hex(other))
	buf := make([]byte, 32<<10)
	var sent int
	for {
		n, err := v.Read(buf)
		sent += n
		if err != nil {
			var dm *session.DigestMismatchError
			if !errors.As(err, &dm) {
				t.Fatalf("changed file: got %v, want a *session.DigestMismatchError", err)
			}
			break
		}
	}
	if sent >= len(data) {
		t.Fatalf("changed file: %d of %d bytes were given out before the mismatch; the end must be held back", sent, len(data))
	}
}

// aheadRecorder is an ObjectStore that holds back the read of the commit marker, which a push makes
// just after verifying the session, until every blob has been asked about.
type aheadRecorder struct {
	ObjectStore
	marker string
	blobs  map[string]bool // the blob keys not yet asked about
	mu     sync.Mutex
	asked  map[string]int
	all    chan struct{} // closed once every blob was asked about
	late   bool          // the marker was read before every blob was asked about
}

func (r *aheadRecorder) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	r.mu.Lock()
	r.asked[key]++
	if r.blobs[key] {
		delete(r.blobs, key)
		if len(r.blobs) == 0 {
			close(r.all)
		}
	}
	r.mu.Unlock()
	return r.ObjectStore.Stat(ctx, key)
}

func (r *aheadRecorder) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if key == r.marker {
		select {
		case <-r.all:
		case <-time.After(10 * time.Second):
			r.mu.Lock()
			r.late = true
			r.mu.Unlock()
		}
	}
	return r.ObjectStore.Get(ctx, key)
}

// TestPushAsksAboutBlobsWhileItVerifies holds back the read of the commit marker, which a push makes
// once it has verified the session, until every blob has been asked about: a push that sends its
// HEADs while session.Open verifies the session gets through at once, one that asks only after it
// would wait in vain. Each blob is asked about once before the upload (and once more to confirm it).
func TestPushAsksAboutBlobsWhileItVerifies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	meta := writeSession(t, dir, "ahead", "", payloads(21, 5, 4<<10))
	entries, err := os.ReadDir(filepath.Join(dir, session.BlobsDir))
	if err != nil || len(entries) != 5 {
		t.Fatalf("blobs: %v %v", entries, err)
	}
	layout, _ := NewLayout("p")
	rec := &aheadRecorder{ObjectStore: NewMemObjectStore(), marker: layout.SessionMeta(meta.ID), blobs: map[string]bool{},
		asked: map[string]int{}, all: make(chan struct{})}
	for _, e := range entries {
		rec.blobs[layout.Blob(e.Name())] = true
	}
	if _, err := NewSessionStore(rec, layout, StoreOptions{}).Push(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.late {
		t.Error("the push read its commit marker before asking about every blob: the HEADs were not sent while it verified")
	}
	for _, e := range entries {
		if n := rec.asked[layout.Blob(e.Name())]; n != 2 {
			t.Errorf("blob %s was asked about %d times, want twice (whether it is stored, then to confirm it)", e.Name(), n)
		}
	}
}
