package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// PullResult says what a pull wrote.
type PullResult struct {
	ID     string
	Dir    string
	Meta   session.Meta
	Events int
	Blobs  int
	// Vault says the session's sealed vault.enc was pulled, verified against the vaultHash of
	// meta.json. It is still sealed: its key is not in the store.
	Vault bool
	Bytes int64
	// RemovedStale lists the temporary directories of earlier pulls into the same place that were
	// killed before they finished, found and removed by this one.
	RemovedStale []string
}

// ErrDestinationNotEmpty is wrapped when Pull is pointed at a directory with content: pulling over
// an existing session would mix two recordings.
var ErrDestinationNotEmpty = errors.New("destination is not empty")

// Pull downloads the committed session id into dir, which must be missing or empty, verifying
// events.jsonl against the eventsHash, every blob against its hash and the sealed vault.enc, when
// meta.json declares one, against its vaultHash; a mismatch fails with *session.DigestMismatchError
// naming the object, and a declared vault missing from the store with ErrVaultMissing. The session is
// assembled beside dir, opened with session.Open (its errors, about the log's structure and counts,
// are returned as they are) and only then renamed into place, so on failure nothing is left at dir.
func (s *SessionStore) Pull(ctx context.Context, id, dir string) (*PullResult, error) {
	metaBytes, meta, err := s.readMeta(ctx, id)
	if err != nil {
		return nil, err
	}
	// Absolute, so that "." names a directory that can be removed and renamed over.
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := checkDestination(dir); err != nil {
		return nil, err
	}
	parent := filepath.Dir(dir)
	created, err := mkdirAllCreated(parent)
	if err != nil {
		return nil, err
	}
	removed := removeStalePulls(dir)
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+pullTempInfix+"*")
	if err != nil {
		removeCreated(created)
		return nil, err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed into place
	barrier, err := openSyncBarrier(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		removeCreated(created)
		return nil, err
	}
	defer barrier.close()
	res, err := s.pullInto(ctx, barrier, tmp, dir, meta, metaBytes)
	if err == nil {
		err = os.Remove(filepath.Join(tmp, pullMarker))
	}
	if err == nil {
		err = syncAndVerify(barrier, tmp, id)
	}
	if err != nil {
		os.RemoveAll(tmp)
		removeCreated(created)
		return nil, err
	}
	// os.Rename will not replace a directory, even an empty one; os.Remove only removes an empty one,
	// so whatever appeared in dir meanwhile is kept and the rename fails.
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w: pull into a new or empty directory", dir, ErrDestinationNotEmpty)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("moving the pulled session into %s: %w", dir, err)
	}
	if err := barrier.placed(dir); err != nil {
		return nil, fmt.Errorf("the pulled session is in %s, but its directory entry may not be on disk: %w", dir, err)
	}
	res.Dir, res.RemovedStale = dir, removed
	return res, nil
}

// syncAndVerify makes the assembled session durable and opens it with verifyPulled, both at once
// (one waits on the disk, the other on the CPU); the session is renamed into place only after both,
// so a crash never leaves at its destination a session whose bytes were still in flight.
func syncAndVerify(barrier *syncBarrier, tmp, id string) error {
	synced := make(chan error, 1)
	go func() { synced <- barrier.sync() }()
	err := verifyPulled(tmp, id)
	if serr := <-synced; err == nil {
		err = serr
	}
	return err
}

// verifyPulled opens the assembled session with session.Open before it is renamed into place: every
// object matched its hash, but a session pushed by an older agentrewind, or rewritten in the store
// with its hashes recomputed, can still break the log's structure or its event count, and
// agentrewind verify would reject it. Its errors are the session package's, naming files in tmp.
func verifyPulled(tmp, id string) error {
	if _, err := session.Open(tmp); err != nil {
		return fmt.Errorf("session %s as stored does not verify, so nothing was written (the files named are in the temporary directory it was assembled in, now removed): %w", id, err)
	}
	return nil
}

