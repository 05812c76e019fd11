package blobsweep

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/gc"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// Objects is what a sweep needs of the object store; blobstore's S3ObjectStore and MemObjectStore
// implement it.
type Objects interface {
	// ListPages calls fn with each page of the objects under prefix, one request per page.
	ListPages(ctx context.Context, prefix string, fn func([]blobstore.ObjectInfo) error) error
	// Get opens an object; a missing one is an error wrapping blobstore.ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// DeleteKeys removes keys in batches of at most blobstore.ListPageSize.
	DeleteKeys(ctx context.Context, keys []string) error
	// Put stores an object (the mark cache).
	Put(ctx context.Context, key string, r io.Reader, size int64) error
}

// Options configure a sweep.
type Options struct {
	Layout blobstore.Layout
	// Margin is the safety margin: an unreferenced blob stored less than Margin before the sweep
	// began is kept. It must exceed the longest upload of a session (blobs go up before the
	// events.jsonl that references them) plus the clock skew between this host and the store.
	Margin time.Duration
	// DryRun reports what would be deleted and deletes nothing; it needs no lock.
	DryRun bool
	// Lock and Holder: a sweep that deletes takes Lock as Holder first, and checks it still holds
	// it before every batch of deletions.
	Lock   Lock
	Holder string
	// Clock is the time source (default time.Now).
	Clock func() time.Time
	// Parallelism bounds the objects read at once while marking (default 8).
	Parallelism int
	// NoCache makes the sweep read every root object instead of reusing the mark cache
	// (Layout.SweepMarks) for those an earlier sweep read, and leave the cache as it is.
	NoCache bool
	// Hooks let tests act at fixed points of a sweep.
	Hooks Hooks
}

// Hooks run at fixed points of a sweep; an error they return fails the sweep there.
type Hooks struct {
	// AfterMark runs when the mark phase is complete, before blobs/ is listed.
	AfterMark func(ctx context.Context) error
	// AfterList runs when blobs/ is listed, before the re-mark that finds sessions and checkpoints
	// stored during the sweep.
	AfterList func(ctx context.Context) error
}

// Requests counts the S3 requests a sweep sent (attempts the store retried count once).
type Requests struct {
	List   int64 `json:"list"`
	Get    int64 `json:"get"`
	Put    int64 `json:"put"`
	Delete int64 `json:"delete"`
}

// Total is every request.
func (r Requests) Total() int64 { return r.List + r.Get + r.Put + r.Delete }

// Report is what a sweep found and did.
type Report struct {
	DryRun bool `json:"dryRun"`
	// Start is the time taken before marking began; Cutoff the modification time before which an
	// unreferenced blob was old enough to delete.
	Start  time.Time `json:"start"`
	Cutoff time.Time `json:"cutoff"`
	// Sessions are the committed sessions marked; Uncommitted the session prefixes without a
	// meta.json (uploads in progress or interrupted), marked too.
	Sessions    int64 `json:"sessions"`
	Uncommitted int64 `json:"uncommitted"`
	Checkpoints int64 `json:"checkpoints"`
	// Cached counts the root objects whose references came from the mark cache rather than a read;
	// CacheProblem says why the cache could not be used or saved (the sweep goes on without it).
	Cached       int64  `json:"cached"`
	CacheProblem string `json:"cacheProblem,omitempty"`
	// Damaged are committed sessions without an events.jsonl: nothing of theirs can be marked.
	Damaged []string `json:"damaged,omitempty"`
	// DamagedCheckpoints are checkpoints with a manifest chunk missing or not hashing to its name:
	// they cannot be restored, and the blobs only that chunk named are not known to be referenced.
	DamagedCheckpoints []string `json:"damagedCheckpoints,omitempty"`
	// Marked counts the distinct digests the roots reference (some name no blob).
	Marked int64 `json:"marked"`
	// Listed counts the blobs listed; Plan is the sweep decision over them.
	Listed int64        `json:"listed"`
	Plan   gc.SweepPlan `json:"-"`
	// Rescued counts candidates the re-mark found referenced by a session or checkpoint stored
	// during the sweep.
	Rescued    int64         `json:"rescued"`
	Deleted    int64         `json:"deleted"`
	FreedBytes int64         `json:"freedBytes"`
	Requests   Requests      `json:"requests"`
	Duration   time.Duration `json:"duration"`
}

