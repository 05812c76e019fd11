package blobstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"sync"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Copy-on-write logs. The store keeps a session's events.jsonl as content-addressed segments, blobs
// like any other, listed in order by sessions/<id>/segments.json. A segment ends at a line end chosen
// by the content of the lines (see segmenter), so a fork whose log repeats its parent's lines (the
// recorder writes a step it served from the parent as the parent's line) cuts them into the same
// segments, and stores only the segments from its fork point on: 20 forks of one session store its
// prefix once. Reading stays verified and streaming: each segment is checked against its digest
// before a line of it is used, and the whole log against meta.json's eventsHash at the end. The
// index also names every blob the log references, so the blob sweep, which reads it as it reads an
// events.jsonl, keeps them. Sessions stored before segments (one events.jsonl object) still read.

// segmentIndex is segments.json.
type segmentIndex struct {
	// EventsHash is meta.json's: the digest of the segments put together.
	EventsHash string    `json:"eventsHash"`
	Segments   []segment `json:"segments"`
	// Blobs are every blob the log references, for the blob sweep; reading never trusts this list.
	Blobs []string `json:"blobs"`
}

type segment struct {
	Hash  string `json:"sha256"`
	Bytes int64  `json:"bytes"`
	off   int64  // where it starts in the local events.jsonl, on push
}

// Segment sizes. A segment ends after the first line (session_start: a fork's differs from its
// parent's, and nothing after it should), after a line whose FNV-1a hash is 0 modulo segCutEvery once
// the segment holds segMin bytes, and before it would pass segMax. About 5 to 10 KiB on average:
// small enough that a fork re-stores little of its parent (the segment it forks in, and its tail),
// large enough that a 100 MB log is some ten thousand objects, uploaded in parallel.
const (
	segMin      = 2 << 10
	segMax      = 256 << 10
	segCutEvery = 4
	// maxIndexSize bounds segments.json reads: about 80 bytes a segment and 70 a blob.
	maxIndexSize = 64 << 20
)

// segmenter cuts a log into segments as its lines go by.
type segmenter struct {
	segs  []segment
	cur   hash.Hash // the digest of the segment under way
	size  int64
	off   int64
	lines int
	all   hash.Hash // the digest of the whole log
}

func newSegmenter() *segmenter {
	return &segmenter{cur: sha256.New(), all: sha256.New()}
}

// line adds the next line, with its newline.
func (g *segmenter) line(l []byte) {
	if g.size > 0 && g.size+int64(len(l)) > segMax {
		g.cut()
	}
	g.cur.Write(l)
	g.all.Write(l)
	g.size += int64(len(l))
	g.lines++
	f := fnv.New32a()
	f.Write(l)
	if g.lines == 1 || g.size >= segMin && f.Sum32()%segCutEvery == 0 {
		g.cut()
	}
}

func (g *segmenter) cut() {
	if g.size == 0 {
		return
	}
	g.segs = append(g.segs, segment{Hash: hex.EncodeToString(g.cur.Sum(nil)), Bytes: g.size, off: g.off})
	g.off += g.size
	g.cur.Reset()
	g.size = 0
}

// cutSegments reads a log to its end and returns its segments and its digest.
func cutSegments(r io.Reader) ([]segment, string, error) {
	g := newSegmenter()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		l, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long := append([]byte(nil), l...)
			for err == bufio.ErrBufferFull {
				l, err = br.ReadSlice('\n')
				long = append(long, l...)
			}
			l = long
		}
		if len(l) > 0 {
			g.line(l)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", err
		}
	}
	g.cut()
	return g.segs, hex.EncodeToString(g.all.Sum(nil)), nil
}

// readIndex reads a session's segment index, named by its eventsHash or, stored by an older
// agentrewind, segments.json, and returns the key it read; found is false for a session stored as
// one events.jsonl. An index cut short or altered on the way is read again, up to verifyReads times
// in all, as every other object of a pull is: one bad transfer must not fail the pull.
func (s *SessionStore) readIndex(ctx context.Context, meta session.Meta) (idx segmentIndex, key string, found bool, err error) {
	for reads := 1; ; reads++ {
		idx, key, found, err = s.readIndexOnce(ctx, meta)
		if err == nil || errors.Is(err, ErrNotFound) || ctx.Err() != nil {
			return idx, key, found, err
		}
		if reads >= verifyReads {
			return idx, key, found, fmt.Errorf("%w (read %d times, never intact: the stored object is damaged, not just its transfer)", err, reads)
		}
	}
}

func (s *SessionStore) readIndexOnce(ctx context.Context, meta session.Meta) (idx segmentIndex, key string, found bool, err error) {
	key, data, err := s.readEither(ctx, s.layout.SessionSegments(meta.ID, meta.EventsHash), s.layout.SessionLegacySegments(meta.ID), maxIndexSize)
	if errors.Is(err, ErrNotFound) {
		return idx, key, false, nil
	}
	if err != nil {
		return idx, key, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&idx); err != nil {
		return idx, key, true, fmt.Errorf("%s: %w", s.name(key), err)
	}
	if idx.EventsHash != meta.EventsHash {
		return idx, key, true, &session.CorruptMetaError{File: s.name(key), Field: "eventsHash",
			Err: fmt.Errorf("is %s, but meta.json commits %s: the index does not belong to this session", idx.EventsHash, meta.EventsHash)}
	}
	var total int64
	for i, seg := range idx.Segments {
		if !session.ValidBlobHash(seg.Hash) || seg.Bytes <= 0 {
			return idx, key, true, fmt.Errorf("%s: segments[%d] is not a sha256 digest with a positive size", s.name(key), i)
		}
		if total += seg.Bytes; total < 0 {
			return idx, key, true, fmt.Errorf("%s: segments[%d].bytes: the sizes add up past 2^63 bytes", s.name(key), i)
		}
	}
	return idx, key, true, nil
}

