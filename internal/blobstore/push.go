package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// PushResult says what a push stored.
type PushResult struct {
	ID string
	// Blobs is the number of blobs the session references; BlobsUploaded were sent and BlobsSkipped
	// were already stored (shared with another session, or sent by an earlier, interrupted push).
	Blobs, BlobsUploaded, BlobsSkipped int
	// BytesUploaded and BytesSkipped count blob bytes, as the blob counts do.
	BytesUploaded, BytesSkipped int64
	// EventsUploaded says this push sent the log's index, segments.json (a re-push of a committed
	// session finds it).
	EventsUploaded bool
	// Segments is the number of segments the log is stored as (segments.go); SegmentsUploaded were
	// sent and SegmentsSkipped were already stored (a fork's shared with its parent).
	Segments, SegmentsUploaded, SegmentsSkipped int
	// SegmentBytesUploaded counts the bytes of the segments sent.
	SegmentBytesUploaded int64
	// ObjectsRestored counts blobs and segments stored again before the commit because a blob sweep
	// deleted them while the push ran (they are counted as uploaded or skipped as well).
	ObjectsRestored int
	// BytesSent is everything this push sent: blobs, segments and their index, the vault and meta.json.
	BytesSent int64
	// AlreadyCommitted says the store held this session before the push. A meta.json or
	// meta.json.sha256 it held damaged, or a record it lacked, was rewritten (counted in BytesSent).
	AlreadyCommitted bool
	// HasVault says meta.json declares a sealed vault.enc (vaultHash), which the push verified and
	// left stored beside the session. VaultUploaded says this push sent it; a re-push finds it stored.
	// Only the AES-256-GCM ciphertext is stored: its key is never read or sent by a push.
	HasVault, VaultUploaded bool
	// VaultSkipped says the directory holds a vault.enc that meta.json does not declare, so it was
	// not uploaded; VaultSkipReason says why and what to do.
	VaultSkipped    bool
	VaultSkipReason string
}

// ErrVaultMissing is wrapped when meta.json declares a sealed vault (vaultHash) that is not there:
// locally on push (with fs.ErrNotExist), or in the store on pull (with ErrNotFound). Forks and
// replays need it to restore the session's redacted secrets, so neither side goes on without it.
var ErrVaultMissing = errors.New("the session's sealed vault.enc is missing")

// undeclaredVault is why a vault.enc that meta.json does not declare stays local: without a
// vaultHash a pulled copy could not be verified before a replay trusted it.
const undeclaredVault = "meta.json declares no vaultHash for it (an older recorder, or a file added after recording), so a pulled copy could not be verified; it stays on this machine: record the session again with this agentrewind to store its vault"

// localSession is a committed session directory, checked and ready to upload. events stays open so
// that the bytes verified are the bytes sent.
type localSession struct {
	dir        string
	meta       session.Meta
	metaBytes  []byte
	events     *os.File
	eventsSize int64
	blobs      []localBlob
	// segments are events.jsonl cut as the store keeps it, and index their segments.json.
	segments []localBlob
	index    []byte
	// vault is the sealed vault.enc meta.json declares, verified and open like events; nil when the
	// session declares none.
	vault     *os.File
	vaultSize int64
}

// close releases the files a push keeps open.
func (l *localSession) close() {
	l.events.Close()
	if l.vault != nil {
		l.vault.Close()
	}
}

type localBlob struct {
	hash     string
	size     int64
	uploaded bool // set by pushBlobs: sent in this push, rather than found in the store
	// inLog says the blob is a segment: bytes off to off+size of events.jsonl, not blobs/<hash>.
	inLog bool
	off   int64
}

