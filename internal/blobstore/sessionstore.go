package blobstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// SessionStore keeps sessions in an ObjectStore under one key prefix: blobs content-addressed and
// shared, then each session's events.jsonl, its sealed vault.enc when it declares one, and
// meta.json, the commit marker, written last.
type SessionStore struct {
	objects  ObjectStore
	layout   Layout
	parallel int
	progress func(Progress)
	verify   bool
	hooks    WriteHooks
}

// StoreOptions tune a SessionStore.
type StoreOptions struct {
	// Parallelism bounds concurrent object transfers (default 8).
	Parallelism int
	// Progress, when set, is called as objects are transferred. Calls never overlap; keep it quick.
	Progress func(Progress)
	// VerifyStored makes a push read back and hash every object it would skip as already stored, and
	// upload it again when it does not match. A skip otherwise trusts an object of the right size, so
	// this is how a store damaged at rest is repaired from an intact local copy.
	VerifyStored bool
	// WriteHooks act at fixed points of a push, for tests that play out interleavings with a sweep.
	WriteHooks WriteHooks
}

// NewSessionStore returns the session store over objects with the given layout.
func NewSessionStore(objects ObjectStore, layout Layout, opts StoreOptions) *SessionStore {
	if opts.Parallelism <= 0 {
		opts.Parallelism = 8
	}
	return &SessionStore{objects: objects, layout: layout, parallel: opts.Parallelism, progress: opts.Progress, verify: opts.VerifyStored,
		hooks: opts.WriteHooks}
}

// Layout is the key layout the store writes.
func (s *SessionStore) Layout() Layout { return s.layout }

// ErrSessionNotFound is wrapped when a session is not in the store at all (it also matches
// ErrNotFound).
var ErrSessionNotFound = fmt.Errorf("session is not in the store: %w", ErrNotFound)

// ConflictError refuses to replace a committed session with different content: sessions are
// immutable, and forks and checkpoints rely on the bytes they were made from.
type ConflictError struct {
	ID               string
	LocalEventsHash  string
	StoredEventsHash string
	// Raced says another push committed the id while this one ran; nothing of this push is kept.
	Raced bool
}

func (e *ConflictError) Error() string {
	what := "is already in the store"
	if e.Raced {
		what = "was committed by another push while this one ran"
	}
	diff := fmt.Sprintf("eventsHash %s there, %s here", e.StoredEventsHash, e.LocalEventsHash)
	if e.StoredEventsHash == e.LocalEventsHash {
		diff = "the same events, another meta.json"
	}
	return fmt.Sprintf("session %s %s with different content (%s): sessions are immutable; record or fork under a new id",
		e.ID, what, diff)
}

// maxMetaSize bounds meta.json reads: it is a few hundred bytes, and a huge one is not a session.
const maxMetaSize = 1 << 20

// name is how errors refer to a key: its s3:// URL when the object store can say it.
func (s *SessionStore) name(key string) string {
	if u, ok := s.objects.(interface{ URL(string) string }); ok {
		return u.URL(key)
	}
	return key
}

// ReadMeta reads a committed session's meta.json, verified against meta.json.sha256 and decoded
// strictly. A session whose upload was interrupted fails with session.ErrNotCommitted, one never
// pushed with ErrSessionNotFound, one whose meta.json does not match with
// *session.DigestMismatchError, and one without a usable record with ErrMetaUnverified.
func (s *SessionStore) ReadMeta(ctx context.Context, id string) (session.Meta, error) {
	_, meta, err := s.readMeta(ctx, id)
	return meta, err
}

func (s *SessionStore) readMeta(ctx context.Context, id string) ([]byte, session.Meta, error) {
	if err := ValidateID(id); err != nil {
		return nil, session.Meta{}, err
	}
	m, reads, err := s.readStoredMeta(ctx, id, nil)
	if err != nil {
		return nil, session.Meta{}, err
	}
	if m.data == nil {
		return nil, session.Meta{}, s.missingSession(ctx, id)
	}
	meta, err := s.checkStoredMeta(id, m, reads)
	if err != nil {
		return nil, session.Meta{}, asCorruptMeta(err, s.name(s.layout.SessionMeta(id)))
	}
	return m.data, meta, nil
}

// asCorruptMeta makes an error about the bytes of a stored meta.json — a key session.Meta does not
// have, one given twice, an id that is not the session's — match *session.CorruptMetaError, as
// session.DecodeMeta's own errors do, keeping its message. Errors that already say what is wrong
// with the bytes (a digest mismatch, an unverifiable record, a newer schema) are left as they are.
func asCorruptMeta(err error, name string) error {
	var dm *session.DigestMismatchError
	var cm *session.CorruptMetaError
	var me *session.MigrationError
	if errors.As(err, &dm) || errors.As(err, &cm) || errors.As(err, &me) || errors.Is(err, ErrMetaUnverified) {
		return err
	}
	return &corruptMetaError{err: err, as: &session.CorruptMetaError{File: name, Err: err}}
}

// corruptMetaError reads as err and matches *session.CorruptMetaError.
type corruptMetaError struct {
	err error
	as  *session.CorruptMetaError
}

