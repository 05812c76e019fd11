package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Checkpoints is the workspace-checkpoint store over this session store's objects: file contents in
// the blob space sessions use (a file identical to a session blob is not uploaded again), manifests
// at checkpoints/<id>/manifest.json.
func (s *SessionStore) Checkpoints() *checkpoint.Store {
	return &checkpoint.Store{Manifests: checkpointManifests{s}, Blobs: checkpointBlobs{s}}
}

// spoolInMemory bounds the blobs Put and Get hold in memory while hashing them; larger ones go
// through a temporary file.
const spoolInMemory = 4 << 20

// maxManifestBytes bounds a manifest read back: about a million files.
const maxManifestBytes = 256 << 20

// checkpointBlobs implements checkpoint.Blobs. Every blob is hashed before it is stored and after it
// is read, so bytes that do not match their name are neither stored nor served.
type checkpointBlobs struct{ s *SessionStore }

func (b checkpointBlobs) key(hash string) (string, error) {
	if !session.ValidBlobHash(hash) {
		return "", fmt.Errorf("blob name %q is not a sha256 hex digest", hash)
	}
	return b.s.layout.Blob(hash), nil
}

// Has implements checkpoint.Blobs: an object under the hash is the blob. One damaged at rest is
// found when it is read. Has only looks: a preview or a restore asks it, and must not write.
func (b checkpointBlobs) Has(ctx context.Context, hash string) (bool, error) {
	key, err := b.key(hash)
	if err != nil {
		return false, err
	}
	_, err = b.s.objects.Stat(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// HasResent implements checkpoint.Resender, for a capture: a blob found is renewed (its modification
// time is now), so a blob sweep's safety margin covers the capture that skips uploading it; one the
// store cannot renew in place is read back, verified, and stored again (resent says so; the capture
// counts it as found).
func (b checkpointBlobs) HasResent(ctx context.Context, hash string) (has, resent bool, err error) {
	key, err := b.key(hash)
	if err != nil {
		return false, false, err
	}
	info, err := b.s.objects.Stat(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		return false, false, nil
	case err != nil:
		return false, false, err
	}
	resent, err = b.s.refresh(ctx, key, info.Size, func() error {
		rc, err := b.Get(ctx, hash)
		if err != nil {
			return err
		}
		defer rc.Close()
		return b.s.objects.Put(ctx, key, rc, info.Size)
	})
	if err != nil {
		return false, false, err
	}
	return true, resent, nil
}

// Settling implements checkpoint.Settler: the store's time now is when the capture starts looking
// for blobs; the Settle returned waits out every sweep that could delete one before the manifest was
// stored, then checks each blob (see settle.go).
func (b checkpointBlobs) Settling(ctx context.Context) (checkpoint.Settle, error) {
	since, err := b.s.storeTime(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.s.hooks.step(ctx, WriteStarted); err != nil {
		return nil, err
	}
	return func(ctx context.Context, refs func() []checkpoint.BlobRef) ([]checkpoint.BlobRef, error) {
		if err := b.s.hooks.step(ctx, RootStored); err != nil {
			return nil, err
		}
		swept, err := b.s.awaitSweeps(ctx, since)
		if err != nil || !swept {
			return nil, err
		}
		missing, err := b.missing(ctx, refs())
		if err != nil {
			return nil, err
		}
		if len(missing) > 0 {
			return missing, nil // Settled once the capture stored them again
		}
		return nil, b.s.hooks.step(ctx, Settled)
	}, nil
}

// MarkSettled implements checkpoint.Settler.
func (b checkpointBlobs) MarkSettled(ctx context.Context, id string) error {
	if !session.ValidBlobHash(id) {
		return fmt.Errorf("checkpoint id %q is not a sha256 hex digest", id)
	}
	return b.s.objects.Put(ctx, b.s.layout.CheckpointSettled(id), bytes.NewReader(nil), 0)
}

// Settled implements checkpoint.Settler.
func (b checkpointBlobs) Settled(ctx context.Context, id string) (bool, error) {
	if !session.ValidBlobHash(id) {
		return false, fmt.Errorf("checkpoint id %q is not a sha256 hex digest", id)
	}
	_, err := b.s.objects.Stat(ctx, b.s.layout.CheckpointSettled(id))
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// missing returns those of refs not stored at their size.
func (b checkpointBlobs) missing(ctx context.Context, refs []checkpoint.BlobRef) ([]checkpoint.BlobRef, error) {
	gone := make([]bool, len(refs))
	err := forEach(ctx, b.s.parallel, indexes(len(refs)), func(ctx context.Context, i int) error {
		key, err := b.key(refs[i].Hash)
		if err != nil {
			return err
		}
		held, err := b.s.heldAt(ctx, key, refs[i].Size)
		gone[i] = !held
		return err
	})
	var out []checkpoint.BlobRef
	for i, g := range gone {
		if g {
			out = append(out, refs[i])
		}
	}
	return out, err
}

// Put implements checkpoint.Blobs: r is copied aside while it is hashed, and only a copy of the
// announced size that hashes to hash is uploaded, from that copy, so what is stored is what was
// checked.
func (b checkpointBlobs) Put(ctx context.Context, hash string, size int64, r io.Reader) error {
	key, err := b.key(hash)
	if err != nil {
		return err
	}
	sp, err := spool(io.LimitReader(r, size+1), size, hash, "blob "+hash)
	if err != nil {
		return err
	}
	defer sp.Close()
	return b.s.objects.Put(ctx, key, sp, size)
}

// Get implements checkpoint.Blobs: the whole blob is fetched and hashed before a byte is returned. A
// copy damaged on the way is fetched again; one that never matches fails with
// *session.DigestMismatchError. A missing blob is an error wrapping fs.ErrNotExist.
func (b checkpointBlobs) Get(ctx context.Context, hash string) (io.ReadCloser, error) {
	key, err := b.key(hash)
	if err != nil {
		return nil, err
	}
	var dm *session.DigestMismatchError
	for reads := 1; ; reads++ {
		rc, err := b.getOnce(ctx, key, hash)
		if !errors.As(err, &dm) {
			return rc, err
		}
		if reads >= verifyReads {
			return nil, fmt.Errorf("%w (read %d times, never matching: the stored object is damaged, not just its transfer)", err, reads)
		}
	}
}

func (b checkpointBlobs) getOnce(ctx context.Context, key, hash string) (io.ReadCloser, error) {
	rc, err := b.s.objects.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w (%w)", err, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return spool(rc, -1, hash, b.s.name(key))
}

// spooled is bytes that hashed as expected, in memory or in a temporary file removed on Close.
type spooled struct {
	io.ReadSeeker
	file *os.File
}

func (s *spooled) Close() error {
	if s.file == nil {
		return nil
	}
	err := s.file.Close()
	if rerr := os.Remove(s.file.Name()); err == nil {
		err = rerr
	}
	return err
}

// spool copies r aside and checks that it hashes to want and, unless size is negative, that it has
// size bytes; the copy is returned positioned at its start. A mismatch is a
// *session.DigestMismatchError naming object.
func spool(r io.Reader, size int64, want, object string) (*spooled, error) {
	h := sha256.New()
	var buf bytes.Buffer
	n, err := io.Copy(io.MultiWriter(&buf, h), io.LimitReader(r, spoolInMemory))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", object, err)
	}
	sp := &spooled{}
	if n < spoolInMemory {
		sp.ReadSeeker = bytes.NewReader(buf.Bytes())
	} else {
		f, err := os.CreateTemp("", "agentrewind-blob-*")
		if err != nil {
			return nil, fmt.Errorf("spooling %s (set TMPDIR to a writable directory): %w", object, err)
		}
		sp.file, sp.ReadSeeker = f, f
		_, err = f.Write(buf.Bytes()) // already hashed
		if err == nil {
			var m int64
			m, err = io.Copy(io.MultiWriter(f, h), r)
			n += m
		}
		if err == nil {
			_, err = f.Seek(0, io.SeekStart)
		}
		if err != nil {
			sp.Close()
			return nil, fmt.Errorf("spooling %s: %w", object, err)
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want || (size >= 0 && n != size) {
		sp.Close()
		if got == want {
			return nil, fmt.Errorf("%s: %d bytes, announced %d", object, n, size)
		}
		return nil, &session.DigestMismatchError{Object: object, Want: want, Got: got}
	}
	return sp, nil
}

// checkpointManifests implements checkpoint.Manifests over checkpoints/<id>/manifest.json.
type checkpointManifests struct{ s *SessionStore }

func (m checkpointManifests) key(id string) (string, error) {
	if !session.ValidBlobHash(id) {
		return "", fmt.Errorf("checkpoint id %q is not a sha256 hex digest", id)
	}
	return m.s.layout.CheckpointManifest(id), nil
}

// Put implements checkpoint.Manifests; bytes that do not hash to id are refused.
func (m checkpointManifests) Put(ctx context.Context, id string, data []byte) error {
	key, err := m.key(id)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != id {
		return &session.DigestMismatchError{Object: "manifest of checkpoint " + id, Want: id, Got: got}
	}
	return m.s.objects.Put(ctx, key, bytes.NewReader(data), int64(len(data)))
}

// Get implements checkpoint.Manifests; a manifest that does not hash to id is a
// *checkpoint.TamperedError, never returned.
func (m checkpointManifests) Get(ctx context.Context, id string) ([]byte, error) {
	key, err := m.key(id)
	if err != nil {
		return nil, err
	}
	data, err := m.s.readSmall(ctx, key, maxManifestBytes)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w (%w)", err, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != id {
		return nil, &checkpoint.TamperedError{ID: id, Actual: got}
	}
	return data, nil
}

// List implements checkpoint.Manifests.
func (m checkpointManifests) List(ctx context.Context) ([]string, error) {
	objs, err := m.s.objects.List(ctx, m.s.layout.CheckpointsPrefix())
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, o := range objs {
		if id, ok := m.s.layout.CheckpointIDFromManifestKey(o.Key); ok && session.ValidBlobHash(id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Delete implements checkpoint.Manifests: the settled mark goes first, so a manifest left by a
// delete stopped halfway is never trusted as a baseline.
func (m checkpointManifests) Delete(ctx context.Context, id string) error {
	key, err := m.key(id)
	if err != nil {
		return err
	}
	if err := m.s.objects.Delete(ctx, m.s.layout.CheckpointSettled(id)); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return m.s.objects.Delete(ctx, key)
}