// Push uploads the committed session in dir: the blobs it references that the store lacks, then
// events.jsonl, then the sealed vault.enc when meta.json declares one, then meta.json.sha256, which
// verifies meta.json, then meta.json, which makes it visible. A meta.json with a key session.Meta
// does not have, or without one it requires, is refused before anything is uploaded. A declared vault must be present and match its vaultHash, or nothing is uploaded; a
// vault.enc that meta.json does not declare is left out (PushResult.VaultSkipped). A push that was
// interrupted is completed by pushing again; pushing a session that is already stored changes
// nothing, and pushing different content under a stored id fails with *ConflictError.
func (s *SessionStore) Push(ctx context.Context, dir string) (*PushResult, error) {
	// Which blobs the store holds is asked while openLocal verifies the session: a HEAD uploads
	// nothing, and the verification is CPU while the question is round trips.
	since, err := s.storeTime(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.hooks.step(ctx, WriteStarted); err != nil {
		return nil, err
	}
	stats := s.statBlobsAhead(ctx, dir)
	defer stats.cancel()
	local, err := openLocal(dir)
	if err != nil {
		return nil, err
	}
	defer local.close()
	id := local.meta.ID
	res := &PushResult{ID: id, Blobs: len(local.blobs), Segments: len(local.segments), HasVault: local.vault != nil}
	if !res.HasVault && fileExists(filepath.Join(dir, session.VaultFile)) {
		res.VaultSkipped, res.VaultSkipReason = true, undeclaredVault
	}

	var repair metaRepair
	if res.AlreadyCommitted, repair, err = s.storedAlready(ctx, local); err != nil {
		return nil, err
	}
	t := newTracker(s.progress, "push", id, local.objects(), local.size())
	if err := s.pushBlobs(ctx, local, stats.wait(), res, t); err != nil {
		return nil, err
	}
	if err := s.hooks.step(ctx, PushBlobsStored); err != nil {
		return nil, err
	}
	if res.EventsUploaded, err = s.pushEvents(ctx, local, res, t); err != nil {
		return nil, err
	}
	if err := s.hooks.step(ctx, RootStored); err != nil {
		return nil, err
	}
	if res.VaultUploaded, err = s.pushVault(ctx, local, res, t); err != nil {
		return nil, err
	}
	if !res.AlreadyCommitted || res.EventsUploaded {
		// An index stored by this push (a new session's, or a damaged one's repaired) may have
		// been missed by a sweep that was deleting meanwhile.
		if err := s.settle(ctx, since, local, res); err != nil {
			return nil, fmt.Errorf("checking session %s's objects against the blob sweeps before committing it (nothing was committed; push again): %w", id, err)
		}
	}
	res.BytesSent = res.BytesUploaded + res.SegmentBytesUploaded
	if res.EventsUploaded {
		res.BytesSent += int64(len(local.index))
	}
	if res.VaultUploaded {
		res.BytesSent += local.vaultSize
	}
	t.phase(PhaseMeta, 0)
	metaKey := s.layout.SessionMeta(id)
	if !res.AlreadyCommitted {
		repair = metaRepair{sum: true, meta: true}
	}
	sent, err := s.commit(ctx, local, repair, !res.AlreadyCommitted)
	var conflict *ConflictError
	if errors.As(err, &conflict) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("committing session %s (its other objects are stored; push again to finish): %w", id, err)
	}
	res.BytesSent += sent
	if res.AlreadyCommitted && !repair.meta {
		// The session found committed may have been collected, and another committed under the id,
		// while this push ran: it succeeds only while the store still holds its meta.json.
		stored, err := s.readBackMeta(ctx, local)
		if err != nil {
			return nil, err
		}
		if stored != nil {
			return nil, &ConflictError{ID: id, LocalEventsHash: local.meta.EventsHash, StoredEventsHash: stored.EventsHash, Raced: true}
		}
		s.dropStrays(ctx, id, local.metaBytes, local.meta)
	}
	t.done(metaKey, int64(len(local.metaBytes)), !repair.meta)
	t.phase(PhaseDone, 0)
	return res, nil
}

// objects is the number of objects a push of the session stores: its blobs, events.jsonl, the
// sealed vault when it has one, and meta.json.
func (l *localSession) objects() int {
	n := len(l.blobs) + len(l.segments) + 2
	if l.vault != nil {
		n++
	}
	return n
}

