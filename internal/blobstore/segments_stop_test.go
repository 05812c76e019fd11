package blobstore

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// stallingSegments is an ObjectStore that answers the GET of one segment with another segment's
// bytes (an object that hashes right, but as another's) and holds every other segment's GET until
// its context is cancelled, taking a moment more to return, as a connection being torn down does.
// It counts the GETs still under way.
type stallingSegments struct {
	ObjectStore
	lie, with string // the blob key answered with another's bytes, and that other key
	blobs     string // the blob key prefix
	mu        sync.Mutex
	inFlight  int
}

func (s *stallingSegments) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if !strings.HasPrefix(key, s.blobs) {
		return s.ObjectStore.Get(ctx, key)
	}
	if key == s.lie {
		return s.ObjectStore.Get(ctx, s.with)
	}
	s.mu.Lock()
	s.inFlight++
	s.mu.Unlock()
	defer func() {
		time.Sleep(30 * time.Millisecond)
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *stallingSegments) underWay() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// newStallingStore pushes a session whose log is many segments and returns a store over it that lies
// about the log's first segment and stalls on the others, with the session's meta.
func newStallingStore(t *testing.T) (*SessionStore, *stallingSegments, session.Meta, []segment) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s")
	meta := writeSession(t, dir, "stall", "", payloads(1, 200, 1500))
	layout, _ := NewLayout("p")
	mem := NewMemObjectStore()
	if _, err := NewSessionStore(mem, layout, StoreOptions{}).Push(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	raw, ok := mem.Bytes(layout.SessionSegments(meta.ID, meta.EventsHash))
	if !ok {
		t.Fatal("the push stored no segments.json")
	}
	var idx segmentIndex
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Segments) < 8 {
		t.Fatalf("the log is %d segments, want at least 8", len(idx.Segments))
	}
	stall := &stallingSegments{ObjectStore: mem, blobs: layout.BlobsPrefix(),
		lie: layout.Blob(idx.Segments[0].Hash), with: layout.Blob(idx.Segments[1].Hash)}
	return NewSessionStore(stall, layout, StoreOptions{Parallelism: 4}), stall, meta, idx.Segments
}

// TestPullStopsTheLogsFetchesWhenASegmentIsWrong pulls a session whose first segment the store
// answers with another segment's bytes while the fetches ahead of it hang: the pull fails naming the
// segment, none of its fetches is still running when it returns, and it leaves nothing behind.
func TestPullStopsTheLogsFetchesWhenASegmentIsWrong(t *testing.T) {
	store, stall, meta, segs := newStallingStore(t)
	parent := t.TempDir()
	_, err := store.Pull(context.Background(), meta.ID, filepath.Join(parent, "pulled"))
	var dm *session.DigestMismatchError
	if !errors.As(err, &dm) || !strings.Contains(err.Error(), segs[0].Hash) {
		t.Fatalf("pull error = %v, want a digest mismatch naming segment %s", err, segs[0].Hash)
	}
	if n := stall.underWay(); n != 0 {
		t.Errorf("%d segment fetches were still under way when the pull returned, want 0", n)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("the failed pull left %d entries in its destination's directory (%s...), want none", len(left), left[0].Name())
	}
}

// TestClosingASegmentedLogMidwayStopsItsFetches reads the start of a segmented log and closes it while
// the fetches ahead hang: Close returns only once none is under way, and a read after it fails.
func TestClosingASegmentedLogMidwayStopsItsFetches(t *testing.T) {
	store, stall, meta, _ := newStallingStore(t)
	stall.with = stall.lie // the first segment reads as itself; the others hang
	log, _, err := store.openLog(context.Background(), meta)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(log, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	if n := stall.underWay(); n != 0 {
		t.Errorf("%d segment fetches were still under way when Close returned, want 0", n)
	}
	if _, err := log.Read(make([]byte, 1)); !errors.Is(err, errReaderClosed) {
		t.Errorf("read after Close = %v, want %v", err, errReaderClosed)
	}
}
