package blobstore

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowSegments is an ObjectStore whose reads of blobs take a while, and which records how many of
// them were under way at once.
type slowSegments struct {
	ObjectStore
	blobs    string // the blob key prefix
	mu       sync.Mutex
	inFlight int
	most     int
}

func (s *slowSegments) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if !strings.HasPrefix(key, s.blobs) {
		return s.ObjectStore.Get(ctx, key)
	}
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	time.Sleep(20 * time.Millisecond)
	return s.ObjectStore.Get(ctx, key)
}

// TestPullFetchesTheLogsSegmentsAhead pulls a session whose log is many segments from a store
// that takes a while to answer each: the segments are fetched several at once (a pull that asks
// for one at a time never has two under way), and the log still comes out whole and verified.
func TestPullFetchesTheLogsSegmentsAhead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	meta := writeSession(t, dir, "ahead", "", payloads(1, 200, 1500))
	segs := localSegments(t, dir)
	if segs < 8 {
		t.Fatalf("the log is %d segments, want at least 8", segs)
	}
	layout, _ := NewLayout("p")
	slow := &slowSegments{ObjectStore: NewMemObjectStore(), blobs: layout.BlobsPrefix()}
	ctx := context.Background()
	if _, err := NewSessionStore(slow.ObjectStore, layout, StoreOptions{}).Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	store := NewSessionStore(slow, layout, StoreOptions{Parallelism: 4})
	log, _, err := store.openLog(ctx, meta)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := copyVerifiedN(log, meta.EventsHash); err != nil {
		t.Fatal(err)
	}
	log.Close()
	if slow.most < 2 || slow.most > 4+2 {
		t.Errorf("at most %d segments were fetched at once, want between 2 and the parallelism plus the one read and the one next", slow.most)
	}
	out := filepath.Join(t.TempDir(), "pulled")
	if _, err := store.Pull(ctx, meta.ID, out); err != nil {
		t.Fatal(err)
	}
	assertSameSession(t, dir, out)
}

func copyVerifiedN(r io.Reader, want string) (int64, error) {
	cw := &countingWriter{w: io.Discard}
	return cw.n, copyVerified(cw, r, want, "log")
}