// readEither reads the object at key, or at legacy when there is none at key, and says which it read.
func (s *SessionStore) readEither(ctx context.Context, key, legacy string, limit int64) (string, []byte, error) {
	data, err := s.readSmall(ctx, key, limit)
	if errors.Is(err, ErrNotFound) {
		key = legacy
		data, err = s.readSmall(ctx, key, limit)
	}
	return key, data, err
}

// segmentReader reads a segmented log as one stream: each segment is fetched whole and checked
// against its digest and its listed size before any of its bytes is returned; the caller checks the
// whole against eventsHash. Up to ahead segments are fetched in parallel ahead of the one being read
// (a log is thousands of small objects, and one round trip at a time made fetching it most of a
// pull), so memory is about ahead+2 segments. A segment that fails stops the fetches after it; Close
// stops them all and returns once none is under way, so nothing outlives the pull that read the log.
type segmentReader struct {
	s     *SessionStore
	ctx   context.Context
	index string // segments.json's name, for errors
	segs  []segment
	ahead int
	next  int // the index of the next segment to read
	// fetched holds, in log order, one channel per segment whose fetch has started; nil until the
	// first Read starts fetching.
	fetched chan chan fetchedSegment
	cancel  context.CancelFunc
	fetches sync.WaitGroup // the goroutine that starts fetches, and each fetch
	buf     *bytes.Reader
	err     error // sticky
}

type fetchedSegment struct {
	data []byte
	err  error
}

func (s *SessionStore) newSegmentReader(ctx context.Context, indexKey string, segs []segment) *segmentReader {
	return &segmentReader{s: s, ctx: ctx, index: s.name(indexKey), segs: segs, ahead: s.parallel}
}

// fetchAhead starts fetching the segments in order, at most ahead of them waiting to be read.
func (r *segmentReader) fetchAhead() {
	ctx, cancel := context.WithCancel(r.ctx)
	r.cancel = cancel
	r.fetched = make(chan chan fetchedSegment, r.ahead)
	blobs := storeBlobs{ctx: ctx, s: r.s}
	r.fetches.Go(func() {
		defer close(r.fetched)
		for _, seg := range r.segs {
			done := make(chan fetchedSegment, 1)
			select {
			case r.fetched <- done:
			case <-ctx.Done():
				return
			}
			r.fetches.Go(func() {
				data, err := blobs.ReadBlob(seg.Hash)
				done <- fetchedSegment{data, err}
			})
		}
	})
}

func (r *segmentReader) Read(p []byte) (int, error) {
	for r.buf == nil || r.buf.Len() == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.next == len(r.segs) {
			return 0, io.EOF
		}
		if r.buf, r.err = r.nextSegment(); r.err != nil {
			r.cancel() // the log cannot be read past this segment: the fetches after it are waste
		}
	}
	return r.buf.Read(p)
}

func (r *segmentReader) nextSegment() (*bytes.Reader, error) {
	if r.fetched == nil {
		r.fetchAhead()
	}
	done, ok := <-r.fetched
	if !ok {
		return nil, context.Cause(r.ctx) // fetching stopped early only because the caller gave up
	}
	got := <-done
	i, seg := r.next, r.segs[r.next]
	r.next++
	if errors.Is(got.err, ErrNotFound) {
		return nil, &session.MissingError{Object: r.s.name(r.s.layout.Blob(seg.Hash)), Field: "segment", Err: got.err}
	}
	if got.err != nil {
		return nil, got.err
	}
	// The digest matched, so the size is the index's lie, not the segment's damage.
	if int64(len(got.data)) != seg.Bytes {
		return nil, &session.CorruptMetaError{File: r.index, Field: fmt.Sprintf("segments[%d].bytes", i),
			Err: fmt.Errorf("is %d, but the segment %s holds %d bytes", seg.Bytes, seg.Hash, len(got.data))}
	}
	return bytes.NewReader(got.data), nil
}

// Close stops the fetches under way and waits for them to return.
func (r *segmentReader) Close() error {
	if r.cancel != nil {
		r.cancel()
		r.fetches.Wait()
	}
	if r.err == nil {
		r.err = errReaderClosed
	}
	r.buf = nil // what is left of the segment being read is not read after Close either
	return nil
}

// openLog opens a committed session's log for reading, from its segments or its one events.jsonl.
func (s *SessionStore) openLog(ctx context.Context, meta session.Meta) (io.ReadCloser, string, error) {
	idx, key, found, err := s.readIndex(ctx, meta)
	if err != nil {
		return nil, "", err
	}
	if found {
		r := s.newSegmentReader(ctx, key, idx.Segments)
		return r, r.index, nil
	}
	key = s.layout.SessionEvents(meta.ID)
	body, err := s.objects.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, "", missingEvents(meta.ID, s.name(key), err)
	}
	return body, s.name(key), err
}