// Result is the report in the engine Job's result contract.
func (r *Report) Result() *task.GCSweepResult {
	return &task.GCSweepResult{DryRun: r.DryRun, RetainedSessions: r.Sessions + r.Uncommitted, RetainedCheckpoints: r.Checkpoints,
		MarkedBlobs: r.Marked, Candidates: r.Plan.Candidates, Young: r.Plan.Young, DeletedBlobs: r.Deleted, FreedBytes: r.FreedBytes,
		DamagedSessions: int64(len(r.Damaged)), DamagedCheckpoints: int64(len(r.DamagedCheckpoints))}
}

// Run sweeps the store:
//
//  1. take the lock (unless a dry run) and the start time;
//  2. mark: list sessions/ and read the events.jsonl of every session prefix, committed or not,
//     then list checkpoints/ and read every manifest and the chunks it names, collecting every
//     digest they reference (an object the mark cache knows at the same ETag and size is not read
//     again; a chunk shared by several manifests is read once);
//  3. list blobs/ a page at a time and let gc.Sweep pick the unreferenced blobs older than the margin
//     before the start time;
//  4. re-mark: list sessions/ and checkpoints/ again and read every events.jsonl and manifest that
//     is new or changed since step 2, dropping the candidates they reference;
//  5. check the lock is still held, save the mark cache, and delete the candidates in batches,
//     checking the lock before each.
//
// Any failure before step 5 deletes nothing. A session prefix without meta.json is a root like a
// committed one: its events.jsonl, once stored, is marked; the blobs a push stores before its
// events.jsonl are younger than the margin while the push runs. What stays open is a push that
// found an old unreferenced blob already stored, skipped its upload, and stores its events.jsonl
// after step 4's listing: closing it needs the writer to refresh such a blob's modification time
// (then the margin covers it), which push does not do yet.
func Run(ctx context.Context, objects Objects, opts Options) (*Report, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = 8
	}
	if opts.Margin < 0 {
		return nil, fmt.Errorf("the safety margin %s is negative", opts.Margin)
	}
	if !opts.DryRun && opts.Lock == nil {
		return nil, errors.New("a sweep that deletes needs a lock: two sweeps must never run at once")
	}
	c := &counting{Objects: objects}
	s := &sweep{objects: c, opts: opts, marked: gc.Marked{}, refs: map[string]rootRefs{}, chunkRefs: map[string][]string{}, damaged: map[string]bool{}}
	rep := &Report{DryRun: opts.DryRun}
	defer func() { rep.Requests = c.snapshot() }()

	var lease Lease
	if !opts.DryRun {
		var err error
		if lease, err = opts.Lock.Acquire(ctx, opts.Holder); err != nil {
			return nil, err
		}
		defer lease.Release(context.WithoutCancel(ctx))
	}
	rep.Start = opts.Clock()
	rep.Cutoff = gc.Cutoff(rep.Start, opts.Margin)
	defer func() { rep.Duration = opts.Clock().Sub(rep.Start) }()

	if !opts.NoCache {
		if err := s.loadCache(ctx, rep); err != nil {
			return rep, fmt.Errorf("reading the mark cache (nothing was deleted): %w", err)
		}
	}
	roots, err := s.mark(ctx)
	if err != nil {
		return rep, fmt.Errorf("marking (nothing was deleted): %w", err)
	}
	rep.Sessions, rep.Uncommitted, rep.Checkpoints, rep.Damaged = roots.sessions, roots.uncommitted, roots.checkpoints, roots.damaged
	rep.Cached = roots.cached
	if err := run(ctx, opts.Hooks.AfterMark); err != nil {
		return rep, err
	}

	err = c.ListPages(ctx, opts.Layout.BlobsPrefix(), func(page []blobstore.ObjectInfo) error {
		blobs := make([]gc.Blob, 0, len(page))
		for _, o := range page {
			if h, ok := opts.Layout.BlobHashFromKey(o.Key); ok {
				blobs = append(blobs, gc.Blob{Key: o.Key, Hash: h, Size: o.Size, LastModified: o.LastModified})
			}
		}
		rep.Listed += int64(len(blobs))
		rep.Plan.Merge(gc.Sweep(s.marked, blobs, opts.Margin, rep.Start))
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("listing blobs (nothing was deleted): %w", err)
	}
	if err := run(ctx, opts.Hooks.AfterList); err != nil {
		return rep, err
	}

	final, err := s.mark(ctx)
	if err != nil {
		return rep, fmt.Errorf("re-marking what was stored during the sweep (nothing was deleted): %w", err)
	}
	rep.Marked = int64(len(s.marked))
	for id := range s.damaged {
		rep.DamagedCheckpoints = append(rep.DamagedCheckpoints, id)
	}
	slices.Sort(rep.DamagedCheckpoints)
	var doomed []string
	for i, d := range rep.Plan.Unreferenced {
		if d.Delete && s.marked.Has(d.Hash) {
			rep.Plan.Unreferenced[i].Delete, rep.Plan.Unreferenced[i].Reason = false, gc.BlobReferenced
			rep.Rescued++
			rep.Plan.Delete--
			rep.Plan.Candidates--
			rep.Plan.Referenced++
			rep.Plan.FreedBytes -= d.Size
			continue
		}
		if d.Delete {
			doomed = append(doomed, d.Key)
		}
	}
	if opts.DryRun {
		return rep, nil
	}
	if err := lease.Check(ctx); err != nil {
		return rep, fmt.Errorf("nothing was deleted: %w", err)
	}
	if !opts.NoCache {
		s.saveCache(ctx, final.listed, rep)
	}
	byKey := map[string]int64{}
	for _, d := range rep.Plan.Unreferenced {
		byKey[d.Key] = d.Size
	}
	for start := 0; start < len(doomed); start += blobstore.ListPageSize {
		batch := doomed[start:min(start+blobstore.ListPageSize, len(doomed))]
		if err := lease.Check(ctx); err != nil {
			return rep, fmt.Errorf("deleted %d of %d unreferenced blobs, then stopped: %w", rep.Deleted, len(doomed), err)
		}
		if err := c.DeleteKeys(ctx, batch); err != nil {
			return rep, fmt.Errorf("deleted %d of %d unreferenced blobs, then: %w", rep.Deleted, len(doomed), err)
		}
		rep.Deleted += int64(len(batch))
		for _, k := range batch {
			rep.FreedBytes += byKey[k]
		}
	}
	return rep, nil
}

