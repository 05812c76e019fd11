package checkpoint

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fsutil"
)

// Blobs is the content-addressed blob space checkpoints share with sessions and forks. A later
// adapter puts the S3 store behind it; DirBlobs is the local one.
type Blobs interface {
	// Has reports whether the blob named hash is stored.
	Has(ctx context.Context, hash string) (bool, error)
	// Put stores size bytes read from r under hash; it refuses bytes that do not hash to it.
	Put(ctx context.Context, hash string, size int64, r io.Reader) error
	// Get opens the blob named hash; a missing blob is an error wrapping fs.ErrNotExist.
	Get(ctx context.Context, hash string) (io.ReadCloser, error)
}

// Resender is a Blobs whose Has renews a blob it finds, so that a blob sweep does not delete it
// before the manifest naming it is stored, and may have to send it again to do so: an object store
// that cannot renew an object in place. A capture counts those blobs (CaptureStats.ResentBlobs).
type Resender interface {
	// HasResent is Has, also reporting whether renewing the blob found sent it again.
	HasResent(ctx context.Context, hash string) (has, resent bool, err error)
}

// resent counts the blobs a capture sent again to renew them, and their bytes.
type resent struct {
	blobs int
	bytes int64
}

// hasRenewing asks blobs whether the blob named hash, of size bytes, is stored, counting it in r when
// renewing it sent it again.
func hasRenewing(ctx context.Context, blobs Blobs, hash string, size int64, r *resent) (bool, error) {
	rs, ok := blobs.(Resender)
	if !ok {
		return blobs.Has(ctx, hash)
	}
	found, again, err := rs.HasResent(ctx, hash)
	if again {
		r.blobs++
		r.bytes += size
	}
	return found, err
}

// DirBlobs keeps blobs under <Dir>/blobs/sha256/<hh>/<hash>, the layout of the S3 store.
type DirBlobs struct{ Dir string }

func (b DirBlobs) path(hash string) (string, error) {
	if !session.ValidBlobHash(hash) {
		return "", fmt.Errorf("blob name %q is not a sha256 hex digest", hash)
	}
	return filepath.Join(b.Dir, "blobs", "sha256", hash[:2], hash), nil
}

// Has implements Blobs.
func (b DirBlobs) Has(_ context.Context, hash string) (bool, error) {
	p, err := b.path(hash)
	if err != nil {
		return false, err
	}
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	return fi.Mode().IsRegular(), nil
}

// Put implements Blobs: the bytes go to a temporary file beside the blob and are renamed into place
// only once their hash and size are the ones announced.
func (b DirBlobs) Put(_ context.Context, hash string, size int64, r io.Reader) error {
	p, err := b.path(hash)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".put-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != hash || n != size {
		return fmt.Errorf("blob %s: received %d bytes hashing to %s, announced %d", hash, n, got, size)
	}
	return fsutil.RenameOverFile(tmp.Name(), p)
}

// Get implements Blobs. A blob that has become a symbolic link is refused, never followed.
func (b DirBlobs) Get(_ context.Context, hash string) (io.ReadCloser, error) {
	p, err := b.path(hash)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK: a FIFO put where a blob belongs would otherwise block the open forever; it is then
	// refused as not a regular file.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("blob %s is not a regular file: %w", hash, fs.ErrNotExist)
	}
	return f, nil
}

// verifyBlob reads a whole blob and checks that it hashes to its name and has the expected size.
func verifyBlob(ctx context.Context, blobs Blobs, e Entry) error {
	rc, err := blobs.Get(ctx, e.Hash)
	var dm *session.DigestMismatchError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &BlobHashError{Path: e.Path, Hash: e.Hash}
	case errors.As(err, &dm): // a Blobs that verifies on read refused it
		return &BlobHashError{Path: e.Path, Hash: e.Hash, Actual: dm.Got}
	case err != nil:
		return fmt.Errorf("blob %s of %q: %w", e.Hash, e.Path, err)
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return fmt.Errorf("blob %s of %q: %w", e.Hash, e.Path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.Hash || n != e.Size {
		return &BlobHashError{Path: e.Path, Hash: e.Hash, Actual: fmt.Sprintf("%s (%d bytes)", got, n)}
	}
	return nil
}

func randSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