// size is the number of bytes a push of the session moves: its files, sealed vault included, and the
// index of its log's segments.
func (l *localSession) size() int64 {
	n := l.eventsSize + int64(len(l.index)) + l.vaultSize + int64(len(l.metaBytes))
	for _, b := range l.blobs {
		n += b.size
	}
	return n
}

// storedAlready reads the commit marker before anything is uploaded: a committed session must not
// have its events overwritten. It reports whether the store holds this session, and fails with
// *ConflictError when it holds other content under the same id. The session is this one when the
// stored meta.json is byte for byte the local one (its record is rewritten when missing). A stored
// meta.json that does not verify is read again, since damage on the way goes when fetched again. One
// still damaged is this session's, to be rewritten, when a record vouches for the local meta.json,
// no other session's log is stored under the id, and either the damaged meta.json still names this
// session's log or this session's record is the only one. A record alone never decides: a push
// that lost the id, or was killed before its commit, leaves its record beside the winner's.
func (s *SessionStore) storedAlready(ctx context.Context, local *localSession) (committed bool, repair metaRepair, err error) {
	id := local.meta.ID
	localSum := sha256Hex(local.metaBytes)
	same := func(m storedMeta) bool { return bytes.Equal(m.data, local.metaBytes) }
	m, reads, err := s.readStoredMeta(ctx, id, same)
	switch {
	case err != nil:
		return false, repair, fmt.Errorf("checking whether session %s is already stored: %w", id, err)
	case m.data == nil:
		return false, repair, nil // never pushed, or an interrupted push this one completes
	case same(m):
		return true, metaRepair{sum: !m.vouches(localSum)}, nil
	case m.verified() || errors.Is(m.sumErr, ErrNotFound):
		// The store holds other content under this id (committed by an older agentrewind when the
		// record is missing).
		stored, derr := session.DecodeMeta(m.data, s.name(s.layout.SessionMeta(id)))
		if derr == nil && m.verified() {
			s.dropStrays(ctx, id, m.data, stored) // this session's own, from a push stopped after it lost
		}
		return false, repair, &ConflictError{ID: id, LocalEventsHash: local.meta.EventsHash, StoredEventsHash: stored.EventsHash}
	case m.vouches(localSum):
		names, other, err := s.logOfDamagedMeta(ctx, local, m.data)
		switch {
		case err != nil:
			return false, repair, fmt.Errorf("checking whether session %s is already stored: %w", id, err)
		case other != "":
			return false, repair, &ConflictError{ID: id, LocalEventsHash: local.meta.EventsHash, StoredEventsHash: other}
		case names || len(m.sums) == 1:
			return true, metaRepair{meta: true}, nil // this session's meta.json, damaged at rest
		}
	}
	_, err = s.checkStoredMeta(id, m, reads)
	return false, repair, fmt.Errorf("session %s is in the store with a meta.json other than this one that no record vouches for, so it is not replaced: %w", id, err)
}

// logOfDamagedMeta reads a damaged stored meta.json for the log it commits: names says it is the
// local session's log; other is that log's hash when it is another's and the store holds it, so the
// meta.json is that session's, whatever records lie beside it. Neither is set when nothing decodes.
func (s *SessionStore) logOfDamagedMeta(ctx context.Context, local *localSession, stored []byte) (names bool, other string, err error) {
	id := local.meta.ID
	meta, err := session.DecodeMeta(stored, s.name(s.layout.SessionMeta(id)))
	switch {
	case err != nil || !session.ValidBlobHash(meta.EventsHash):
		return false, "", nil
	case meta.EventsHash == local.meta.EventsHash:
		return true, "", nil
	}
	for _, key := range []string{s.layout.SessionSegments(id, meta.EventsHash), s.layout.SessionLegacySegments(id), s.layout.SessionEvents(id)} {
		_, err := s.objects.Stat(ctx, key)
		switch {
		case err == nil:
			return false, meta.EventsHash, nil
		case !errors.Is(err, ErrNotFound):
			return false, "", err
		}
	}
	return false, "", nil
}