// mkdirAllCreated makes dir and its missing parents, and returns those it made, deepest first, so
// that a failed pull can take them away again.
func mkdirAllCreated(dir string) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		missing = append(missing, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return missing, nil
}

// removeCreated removes the directories a failed pull made, if they are still empty.
func removeCreated(dirs []string) {
	for _, d := range dirs {
		if os.Remove(d) != nil {
			return
		}
	}
}

func checkDestination(dir string) error {
	// The session is renamed into place over an empty dir: a symbolic link there would be replaced
	// by the session, and what it points to left as it was.
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: pull into the directory it points to, or a new path", dir)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s: %w: pull into a new or empty directory", dir, ErrDestinationNotEmpty)
	}
	return nil
}

// pullInto writes the session into tmp: events.jsonl, then the blobs it references, then the sealed
// vault when meta.json declares one, then meta.json.
func (s *SessionStore) pullInto(ctx context.Context, barrier *syncBarrier, tmp, dir string, meta session.Meta, metaBytes []byte) (*PullResult, error) {
	if err := checkVaultHash(meta, s.name(s.layout.SessionMeta(meta.ID))); err != nil {
		return nil, err
	}
	if err := markPull(tmp, dir); err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(tmp, session.BlobsDir), 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it 0700
		return nil, err
	}
	t := newTracker(s.progress, "pull", meta.ID, sessionObjects(meta, 0), 0)
	t.phase(PhaseEvents, 0)
	eventsPath := filepath.Join(tmp, session.EventsFile)
	eventsKey, n, err := s.downloadLog(ctx, barrier, meta, eventsPath)
	if err != nil {
		return nil, err
	}
	t.done(eventsKey, n, false)
	events, err := readLocalEvents(eventsPath, s.name(eventsKey))
	if err != nil {
		return nil, err
	}
	res := &PullResult{ID: meta.ID, Meta: meta, Events: len(events), Bytes: n}
	hashes := session.Blobs(events)
	res.Blobs = len(hashes)
	t.phase(PhaseBlobs, sessionObjects(meta, len(hashes)))
	if err := s.pullBlobs(ctx, barrier, tmp, hashes, res, t); err != nil {
		return nil, err
	}
	if err := s.pullVault(ctx, barrier, tmp, meta, res, t); err != nil {
		return nil, err
	}
	t.phase(PhaseMeta, 0)
	if err := writeFileSynced(barrier, filepath.Join(tmp, session.MetaFile), metaBytes); err != nil {
		return nil, err
	}
	res.Bytes += int64(len(metaBytes))
	t.done(s.layout.SessionMeta(meta.ID), int64(len(metaBytes)), false)
	t.phase(PhaseDone, 0)
	return res, nil
}

