package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Store keeps checkpoints: manifests in Manifests, file contents in Blobs. OpenStore lays both out in
// a local directory as the S3 store lays them out in a bucket.
type Store struct {
	Manifests Manifests
	Blobs     Blobs

	// cache keeps what this process already read: manifests are immutable and named by their hash,
	// so a Summary once verified stays true, and the last manifest Create wrote is the next
	// capture's baseline without reading it back.
	mu        sync.Mutex
	summaries map[string]Summary
	heads     map[string]Summary
	// chunks are the manifest chunks this Store stored or read and verified: the blob space holds
	// them, so a later Save does not ask for them again.
	chunks map[string]bool
	last   struct {
		id string
		m  *Manifest
	}
}

// OpenStore is a Store over dir: <dir>/checkpoints/<id>/manifest.json and <dir>/blobs/sha256/….
func OpenStore(dir string) *Store {
	return &Store{Manifests: DirManifests{Dir: dir}, Blobs: DirBlobs{Dir: dir}}
}

// Created is the outcome of Create.
type Created struct {
	ID string `json:"id"`
	// New is false when the capture was identical to the session's latest checkpoint, which ID then
	// names: no new checkpoint was written (seed D2).
	New   bool         `json:"new"`
	Stats CaptureStats `json:"stats"`
}

// Create captures the workspace dir and stores it as a checkpoint, unless the capture is identical
// to the latest checkpoint of the same session.
//
// That latest checkpoint is also the capture's Baseline: only files whose stat changed since it (or
// that are racy) are read, so a capture costs a walk of the workspace plus the bytes that changed.
func (s *Store) Create(ctx context.Context, dir string, opts CaptureOptions) (Created, error) {
	// Before anything is looked at: what the capture trusts from the store is checked against every
	// sweep that could delete after this.
	settle, err := s.settling(ctx)
	if err != nil {
		return Created{}, err
	}
	list, err := s.list(ctx, true)
	if err != nil {
		return Created{}, err
	}
	prev, hasPrev := latestOf(list, opts.Anchor.Session, opts.Guard)
	var pm *Manifest
	if hasPrev {
		// An unreadable or unsettled baseline never blocks a capture: it is simply not a baseline.
		if ok, err := s.trusted(ctx, settle, prev.ID); err == nil && ok {
			pm, _ = s.loadCached(ctx, prev.ID)
		}
	}
	if opts.Baseline == nil {
		opts.Baseline = pm
	}
	m, st, err := Capture(ctx, dir, s.Blobs, opts)
	if err != nil {
		return Created{}, err
	}
	if pm != nil && pm.SameFiles(m) {
		whole, err := s.stillWhole(ctx, settle, prev.ID, pm)
		if err != nil {
			return Created{}, err
		}
		if whole {
			return Created{ID: prev.ID, Stats: st}, nil
		}
		// A sweep took part of it, or it was deleted: the capture is stored anew and settles.
	}
	id, w, err := s.save(ctx, m)
	if err != nil {
		return Created{}, err
	}
	if settle != nil {
		if st.StoredAgainBlobs, err = s.settleCapture(ctx, settle, dir, id, m, w.chunks); err != nil {
			return Created{}, err
		}
	}
	st.ManifestBytes, st.ManifestUploadedBytes = w.Bytes, w.Uploaded
	st.ResentBlobs, st.ResentBytes = st.ResentBlobs+w.Resent.blobs, st.ResentBytes+w.Resent.bytes
	s.mu.Lock()
	s.last.id, s.last.m = id, m
	s.cacheSummary(id, m)
	s.mu.Unlock()
	return Created{ID: id, New: true, Stats: st}, nil
}