// metaRepair says which of a committed session's meta.json and meta.json.sha256 a push rewrites,
// because the store holds them damaged or, for the record, not at all.
type metaRepair struct{ sum, meta bool }

// openLocal reads meta.json, verifies the session as session.Open does (the log's structure and
// event count, every line's text, every blob's hash), then the open events.jsonl against the
// eventsHash and the sealed vault against its vaultHash. Blob contents are verified again as they
// are uploaded. Everything that can refuse the push is checked here, before any upload: a session
// that agentrewind verify rejects must not reach the store, where every pull would trust it.
func openLocal(dir string) (*localSession, error) {
	metaPath := filepath.Join(dir, session.MetaFile)
	metaBytes, err := os.ReadFile(metaPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w: only a closed recording can be pushed; let the recording finish, or record it again", dir, session.ErrNotCommitted)
	}
	if err != nil {
		return nil, err
	}
	meta, err := decodeMetaStrict(metaBytes, metaPath)
	if err != nil {
		return nil, err
	}
	if err := ValidateID(meta.ID); err != nil {
		return nil, fmt.Errorf("%s: session %w", metaPath, err)
	}
	verified, err := session.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("session %s does not verify, so nothing was pushed: %w", dir, err)
	}
	eventsPath := filepath.Join(dir, session.EventsFile)
	f, err := os.Open(eventsPath)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", dir, err)
	}
	local := &localSession{dir: dir, meta: meta, metaBytes: metaBytes, events: f}
	if err := local.scan(eventsPath, verified.Events); err != nil {
		local.close()
		return nil, err
	}
	if err := local.openVault(); err != nil {
		local.close()
		return nil, err
	}
	return local, nil
}

// scan checks that the open events.jsonl is the log session.Open verified (it hashes to the same
// eventsHash), cuts it into the segments the store keeps, and finds the blobs its events reference.
func (l *localSession) scan(eventsPath string, events []session.Event) error {
	fi, err := l.events.Stat()
	if err != nil {
		return err
	}
	l.eventsSize = fi.Size()
	segs, got, err := cutSegments(l.events)
	if err != nil {
		return fmt.Errorf("reading %s: %w", eventsPath, err)
	}
	if got != l.meta.EventsHash {
		return &session.DigestMismatchError{Object: eventsPath, Want: l.meta.EventsHash, Got: got}
	}
	idx := segmentIndex{EventsHash: got, Segments: segs, Blobs: session.Blobs(events)}
	for _, seg := range segs {
		l.segments = append(l.segments, localBlob{hash: seg.Hash, size: seg.Bytes, inLog: true, off: seg.off})
	}
	if l.index, err = json.Marshal(idx); err != nil {
		return err
	}
	for _, h := range idx.Blobs {
		if !session.ValidBlobHash(h) {
			return fmt.Errorf("%s references blob %q, which is not a sha256 hex digest: the session is corrupt", eventsPath, h)
		}
		bi, err := os.Stat(filepath.Join(l.dir, session.BlobsDir, h))
		if err != nil {
			return fmt.Errorf("%s references blob %s, which is missing from %s: the recording is incomplete", eventsPath, h, filepath.Join(l.dir, session.BlobsDir))
		}
		l.blobs = append(l.blobs, localBlob{hash: h, size: bi.Size()})
	}
	return nil
}

// openVault opens the sealed vault meta.json declares and checks it against vaultHash, keeping it
// open so that the bytes verified are the bytes sent. A session that declares none has none to send.
func (l *localSession) openVault() error {
	if l.meta.VaultHash == "" {
		return nil
	}
	if err := checkVaultHash(l.meta, filepath.Join(l.dir, session.MetaFile)); err != nil {
		return err
	}
	path := filepath.Join(l.dir, session.VaultFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("session %s: %w: meta.json declares one (vaultHash %s), and forks and replays need it to restore the redacted secrets; copy back the vault.enc recorded with the session, or push from the machine that recorded it: %w",
			l.meta.ID, ErrVaultMissing, l.meta.VaultHash, err)
	}
	if err != nil {
		return fmt.Errorf("session %s: %w", l.meta.ID, err)
	}
	l.vault = f // closed by l.close, also on error
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: put back the vault.enc recorded with session %s", path, l.meta.ID)
	}
	l.vaultSize = fi.Size()
	return verifyVault(f, l.meta, path)
}