func (e *corruptMetaError) Error() string   { return e.err.Error() }
func (e *corruptMetaError) Unwrap() []error { return []error{e.err, e.as} }

// missingEvents is the error for a committed session whose events.jsonl is not in the store: the
// store is damaged, as a session directory without its log is.
func missingEvents(id, name string, err error) error {
	return fmt.Errorf("session %s: %w; push the session again", id, &session.MissingError{Object: name, Err: err})
}

// missingSession tells a session never pushed from one whose upload stopped before meta.json.
func (s *SessionStore) missingSession(ctx context.Context, id string) error {
	objs, err := s.objects.List(ctx, s.layout.SessionsPrefix()+id+"/")
	if err == nil && len(objs) == 0 {
		err = fmt.Errorf("no object under %s: %w", s.name(s.layout.SessionsPrefix()+id+"/"), ErrNotFound)
	}
	switch {
	case err == nil:
		return fmt.Errorf("session %s in the store: %w: it has objects but no meta.json yet: a push of it is under way (pull it once that push ends) or was interrupted (push it again)", id, session.ErrNotCommitted)
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("session %q: %w (agentrewind ls lists the sessions there)", id, ErrSessionNotFound)
	default:
		return err
	}
}

func (s *SessionStore) readSmall(ctx context.Context, key string, limit int64) ([]byte, error) {
	rc, err := s.objects.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.name(key), err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes: it is not a session file", s.name(key), limit)
	}
	return data, nil
}

// SessionInfo is a committed session as listed.
type SessionInfo struct {
	ID   string
	Meta session.Meta
	// CommittedAt is when meta.json was stored.
	CommittedAt time.Time
	// Problem, when not empty, says why Meta could not be read; the session is listed anyway so
	// that one damaged session does not hide the others.
	Problem string
}

// List returns the committed sessions (those with a meta.json), ordered by creation time then id.
// Uploads that were interrupted before meta.json are not listed.
func (s *SessionStore) List(ctx context.Context) ([]SessionInfo, error) {
	objs, err := s.objects.List(ctx, s.layout.SessionsPrefix())
	if err != nil {
		return nil, err
	}
	var infos []SessionInfo
	for _, o := range objs {
		if id, ok := s.layout.SessionIDFromMetaKey(o.Key); ok {
			infos = append(infos, SessionInfo{ID: id, CommittedAt: o.LastModified})
		}
	}
	infos, err = s.readMetas(ctx, infos)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(infos, func(a, b SessionInfo) int {
		return cmp.Or(cmp.Compare(a.Meta.CreatedAt, b.Meta.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return infos, nil
}

// readMetas fills in each listed session's meta.json. A session whose meta.json is damaged is kept,
// with the problem; one deleted since the listing is dropped; a failing store fails the listing.
func (s *SessionStore) readMetas(ctx context.Context, infos []SessionInfo) ([]SessionInfo, error) {
	gone := make([]bool, len(infos))
	err := forEach(ctx, s.parallel, indexes(len(infos)), func(ctx context.Context, i int) error {
		_, meta, err := s.readMeta(ctx, infos[i].ID)
		var op *OpError
		switch {
		case err == nil:
			infos[i].Meta = meta
		case ctx.Err() != nil || errors.As(err, &op):
			return err // the store, not the session, is in trouble
		case errors.Is(err, ErrNotFound), errors.Is(err, session.ErrNotCommitted):
			gone[i] = true // deleted since the listing
		default:
			infos[i].Problem = err.Error()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	kept := infos[:0]
	for i, info := range infos {
		if !gone[i] {
			kept = append(kept, info)
		}
	}
	return kept, nil
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// BlobSource reads blobs from the store, verifying each against its hash; session.ResolveBlobs and
// session.ReadEvents take it.
func (s *SessionStore) BlobSource(ctx context.Context) session.BlobSource {
	return storeBlobs{ctx: ctx, s: s}
}

type storeBlobs struct {
	ctx context.Context
	s   *SessionStore
}

func (b storeBlobs) ReadBlob(hash string) ([]byte, error) {
	if !session.ValidBlobHash(hash) {
		return nil, fmt.Errorf("blob reference %q is not a sha256 hex digest", hash)
	}
	key := b.s.layout.Blob(hash)
	var dm *session.DigestMismatchError
	for reads := 1; ; reads++ {
		data, err := b.readOnce(key, hash)
		if !errors.As(err, &dm) {
			return data, err
		}
		if reads >= verifyReads { // a copy damaged on the way is fetched again; one damaged at rest fails
			return nil, fmt.Errorf("%w (read %d times, never matching: the stored object is damaged, not just its transfer)", err, reads)
		}
	}
}

func (b storeBlobs) readOnce(key, hash string) ([]byte, error) {
	rc, err := b.s.objects.Get(b.ctx, key)
	if errors.Is(err, ErrNotFound) {
		// fs.ErrNotExist is how a BlobSource says the blob is not there: session.ResolveBlobs then
		// reports a *session.MissingError, the damage it is, rather than a failure to read.
		return nil, fmt.Errorf("%w (%w)", err, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	if err := copyVerified(&buf, rc, hash, b.s.name(key)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