// manifestHead is a manifest without its files.
type manifestHead struct {
	SchemaVersion    int       `json:"schemaVersion"`
	CreatedAt        time.Time `json:"createdAt"`
	Anchor           Anchor    `json:"anchor"`
	Reason           string    `json:"reason,omitempty"`
	Guard            bool      `json:"guard,omitempty"`
	IncrementalBytes int64     `json:"incrementalBytes"`
	GitCommit        string    `json:"gitCommit,omitempty"`
	// FileCount and Bytes are a schema 3 root's; an older manifest's head has neither.
	FileCount int   `json:"fileCount"`
	Bytes     int64 `json:"bytes"`
}

// loadHead summarises the manifest named id from its head alone (Files and Bytes stay 0 for a schema
// 1 or 2 manifest; a schema 3 root carries them), once its
// bytes hash to id; the head is cached. The files are checked when the manifest is loaded, as a
// capture's baseline or for a restore.
func (s *Store) loadHead(ctx context.Context, id string) (Summary, error) {
	s.mu.Lock()
	sum, ok := s.heads[id]
	s.mu.Unlock()
	if ok {
		return sum, nil
	}
	if !session.ValidBlobHash(id) {
		return Summary{}, fmt.Errorf("checkpoint id %q is not a sha256 hex digest", id)
	}
	data, err := s.Manifests.Get(ctx, id)
	if err != nil {
		return Summary{}, err
	}
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != id {
		return Summary{}, &TamperedError{ID: id, Actual: hex.EncodeToString(got[:])}
	}
	var h manifestHead
	if err := json.Unmarshal(data, &h); err != nil {
		return Summary{}, &ManifestError{Reason: err.Error()}
	}
	if h.SchemaVersion < minSchemaVersion || h.SchemaVersion > SchemaVersion {
		return Summary{}, &ManifestError{Reason: fmt.Sprintf("schema version %d is not one of %d to %d", h.SchemaVersion, minSchemaVersion, SchemaVersion)}
	}
	sum = Summary{ID: id, CreatedAt: h.CreatedAt, Anchor: h.Anchor, Reason: h.Reason, Guard: h.Guard || h.Reason == ReasonGuard, Files: h.FileCount, Bytes: h.Bytes, IncrementalBytes: h.IncrementalBytes, GitCommit: h.GitCommit}
	s.mu.Lock()
	if s.heads == nil {
		s.heads = map[string]Summary{}
	}
	s.heads[id] = sum
	s.mu.Unlock()
	return sum, nil
}

// cacheSummary remembers the summary of the verified manifest m named id; s.mu is held.
func (s *Store) cacheSummary(id string, m *Manifest) Summary {
	if s.summaries == nil {
		s.summaries = map[string]Summary{}
	}
	sum := Summarize(id, m)
	s.summaries[id] = sum
	return sum
}

// loadCached is Load, answered from memory for the manifest Create wrote last. The caller must not
// change what it returns.
func (s *Store) loadCached(ctx context.Context, id string) (*Manifest, error) {
	s.mu.Lock()
	m := s.last.m
	if s.last.id != id {
		m = nil
	}
	s.mu.Unlock()
	if m != nil {
		return m, nil
	}
	return s.Load(ctx, id)
}

// Save validates and writes a manifest; it returns the manifest's id. A schema 3 manifest is stored
// as its chunks, in the blob space, and a root naming them (encodeChunked): only the chunks the blob
// space does not hold yet are uploaded.
func (s *Store) Save(ctx context.Context, m *Manifest) (string, error) {
	id, _, err := s.save(ctx, m)
	return id, err
}

// manifestWrite is what storing a manifest cost: Bytes is its whole encoding (root and every chunk),
// Uploaded the part sent to the store (the root and the chunks it did not hold), and Resent the
// chunks it held but sent again to renew them.
type manifestWrite struct {
	Bytes, Uploaded int64
	Resent          resent
	// chunks are a schema 3 manifest's, kept to store again one a blob sweep deletes.
	chunks []encodedChunk
}