// verifyVault hashes the local vault; a mismatch keeps the *session.DigestMismatchError naming the
// file and says what to do, since uploading it would give every fork a vault it cannot trust.
func verifyVault(f *os.File, meta session.Meta, path string) error {
	err := copyVerified(io.Discard, f, meta.VaultHash, path)
	var dm *session.DigestMismatchError
	if errors.As(err, &dm) {
		return fmt.Errorf("%w; it is not the vault meta.json declares, so session %s is not pushed: copy back the vault.enc recorded with it", err, meta.ID)
	}
	return err
}

// checkVaultHash refuses a vaultHash that cannot be a sha256 digest before any vault is trusted.
func checkVaultHash(meta session.Meta, name string) error {
	if meta.VaultHash != "" && !session.ValidBlobHash(meta.VaultHash) {
		return fmt.Errorf("%s: vaultHash %q is not a sha256 hex digest: the session is corrupt; record it again", name, meta.VaultHash)
	}
	return nil
}

// blobStats are answers to a HEAD of blob keys, by hash: the object's size, or -1 when there is none.
type blobStats map[string]int64

// statsAhead is statBlobsAhead under way.
type statsAhead struct {
	cancel context.CancelFunc
	done   chan blobStats
}

// wait returns the answers gathered (none when the directory could not be listed).
func (a statsAhead) wait() blobStats {
	stats := <-a.done
	a.cancel()
	return stats
}

// statBlobsAhead asks the store, in the background, about every blob file in the session's blobs
// directory, with the push's parallelism. A failed question is left out and asked again by pushBlob,
// as is a blob the listing missed; a file that no event references costs one HEAD and nothing else.
func (s *SessionStore) statBlobsAhead(ctx context.Context, dir string) statsAhead {
	ctx, cancel := context.WithCancel(ctx)
	a := statsAhead{cancel: cancel, done: make(chan blobStats, 1)}
	go func() {
		stats := blobStats{}
		entries, err := os.ReadDir(filepath.Join(dir, session.BlobsDir))
		if err != nil {
			a.done <- stats
			return
		}
		var hashes []string
		for _, e := range entries {
			if e.Type().IsRegular() && session.ValidBlobHash(e.Name()) {
				hashes = append(hashes, e.Name())
			}
		}
		var mu sync.Mutex
		_ = forEach(ctx, s.parallel, hashes, func(ctx context.Context, h string) error {
			info, err := s.objects.Stat(ctx, s.layout.Blob(h))
			size := info.Size
			switch {
			case errors.Is(err, ErrNotFound):
				size = -1
			case err != nil:
				return nil // asked again by pushBlob, whose error counts
			}
			mu.Lock()
			stats[h] = size
			mu.Unlock()
			return nil
		})
		a.done <- stats
	}()
	return a
}

func (s *SessionStore) pushBlobs(ctx context.Context, local *localSession, stats blobStats, res *PushResult, t *tracker) error {
	t.phase(PhaseBlobs, 0)
	if err := s.pushEach(ctx, local, local.blobs, stats, t); err != nil {
		return err
	}
	for _, b := range local.blobs {
		if b.uploaded {
			res.BlobsUploaded++
			res.BytesUploaded += b.size
		} else {
			res.BlobsSkipped++
			res.BytesSkipped += b.size
		}
	}
	return nil
}

// pushEach uploads each of list the store lacks, marking those it sent.
func (s *SessionStore) pushEach(ctx context.Context, local *localSession, list []localBlob, stats blobStats, t *tracker) error {
	return forEach(ctx, s.parallel, indexes(len(list)), func(ctx context.Context, i int) error {
		b := list[i]
		uploaded, err := s.pushBlob(ctx, local.dir, b, stats)
		if err != nil {
			return err
		}
		list[i].uploaded = uploaded
		t.done(s.layout.Blob(b.hash), b.size, !uploaded)
		return nil
	})
}

