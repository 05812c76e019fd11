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
	// Put stores an object (the mark cache, the record of a delete window).
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Delete removes one object (an expired window record).
	Delete(ctx context.Context, key string) error
	// OpenDeleteWindow signs deletes the store accepts for length by its own clock; DeleteKeysIn
	// sends them, failing with blobstore.ErrWindowClosed once the window has closed.
	OpenDeleteWindow(ctx context.Context, length time.Duration) (blobstore.DeleteWindow, error)
	DeleteKeysIn(ctx context.Context, w blobstore.DeleteWindow, keys []string) error
	// ServerTime is a lower bound of the store's clock now.
	ServerTime(ctx context.Context) (time.Time, error)
}

// DefaultWindow is how long the store accepts the deletes of one round of a sweep. A push that
// finds a round's window open when it commits waits for it to close, so it is short; a sweep with
// more to delete than fits in one window opens another.
const DefaultWindow = time.Minute

// maxSkew is how far this host's clock may be from the store's for a sweep to delete.
const maxSkew = 30 * time.Second

// maxIdleRounds is how many rounds in a row may have their window close before anything was
// deleted: a re-mark slower than the window never leaves time to delete, so the sweep stops.
const maxIdleRounds = 3

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
	// Window is how long each round's delete window lasts (default DefaultWindow).
	Window time.Duration
	// Hooks let tests act at fixed points of a sweep.
	Hooks Hooks
}

// Hooks run at fixed points of a sweep; an error they return fails the sweep there.
type Hooks struct {
	// AfterMark runs when the mark phase is complete, before blobs/ is listed.
	AfterMark func(ctx context.Context) error
	// AfterList runs when blobs/ is listed, before the first round of deletions.
	AfterList func(ctx context.Context) error
	// AfterWindowRecorded runs when a round's delete window is signed and its record stored, before
	// the re-mark; AfterRemark before the round's deletes; AfterDelete after each batch sent.
	AfterWindowRecorded func(ctx context.Context) error
	AfterRemark         func(ctx context.Context) error
	AfterDelete         func(ctx context.Context) error
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
	Rescued int64 `json:"rescued"`
	// Windows counts the delete windows opened; a round whose window closed before its deletes
	// were sent goes on in a new one.
	Windows    int64         `json:"windows"`
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
//  4. check the lock is still held and, while candidates are left, run a round: sign a delete window
//     the store enforces (Options.Window) and store its record under gc/windows/, re-mark (list
//     sessions/ and checkpoints/ again and read every root new or changed since, dropping the
//     candidates they reference), save the mark cache after the first, and delete the rest in
//     batches inside the window, checking the lock before each. A window that closes with
//     candidates left starts another round.
//
// Any failure before step 4 deletes nothing. A session prefix without meta.json is a root like a
// committed one. A push that stores its index after a round's re-mark lists the windows, waits
// for the round's window to close by the store's clock, and stores again whatever the round
// deleted before it commits (blobstore's settle.go): the store refuses a round's deletes once its
// window has closed, however long the sweep was paused.
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
	s := &sweep{objects: c, opts: opts, marked: gc.Marked{}, refs: map[string]rootRefs{}, chunkRefs: map[string][]string{}, damaged: map[string]bool{},
		deleted: map[string]bool{}}
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
	found, err := s.mark(ctx)
	if err != nil {
		return rep, fmt.Errorf("marking (nothing was deleted): %w", err)
	}
	rep.Sessions, rep.Uncommitted, rep.Checkpoints, rep.Damaged = found.sessions, found.uncommitted, found.checkpoints, found.damaged
	rep.Cached = found.cached
	if err := unmarkable(found); err != nil && !opts.DryRun {
		return rep, err
	}
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

	if !opts.DryRun {
		if err := lease.Check(ctx); err != nil {
			return rep, fmt.Errorf("nothing was deleted: %w", err)
		}
		s.dropExpiredWindows(ctx)
	}
	byKey := map[string]int64{}
	for _, d := range rep.Plan.Unreferenced {
		byKey[d.Key] = d.Size
	}
	var final roots
	idle := 0
	for first := true; ; first = false {
		var w blobstore.DeleteWindow
		if !opts.DryRun && len(s.doomed(rep)) > 0 {
			if w, err = s.openWindow(ctx); err != nil {
				return rep, fmt.Errorf("deleted %d unreferenced blobs, then: %w", rep.Deleted, err)
			}
			rep.Windows++
			if err := run(ctx, opts.Hooks.AfterWindowRecorded); err != nil {
				return rep, err
			}
		}
		if final, err = s.mark(ctx); err != nil {
			return rep, fmt.Errorf("re-marking what was stored during the sweep (deleted %d): %w", rep.Deleted, err)
		}
		if err := unmarkable(final); err != nil && !opts.DryRun {
			rep.Damaged = final.damaged
			return rep, fmt.Errorf("re-marking (deleted %d before): %w", rep.Deleted, err)
		}
		s.rescue(rep)
		if err := run(ctx, opts.Hooks.AfterRemark); err != nil {
			return rep, err
		}
		if opts.DryRun {
			break
		}
		if first && !opts.NoCache {
			s.saveCache(ctx, final.listed, rep)
		}
		before := rep.Deleted
		closed, err := s.deleteIn(ctx, w, lease, rep, byKey)
		if err != nil {
			return rep, err
		}
		if !closed {
			break
		}
		if idle = idle + 1; rep.Deleted > before {
			idle = 0
		}
		if idle >= maxIdleRounds {
			return rep, fmt.Errorf("deleted %d unreferenced blobs, then %d delete windows of %s in a row closed before a delete was sent: re-marking takes longer than a window; run the sweep with a longer one", rep.Deleted, idle, w.Length)
		}
	}
	rep.Marked = int64(len(s.marked))
	for id := range s.damaged {
		rep.DamagedCheckpoints = append(rep.DamagedCheckpoints, id)
	}
	slices.Sort(rep.DamagedCheckpoints)
	return rep, nil
}