func run(ctx context.Context, hook func(context.Context) error) error {
	if hook == nil {
		return nil
	}
	return hook(ctx)
}

// sweep is one sweep's marking state.
type sweep struct {
	objects Objects
	opts    Options
	mu      sync.Mutex
	marked  gc.Marked
	// refs holds what each root object (an events.jsonl or a manifest) marked in this sweep, so the
	// re-mark reads only what is new or changed; cache what an earlier sweep's did.
	refs  map[string]rootRefs
	cache map[string]rootRefs
	// chunkRefs are the blobs each checkpoint manifest chunk read names (nil: missing or damaged);
	// damaged the checkpoints with such a chunk.
	chunkRefs map[string][]string
	damaged   map[string]bool
}

type roots struct {
	sessions, uncommitted, checkpoints, cached int64
	damaged                                    []string
	// listed are the root objects listed.
	listed []string
}

// mark reads every root object not read yet (or changed since) and marks what it references.
func (s *sweep) mark(ctx context.Context) (roots, error) {
	var r roots
	type prefix struct {
		committed bool
		// logs are what lists the session's blobs: its events.jsonl, or the segments.json that
		// indexes its log's segments and names every blob the log references (both, once re-pushed).
		logs []blobstore.ObjectInfo
	}
	sessions := map[string]*prefix{}
	var order []string
	l := s.opts.Layout
	err := s.objects.ListPages(ctx, l.SessionsPrefix(), func(page []blobstore.ObjectInfo) error {
		for _, o := range page {
			id, _, ok := strings.Cut(strings.TrimPrefix(o.Key, l.SessionsPrefix()), "/")
			if !ok || blobstore.ValidateID(id) != nil {
				continue
			}
			p := sessions[id]
			if p == nil {
				p = &prefix{}
				sessions[id] = p
				order = append(order, id)
			}
			switch o.Key {
			case l.SessionMeta(id):
				p.committed = true
			case l.SessionEvents(id), l.SessionSegments(id):
				p.logs = append(p.logs, o)
			}
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	var reads []blobstore.ObjectInfo
	for _, id := range order {
		p := sessions[id]
		switch {
		case p.committed:
			r.sessions++
		default:
			r.uncommitted++
		}
		if len(p.logs) == 0 {
			if p.committed {
				r.damaged = append(r.damaged, id)
			}
			continue
		}
		reads = append(reads, p.logs...)
	}
	err = s.objects.ListPages(ctx, l.CheckpointsPrefix(), func(page []blobstore.ObjectInfo) error {
		for _, o := range page {
			if _, ok := l.CheckpointIDFromManifestKey(o.Key); ok {
				r.checkpoints++
				reads = append(reads, o)
			}
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	var todo []blobstore.ObjectInfo
	for _, o := range reads {
		r.listed = append(r.listed, o.Key)
		if e, ok := s.refs[o.Key]; ok && e.usable(o.ETag, o.Size) {
			continue
		}
		if e, ok := s.cache[o.Key]; ok && e.usable(o.ETag, o.Size) {
			for _, h := range e.hashes {
				s.marked[h] = struct{}{}
			}
			s.refs[o.Key] = e
			r.cached++
			continue
		}
		todo = append(todo, o)
	}
	return r, s.readAll(ctx, todo)
}

// loadCache reads the mark cache. A missing one is empty; one that does not verify is reported and
// ignored; a store that fails the read fails the sweep.
func (s *sweep) loadCache(ctx context.Context, rep *Report) error {
	rc, err := s.objects.Get(ctx, s.opts.Layout.SweepMarks())
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxCacheBytes+1))
	if err != nil {
		return err
	}
	if s.cache, err = decodeCache(data); err != nil {
		rep.CacheProblem = err.Error()
	}
	return nil
}

// saveCache stores what the root objects still listed reference. A failure is reported, not fatal:
// the next sweep reads those objects again.
func (s *sweep) saveCache(ctx context.Context, listed []string, rep *Report) {
	entries := make(map[string]rootRefs, len(listed))
	for _, k := range listed {
		if e, ok := s.refs[k]; ok && e.etag != "" {
			entries[k] = e
		}
	}
	data := encodeCache(entries)
	if err := s.objects.Put(ctx, s.opts.Layout.SweepMarks(), bytes.NewReader(data), int64(len(data))); err != nil {
		rep.CacheProblem = "saving the mark cache: " + err.Error()
	}
}

// readAll reads the objects in parallel and marks what they reference. An object deleted since it
// was listed (a session being deleted) is skipped; any other failure fails the mark.
func (s *sweep) readAll(ctx context.Context, objs []blobstore.ObjectInfo) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(s.opts.Parallelism, len(objs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(objs) || ctx.Err() != nil {
					return
				}
				if err := s.read(ctx, objs[i]); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

func (s *sweep) read(ctx context.Context, o blobstore.ObjectInfo) error {
	rc, err := s.objects.Get(ctx, o.Key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	seen := map[[32]byte]bool{}
	var hashes [][32]byte
	add := func(h string) {
		var k [32]byte
		if _, err := hex.Decode(k[:], []byte(h)); err == nil && !seen[k] {
			seen[k] = true
			hashes = append(hashes, k)
		}
	}
	refs := rootRefs{etag: o.ETag, size: o.Size}
	if id, ok := s.opts.Layout.CheckpointIDFromManifestKey(o.Key); ok {
		// A schema 3 manifest is a small root naming chunks whose files it references too: its
		// bytes are kept to find them. An older one lists its files itself, and is only scanned.
		root := &capped{limit: maxRootBytes}
		if err := scanRefs(io.TeeReader(rc, root), add); err != nil {
			return fmt.Errorf("reading %s: %w", o.Key, err)
		}
		whole := true
		if !root.over {
			if whole, err = s.followChunks(ctx, root.buf.Bytes(), add); err != nil {
				return fmt.Errorf("reading the chunks of checkpoint %s: %w", id, err)
			}
		}
		if !whole {
			// Not cached: its references are read again next time, not taken as complete.
			refs.etag = ""
			s.mu.Lock()
			s.damaged[id] = true
			s.mu.Unlock()
		}
	} else if err := scanRefs(rc, add); err != nil {
		return fmt.Errorf("reading %s: %w", o.Key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range hashes {
		s.marked[h] = struct{}{}
	}
	refs.hashes = hashes
	s.refs[o.Key] = refs
	return nil
}

// maxRootBytes bounds the manifest bytes a sweep keeps to find its chunks: a root naming the chunks
// of a million files is under two megabytes (and one of this size would name more chunks than a
// manifest may hold), so a manifest beyond it lists its files itself (schema 1 or 2), and its scan
// marked them.
const maxRootBytes = 16 << 20

// capped keeps the first limit bytes written to it, and says whether more came.
type capped struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

func (c *capped) Write(p []byte) (int, error) {
	if c.buf.Len()+len(p) > c.limit {
		c.over = true
		c.buf.Reset()
		c.limit = 0
	}
	if !c.over {
		c.buf.Write(p)
	}
	return len(p), nil
}

// followChunks calls add with every blob the chunks of the manifest data name, reading each chunk
// once per sweep. whole is false when a chunk is missing or does not verify: the checkpoint cannot
// be restored, and what only that chunk named cannot be known. A manifest that is not JSON names no
// chunks (its quoted digests were marked by the scan).
func (s *sweep) followChunks(ctx context.Context, data []byte, add func(string)) (whole bool, err error) {
	chunks, err := checkpoint.ManifestChunks(data)
	if err != nil {
		return true, nil
	}
	whole = true
	for _, c := range chunks {
		s.mu.Lock()
		refs, ok := s.chunkRefs[c]
		s.mu.Unlock()
		if !ok {
			refs, err = s.readChunk(ctx, c)
			if err != nil {
				return false, err
			}
			s.mu.Lock()
			s.chunkRefs[c] = refs
			s.mu.Unlock()
		}
		if refs == nil {
			whole = false
		}
		for _, h := range refs {
			add(h)
		}
	}
	return whole, nil
}

// readChunk returns the blobs a manifest chunk names; nil when the chunk is missing or damaged.
func (s *sweep) readChunk(ctx context.Context, hash string) ([]string, error) {
	rc, err := s.objects.Get(ctx, s.opts.Layout.Blob(hash))
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, checkpoint.MaxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	refs, err := checkpoint.ChunkRefs(hash, data)
	if err != nil {
		return nil, nil
	}
	return append(refs, hash), nil
}

// counting counts the requests a sweep sends.
type counting struct {
	Objects
	list, get, put, del atomic.Int64
}

func (c *counting) ListPages(ctx context.Context, prefix string, fn func([]blobstore.ObjectInfo) error) error {
	return c.Objects.ListPages(ctx, prefix, func(page []blobstore.ObjectInfo) error {
		c.list.Add(1)
		return fn(page)
	})
}

func (c *counting) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.get.Add(1)
	return c.Objects.Get(ctx, key)
}

func (c *counting) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	c.put.Add(1)
	return c.Objects.Put(ctx, key, r, size)
}

func (c *counting) DeleteKeys(ctx context.Context, keys []string) error {
	c.del.Add(int64((len(keys) + blobstore.ListPageSize - 1) / blobstore.ListPageSize))
	return c.Objects.DeleteKeys(ctx, keys)
}

func (c *counting) snapshot() Requests {
	return Requests{List: c.list.Load(), Get: c.get.Load(), Put: c.put.Load(), Delete: c.del.Load()}
}