// pushBlob uploads one blob unless the store has it already, and confirms the upload. Blobs are
// content-addressed, so an object of the right size under the hash is the blob; one of another size
// is damaged and replaced. stats, asked while the session was verified, answers whether the store
// has it, when it can.
func (s *SessionStore) pushBlob(ctx context.Context, dir string, b localBlob, stats blobStats) (uploaded bool, err error) {
	key := s.layout.Blob(b.hash)
	path := blobPath(dir, b)
	var info ObjectInfo
	if size, ok := stats[b.hash]; !ok {
		info, err = s.objects.Stat(ctx, key)
	} else if size < 0 {
		err = fmt.Errorf("%s: %w", s.name(key), ErrNotFound)
	} else {
		info.Size = size
	}
	if err == nil && info.Size == b.size {
		intact, verr := s.storedIntact(ctx, key, b.hash)
		if verr != nil {
			return false, verr
		}
		if intact {
			// Not sent: a sweep that deletes it before the commit is caught by settle.
			return false, nil
		}
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, err
	}
	if err := s.uploadBlob(ctx, path, key, b); err != nil {
		return false, err
	}
	return true, s.confirm(ctx, key, b.size)
}

// blobPath is the local file that holds b: its file under blobs/, or events.jsonl for a segment.
func blobPath(dir string, b localBlob) string {
	if b.inLog {
		return filepath.Join(dir, session.EventsFile)
	}
	return filepath.Join(dir, session.BlobsDir, b.hash)
}

// uploadBlob sends the blob at path to key, verified as it is sent: bytes stored under a hash they
// do not match would poison every session that shares the blob. The file is read once, hashed on the
// way to the store, and its last bytes are held back until the hash matches (see verifyingReader), so
// a blob changed since openLocal checked it never reaches the store whole.
func (s *SessionStore) uploadBlob(ctx context.Context, path, key string, b localBlob) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	v := &verifyingReader{f: f, base: b.off, size: b.size, want: b.hash, name: path, h: sha256.New()}
	err = s.objects.Put(ctx, key, v, b.size)
	if v.err != nil {
		return v.err // the store's error only says the body ended early
	}
	return err
}

// verifyingReader reads the first size bytes of f, hashing them, and fails its last Read with
// *session.DigestMismatchError, returning none of that read's bytes, when they do not hash to want:
// the upload it feeds is then cut short and the server stores nothing (a PUT whose body ends before
// its Content-Length is refused). A file shorter than size fails the same way. Seek back to the start
// lets a failed attempt be retried.
type verifyingReader struct {
	f          *os.File
	base       int64 // where the bytes start in f
	size, off  int64
	want, name string
	h          hash.Hash
	err        error // sticky: the mismatch or short file found
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.off >= v.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), v.size-v.off)]
	n, err := v.f.ReadAt(p, v.base+v.off)
	v.h.Write(p[:n])
	v.off += int64(n)
	switch {
	case v.off == v.size:
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			v.err = &session.DigestMismatchError{Object: v.name, Want: v.want, Got: got}
			return 0, v.err
		}
		return n, nil
	case err == io.EOF:
		v.err = fmt.Errorf("reading %s: %w: it is shorter than the %d bytes it had when the push began", v.name, io.ErrUnexpectedEOF, v.size)
		return 0, v.err
	case err != nil:
		v.err = fmt.Errorf("reading %s: %w", v.name, err)
		return 0, v.err
	}
	return n, nil
}

// Seek supports what a retry needs: the current offset, and going back to the start.
func (v *verifyingReader) Seek(offset int64, whence int) (int64, error) {
	switch {
	case whence == io.SeekCurrent && offset == 0:
		return v.off, nil
	case whence == io.SeekStart && offset == 0:
		if v.err == nil {
			v.off = 0
			v.h.Reset()
		}
		return 0, nil
	}
	return 0, fmt.Errorf("reading %s: only a rewind to the start is supported", v.name)
}