// unmarkable refuses to delete past a committed session whose log the listing did not show: what it
// references is unknown, and one key a listing skipped must not cost a session its blobs.
func unmarkable(r roots) error {
	if len(r.damaged) == 0 {
		return nil
	}
	return fmt.Errorf("nothing was deleted: committed session(s) %s have no event log in the listing, so what they reference is unknown; pull or verify them, then sweep again",
		strings.Join(r.damaged, ", "))
}

// doomed are the candidates still to delete.
func (s *sweep) doomed(rep *Report) []string {
	var keys []string
	for _, d := range rep.Plan.Unreferenced {
		if d.Delete && !s.deleted[d.Key] {
			keys = append(keys, d.Key)
		}
	}
	return keys
}

// rescue drops the candidates that the roots marked since they were chosen reference.
func (s *sweep) rescue(rep *Report) {
	for i, d := range rep.Plan.Unreferenced {
		if d.Delete && s.marked.Has(d.Hash) {
			rep.Plan.Unreferenced[i].Delete, rep.Plan.Unreferenced[i].Reason = false, gc.BlobReferenced
			rep.Rescued++
			rep.Plan.Delete--
			rep.Plan.Candidates--
			rep.Plan.Referenced++
			rep.Plan.FreedBytes -= d.Size
		}
	}
}