func (s *Store) save(ctx context.Context, m *Manifest) (string, manifestWrite, error) {
	var w manifestWrite
	if err := m.Validate(); err != nil {
		return "", w, err
	}
	if m.SchemaVersion < 3 {
		id, data, err := m.Encode()
		if err != nil {
			return "", w, err
		}
		if int64(len(data)) > manifestLimit {
			return "", w, fmt.Errorf("checkpoint manifest of %d files is %d bytes, more than a manifest may hold (%d): exclude some of them", len(m.Files), len(data), manifestLimit)
		}
		if err := s.Manifests.Put(ctx, id, data); err != nil {
			return "", w, fmt.Errorf("storing checkpoint %s: %w", id, err)
		}
		return id, manifestWrite{Bytes: int64(len(data)), Uploaded: int64(len(data))}, nil
	}
	m.Files = sortedByPath(m.Files)
	id, root, chunks, err := m.encodeChunked()
	if err != nil {
		return "", w, err
	}
	w.Bytes, w.Uploaded, w.chunks = int64(len(root)), int64(len(root)), chunks
	for _, c := range chunks {
		w.Bytes += c.ref.Size
	}
	if w.Bytes > manifestLimit {
		return "", manifestWrite{}, fmt.Errorf("checkpoint manifest of %d files is %d bytes, more than a manifest may hold (%d): exclude some of them", len(m.Files), w.Bytes, manifestLimit)
	}
	// Every chunk is stored before the root that names it: a root listed is a checkpoint whole.
	for _, c := range chunks {
		if s.holdsChunk(c.ref.Hash) {
			continue
		}
		found, err := hasRenewing(ctx, s.Blobs, c.ref.Hash, c.ref.Size, &w.Resent)
		if err != nil {
			return "", w, fmt.Errorf("storing checkpoint %s: %w", id, err)
		}
		if !found {
			if err := s.Blobs.Put(ctx, c.ref.Hash, c.ref.Size, bytes.NewReader(c.data)); err != nil {
				return "", w, fmt.Errorf("storing a chunk of checkpoint %s: %w", id, err)
			}
			w.Uploaded += c.ref.Size
		}
		s.rememberChunks([]chunkRef{c.ref})
	}
	if err := s.Manifests.Put(ctx, id, root); err != nil {
		return "", w, fmt.Errorf("storing checkpoint %s: %w", id, err)
	}
	return id, w, nil
}

// holdsChunk reports whether this Store stored or verified the chunk named hash before: the blob
// space holds it without being asked again, as a capture's baseline holds the blobs of its files.
func (s *Store) holdsChunk(hash string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.chunks[hash]
}

func (s *Store) rememberChunks(refs []chunkRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chunks == nil {
		s.chunks = map[string]bool{}
	}
	for _, c := range refs {
		s.chunks[c.Hash] = true
	}
}