// pushEvents uploads the log's segments the store lacks, then its index, segments.json, unless the
// session is already committed with it; it reports whether it uploaded the index.
func (s *SessionStore) pushEvents(ctx context.Context, local *localSession, res *PushResult, t *tracker) (bool, error) {
	t.phase(PhaseEvents, 0)
	if err := s.pushEach(ctx, local, local.segments, nil, t); err != nil {
		return false, err
	}
	for _, b := range local.segments {
		if b.uploaded {
			res.SegmentsUploaded++
			res.SegmentBytesUploaded += b.size
		} else {
			res.SegmentsSkipped++
		}
	}
	return s.pushFile(ctx, s.layout.SessionSegments(local.meta.ID, local.meta.EventsHash), bytes.NewReader(local.index), int64(len(local.index)),
		sha256Hex(local.index), res.AlreadyCommitted, t)
}

// pushVault uploads the sealed vault, verified by openLocal, unless the session declares none or is
// already committed with it; it reports whether it uploaded. It goes after events.jsonl and before
// meta.json, so a committed session that declares a vault has it. It is ciphertext: the key that
// opens it lives in a Kubernetes Secret or a local key file, and a push never reads it.
func (s *SessionStore) pushVault(ctx context.Context, local *localSession, res *PushResult, t *tracker) (bool, error) {
	if local.vault == nil {
		return false, nil
	}
	t.phase(PhaseVault, 0)
	return s.pushFile(ctx, s.layout.SessionVault(local.meta.ID, local.meta.VaultHash), local.vault, local.vaultSize, local.meta.VaultHash, res.AlreadyCommitted, t)
}

// pushFile uploads one of the session's own objects from f (a file, or the bytes of the log's
// index), already verified. When the session is
// already committed and the store holds the object at its size it is not sent again, so a re-push
// changes nothing; one missing or of another size is replaced, which repairs it.
func (s *SessionStore) pushFile(ctx context.Context, key string, f io.ReadSeeker, size int64, hash string, committed bool, t *tracker) (bool, error) {
	if committed {
		if info, err := s.objects.Stat(ctx, key); err == nil && info.Size == size {
			intact, verr := s.storedIntact(ctx, key, hash)
			if verr != nil {
				return false, verr
			}
			if intact {
				t.done(key, size, true)
				return false, nil
			}
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	if err := s.objects.Put(ctx, key, f, size); err != nil {
		return false, err
	}
	if err := s.confirm(ctx, key, size); err != nil {
		return false, err
	}
	t.done(key, size, false)
	return true, nil
}

// confirm checks that an object this push uploaded is in the store at its size, right after its
// upload and so before meta.json commits the session. An upload acknowledged but not stored (a proxy
// answering for the server, a store without read-after-write consistency) must fail the push, not
// commit a session with a hole in it. Confirming in the worker that uploaded it, rather than in a
// pass over every object once all are sent, keeps the uploads and the confirmations overlapping.
// Blobs found already stored were checked the same way when they were skipped.
func (s *SessionStore) confirm(ctx context.Context, key string, size int64) error {
	held, err := s.heldAt(ctx, key, size)
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("%s was acknowledged but the store does not hold it at its %d bytes: push again", s.name(key), size)
	}
	return nil
}

// heldAt reports whether the store holds key at size bytes; an object of another size is not held.
func (s *SessionStore) heldAt(ctx context.Context, key string, size int64) (bool, error) {
	info, err := s.objects.Stat(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return info.Size == size, nil
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// storedIntact says whether a stored object of the right size may be skipped. Without VerifyStored the
// size is trusted; with it the object is read back and hashed, and a mismatch means upload it again.
func (s *SessionStore) storedIntact(ctx context.Context, key, hash string) (bool, error) {
	if !s.verify {
		return true, nil
	}
	rc, err := s.objects.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer rc.Close()
	var dm *session.DigestMismatchError
	switch err := copyVerified(io.Discard, rc, hash, s.name(key)); {
	case errors.As(err, &dm):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