// openWindow signs a round's delete window and stores its record, which writers read to know until
// when the round can delete. The record is stored before the re-mark: a root stored after the
// record is listed by the re-mark, and a writer that lists the windows after storing its root sees
// every window whose re-mark may have missed it.
func (s *sweep) openWindow(ctx context.Context) (blobstore.DeleteWindow, error) {
	length := s.opts.Window
	if length <= 0 {
		length = DefaultWindow
	}
	w, err := s.objects.OpenDeleteWindow(ctx, length)
	if err != nil {
		return w, err
	}
	// The window is signed with this host's clock and enforced by the store's: far apart, it would
	// be closed before it opened, or keep every push waiting long after the sweep.
	now, err := s.objects.ServerTime(ctx)
	if err != nil {
		return w, fmt.Errorf("reading the store's clock: %w", err)
	}
	if skew := w.Opened.Sub(now); skew > maxSkew || skew < -maxSkew {
		return w, fmt.Errorf("this host's clock is %s from the store's (more than %s), so a delete window it signs would not last as long as it says: set the clock right (NTP)", skew, maxSkew)
	}
	holder := s.opts.Holder
	if blobstore.ValidateID(holder) != nil {
		holder = "sweep"
	}
	if err := s.objects.Put(ctx, s.opts.Layout.SweepWindow(w, holder), strings.NewReader(""), 0); err != nil {
		return w, fmt.Errorf("recording the delete window: %w", err)
	}
	return w, nil
}

// deleteIn deletes the candidates in batches inside w, checking the lock before each. closed says
// the window closed with candidates left: the caller opens another and re-marks first.
func (s *sweep) deleteIn(ctx context.Context, w blobstore.DeleteWindow, lease Lease, rep *Report, byKey map[string]int64) (closed bool, err error) {
	doomed := s.doomed(rep)
	for start := 0; start < len(doomed); start += blobstore.ListPageSize {
		batch := doomed[start:min(start+blobstore.ListPageSize, len(doomed))]
		if err := lease.Check(ctx); err != nil {
			return false, fmt.Errorf("deleted %d unreferenced blobs, %d left, then stopped: %w", rep.Deleted, len(doomed)-start, err)
		}
		err := s.objects.DeleteKeysIn(ctx, w, batch)
		if errors.Is(err, blobstore.ErrWindowClosed) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("deleted %d unreferenced blobs, %d left, then: %w", rep.Deleted, len(doomed)-start, err)
		}
		rep.Deleted += int64(len(batch))
		for _, k := range batch {
			s.deleted[k] = true
			rep.FreedBytes += byKey[k]
		}
		if err := run(ctx, s.opts.Hooks.AfterDelete); err != nil {
			return false, err
		}
	}
	return false, nil
}

// dropExpiredWindows removes the records of windows closed more than blobstore.WindowRetention ago
// by the store's clock. A failure leaves them for the next sweep.
func (s *sweep) dropExpiredWindows(ctx context.Context) {
	now, err := s.objects.ServerTime(ctx)
	if err != nil {
		return
	}
	_ = s.objects.ListPages(ctx, s.opts.Layout.SweepWindowsPrefix(), func(page []blobstore.ObjectInfo) error {
		for _, o := range page {
			if w, ok := s.opts.Layout.SweepWindowFromKey(o.Key); ok && w.Closes().Add(blobstore.WindowRetention).Before(now) {
				if err := s.objects.Delete(ctx, o.Key); err != nil {
					return err
				}
			}
		}
		return nil
	})
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
	// deleted are the candidates deleted so far.
	deleted map[string]bool
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
		// logs are what lists the session's blobs: its events.jsonl, or the segment index that
		// names its log's segments and every blob the log references (several, once re-pushed).
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
			switch {
			case o.Key == l.SessionMeta(id):
				p.committed = true
			case o.Key == l.SessionEvents(id), l.IsSessionIndex(id, o.Key):
				// Every index under the session is marked, a losing push's too, until it is removed.
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

func (c *counting) DeleteKeysIn(ctx context.Context, w blobstore.DeleteWindow, keys []string) error {
	c.del.Add(int64((len(keys) + blobstore.ListPageSize - 1) / blobstore.ListPageSize))
	return c.Objects.DeleteKeysIn(ctx, w, keys)
}

func (c *counting) snapshot() Requests {
	return Requests{List: c.list.Load(), Get: c.get.Load(), Put: c.put.Load(), Delete: c.del.Load()}
}