// downloadLog writes the session's log to path, verified against its eventsHash: from its segments,
// each checked as it arrives, or from the one events.jsonl of a session stored before segments. It
// returns the key it was read from.
func (s *SessionStore) downloadLog(ctx context.Context, barrier *syncBarrier, meta session.Meta, path string) (string, int64, error) {
	idx, key, found, err := s.readIndex(ctx, meta)
	if err != nil {
		return "", 0, err
	}
	if !found {
		key := s.layout.SessionEvents(meta.ID)
		n, err := s.download(ctx, barrier, key, path, meta.EventsHash)
		if errors.Is(err, ErrNotFound) {
			return "", 0, missingEvents(meta.ID, s.name(key), err)
		}
		return key, n, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", 0, err
	}
	cw := &countingWriter{w: f}
	r := s.newSegmentReader(ctx, key, idx.Segments)
	defer r.Close()
	err = copyVerified(cw, r, meta.EventsHash, s.name(key))
	if err == nil {
		err = barrier.file(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return key, cw.n, err
}

// sessionObjects is the number of objects a pull of the session moves: its blobs, events.jsonl,
// the sealed vault when meta.json declares one, and meta.json.
func sessionObjects(meta session.Meta, blobs int) int {
	n := blobs + 2
	if meta.VaultHash != "" {
		n++
	}
	return n
}

// pullVault downloads the sealed vault meta.json declares and verifies it against vaultHash, as a
// blob is verified against its hash, so a fork or replay never unseals bytes it cannot trust. It
// stays sealed: the key that opens it lives in a Kubernetes Secret or a local key file, never here.
func (s *SessionStore) pullVault(ctx context.Context, barrier *syncBarrier, tmp string, meta session.Meta, res *PullResult, t *tracker) error {
	if meta.VaultHash == "" {
		return nil
	}
	t.phase(PhaseVault, 0)
	key := s.layout.SessionVault(meta.ID, meta.VaultHash)
	n, err := s.download(ctx, barrier, key, filepath.Join(tmp, session.VaultFile), meta.VaultHash)
	if errors.Is(err, ErrNotFound) {
		key = s.layout.SessionLegacyVault(meta.ID)
		n, err = s.download(ctx, barrier, key, filepath.Join(tmp, session.VaultFile), meta.VaultHash)
	}
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("session %s: %w: its meta.json declares one (vaultHash %s) but %s is not in the store, so the upload was incomplete; push the session again from the machine that recorded it: %w",
			meta.ID, ErrVaultMissing, meta.VaultHash, s.name(key), err)
	}
	if err != nil {
		return err
	}
	res.Vault = true
	res.Bytes += n
	t.done(key, n, false)
	return nil
}

// readLocalEvents parses the already verified events.jsonl to find the blobs it references.
func readLocalEvents(path, name string) ([]session.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	events, err := session.ReadEvents(f, "", nil, name)
	if err != nil {
		return nil, err
	}
	for _, h := range session.Blobs(events) {
		if !session.ValidBlobHash(h) {
			return nil, fmt.Errorf("%s references blob %q, which is not a sha256 hex digest: the session is corrupt", name, h)
		}
	}
	return events, nil
}

func (s *SessionStore) pullBlobs(ctx context.Context, barrier *syncBarrier, tmp string, hashes []string, res *PullResult, t *tracker) error {
	sizes := make([]int64, len(hashes))
	err := forEach(ctx, s.parallel, indexes(len(hashes)), func(ctx context.Context, i int) error {
		key := s.layout.Blob(hashes[i])
		n, err := s.download(ctx, barrier, key, filepath.Join(tmp, session.BlobsDir, hashes[i]), hashes[i])
		if errors.Is(err, ErrNotFound) {
			// A committed session with a hole in it is damaged, as a local one missing a blob is.
			return fmt.Errorf("session %s: %w; push the session again from a machine that has it", res.ID,
				&session.MissingError{Object: s.name(key), Err: err})
		}
		if err != nil {
			return err
		}
		sizes[i] = n
		t.done(key, n, false)
		return nil
	})
	for _, n := range sizes {
		res.Bytes += n
	}
	return err
}

// download streams the object at key into a new file at path, verifying that it hashes to want.
// A copy that does not match is fetched again, up to verifyReads times in all: bytes damaged on
// the way are not the store's fault, and only a mismatch on every copy is reported. The file is
// synced through barrier (see syncBarrier) before the session is renamed into place.
func (s *SessionStore) download(ctx context.Context, barrier *syncBarrier, key, path, want string) (int64, error) {
	var dm *session.DigestMismatchError
	for reads := 1; ; reads++ {
		n, err := s.downloadOnce(ctx, barrier, key, path, want)
		if !errors.As(err, &dm) {
			return n, err
		}
		if rerr := os.Remove(path); rerr != nil {
			return 0, rerr
		}
		if reads >= verifyReads {
			return 0, fmt.Errorf("%w (read %d times, never matching: the stored object is damaged, not just its transfer)", err, reads)
		}
	}
}

func (s *SessionStore) downloadOnce(ctx context.Context, barrier *syncBarrier, key, path, want string) (int64, error) {
	rc, err := s.objects.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	cw := &countingWriter{w: f}
	err = copyVerified(cw, rc, want, s.name(key))
	if err == nil {
		err = barrier.file(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return cw.n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func writeFileSynced(barrier *syncBarrier, path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = barrier.file(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