// Load reads a checkpoint's manifest and checks that its bytes hash to id, that every chunk it names
// hashes to its name, and that it validates.
func (s *Store) Load(ctx context.Context, id string) (*Manifest, error) {
	if !session.ValidBlobHash(id) {
		return nil, fmt.Errorf("checkpoint id %q is not a sha256 hex digest", id)
	}
	data, err := s.Manifests.Get(ctx, id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != id {
		return nil, &TamperedError{ID: id, Actual: got}
	}
	var head manifestHead
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, &ManifestError{Reason: err.Error()}
	}
	if head.SchemaVersion < minSchemaVersion || head.SchemaVersion > SchemaVersion {
		return nil, &ManifestError{Reason: fmt.Sprintf("schema version %d is not one of %d to %d", head.SchemaVersion, minSchemaVersion, SchemaVersion)}
	}
	var m *Manifest
	if head.SchemaVersion < 3 {
		m = &Manifest{}
		if err := json.Unmarshal(data, m); err != nil {
			return nil, &ManifestError{Reason: err.Error()}
		}
	} else if m, err = s.loadChunked(ctx, id, data); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// loadChunked reads the manifest whose root (already verified) is data: every chunk is fetched,
// several at once, checked against the hash and size the root gives it, and decoded.
func (s *Store) loadChunked(ctx context.Context, id string, data []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // a "files" list in a root is not what a capture writes
	var r rootManifest
	if err := dec.Decode(&r); err != nil {
		return nil, &ManifestError{Reason: err.Error()}
	}
	total, size := 0, int64(len(data))
	for i, c := range r.Chunks {
		if !isSHA256Hex(c.Hash) || c.Files <= 0 || c.Files > maxChunkEntries || c.Size <= 0 || c.Size > maxChunkBytes {
			return nil, &ManifestError{Reason: fmt.Sprintf("chunks[%d]: hash %q, %d files, %d bytes: not a chunk a capture writes", i, c.Hash, c.Files, c.Size)}
		}
		total += c.Files
		size += c.Size
	}
	// Save never writes more; a root claiming more would have Load fetch chunks until memory ran out.
	if size > manifestLimit {
		return nil, &ManifestError{Reason: fmt.Sprintf("its root and chunks hold %d bytes, more than a manifest may (%d)", size, manifestLimit)}
	}
	if total != r.FileCount {
		return nil, &ManifestError{Reason: fmt.Sprintf("fileCount %d, but its chunks hold %d", r.FileCount, total)}
	}
	parts := make([][]Entry, len(r.Chunks))
	err := parallel(ctx, len(r.Chunks), chunkReaders, func(i int) error {
		var err error
		parts[i], err = s.readChunk(ctx, id, r.Chunks[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	m := &Manifest{SchemaVersion: r.SchemaVersion, CreatedAt: r.CreatedAt, Anchor: r.Anchor, Reason: r.Reason, Guard: r.Guard,
		Excludes: r.Excludes, IncrementalBytes: r.IncrementalBytes, GitCommit: r.GitCommit, Files: make([]Entry, 0, total)}
	var held int64
	for _, p := range parts {
		m.Files = append(m.Files, p...)
		for _, e := range p {
			held += e.Size
		}
	}
	if held != r.Bytes {
		return nil, &ManifestError{Reason: fmt.Sprintf("bytes %d, but its files hold %d", r.Bytes, held)}
	}
	s.rememberChunks(r.Chunks)
	return m, nil
}

// chunkReaders is how many chunks Load fetches at once: an object store answers each after a round
// trip, which reading them one by one would add up.
const chunkReaders = 8

// readChunk fetches one chunk of checkpoint id and decodes it once its bytes are the ones c names.
func (s *Store) readChunk(ctx context.Context, id string, c chunkRef) ([]Entry, error) {
	rc, err := s.Blobs.Get(ctx, c.Hash)
	var dm *session.DigestMismatchError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &ManifestError{Reason: fmt.Sprintf("chunk %s is missing from the blob space", c.Hash)}
	case errors.As(err, &dm): // a Blobs that verifies on read refused it
		return nil, &TamperedError{ID: id, Chunk: c.Hash, Actual: dm.Got}
	case err != nil:
		return nil, fmt.Errorf("checkpoint %s: chunk %s: %w", id, c.Hash, err)
	}
	data, err := io.ReadAll(io.LimitReader(rc, maxChunkBytes+1))
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: chunk %s: %w", id, c.Hash, err)
	}
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != c.Hash {
		return nil, &TamperedError{ID: id, Chunk: c.Hash, Actual: hex.EncodeToString(got[:])}
	}
	if int64(len(data)) != c.Size {
		return nil, &ManifestError{Reason: fmt.Sprintf("chunk %s holds %d bytes, its root says %d", c.Hash, len(data), c.Size)}
	}
	files, err := decodeChunk(data, make([]Entry, 0, c.Files))
	if err != nil {
		return nil, &ManifestError{Reason: fmt.Sprintf("chunk %s: %v", c.Hash, err)}
	}
	if len(files) != c.Files {
		return nil, &ManifestError{Reason: fmt.Sprintf("chunk %s holds %d files, its root says %d", c.Hash, len(files), c.Files)}
	}
	return files, nil
}

// parallel calls fn(i) for every i below n, from at most workers goroutines, and returns the first
// error; after one, no further call starts.
func parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// List summarises every checkpoint, newest first. A manifest that does not verify is an error.
func (s *Store) List(ctx context.Context) ([]Summary, error) { return s.list(ctx, false) }

// Unreadable is a stored checkpoint whose manifest does not load, and why.
type Unreadable struct {
	ID  string
	Err error
}

// Scan summarises every checkpoint that loads, newest first, and returns the ones that do not
// beside them, so one damaged manifest never hides the others.
func (s *Store) Scan(ctx context.Context) ([]Summary, []Unreadable, error) {
	ids, err := s.Manifests.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	var list []Summary
	var bad []Unreadable
	for _, id := range ids {
		m, err := s.Load(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			bad = append(bad, Unreadable{ID: id, Err: err})
			continue
		}
		list = append(list, Summarize(id, m))
	}
	SortNewestFirst(list)
	sort.Slice(bad, func(i, j int) bool { return bad[i].ID < bad[j].ID })
	return list, bad, nil
}

// list summarises every checkpoint. The strict list loads and verifies every manifest. The lenient
// one, which a capture runs to pick its baseline, reads only their heads (Files and Bytes stay 0), from
// memory when this Store has read or written the manifest before, and skips a manifest that does not
// hash to its name or whose head does not decode, so a damaged checkpoint never stops a new capture
// or a guard from being taken (seed D10): decoding every file of every stored manifest would cost
// more than the capture.
func (s *Store) list(ctx context.Context, lenient bool) ([]Summary, error) {
	ids, err := s.Manifests.List(ctx)
	if err != nil {
		return nil, err
	}
	var list []Summary
	for _, id := range ids {
		if lenient {
			s.mu.Lock()
			sum, ok := s.summaries[id]
			s.mu.Unlock()
			var err error
			if !ok {
				sum, err = s.loadHead(ctx, id)
			}
			if err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err == nil {
				list = append(list, sum)
			}
			continue
		}
		m, err := s.Load(ctx, id)
		if err != nil {
			return nil, err
		}
		list = append(list, Summarize(id, m))
	}
	SortNewestFirst(list)
	return list, nil
}

// Delete removes a checkpoint's manifest; its blobs stay for the blob sweep, which knows what else
// references them. A git checkpoint's ref stays in its repository, which the store does not know:
// DropGitRef deletes it there (GitRefsToDrop says which refs no kept checkpoint needs).
func (s *Store) Delete(ctx context.Context, id string) error {
	if !session.ValidBlobHash(id) {
		return fmt.Errorf("checkpoint id %q is not a sha256 hex digest", id)
	}
	return s.Manifests.Delete(ctx, id)
}

// latestOf is the newest checkpoint of a session in a newest-first list: of any kind for a guard
// (which may then name a capture holding the same files), else the newest capture, so a capture is
// never folded into a guard.
func latestOf(list []Summary, sessionID string, guard bool) (Summary, bool) {
	for _, s := range list {
		if s.Anchor.Session == sessionID && (guard || !s.Guard) {
			return s, true
		}
	}
	return Summary{}, false
}

// GitRefsToDrop are the commits of the deleted git checkpoints that no kept checkpoint names, sorted:
// their refs (GitRefPrefix+commit) keep only deleted checkpoints from git gc. kept is every
// checkpoint that stays, of every session.
func GitRefsToDrop(deleted []Deletion, kept []Summary) []string {
	named := map[string]bool{}
	for _, s := range kept {
		named[s.GitCommit] = true
	}
	var out []string
	for _, d := range deleted {
		if d.GitCommit != "" && !named[d.GitCommit] {
			named[d.GitCommit] = true
			out = append(out, d.GitCommit)
		}
	}
	sort.Strings(out)
	return out
}
