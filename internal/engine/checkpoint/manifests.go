package checkpoint

import (
	"context"
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

// Manifests holds checkpoint manifests by id, the SHA-256 of their bytes. Store verifies what it reads
// and validates what it writes; an implementation only keeps bytes. DirManifests is the local one;
// the S3 store's lives beside the session store.
type Manifests interface {
	// Put stores a manifest's bytes under id.
	Put(ctx context.Context, id string, data []byte) error
	// Get reads the bytes stored under id; a missing manifest is an error wrapping fs.ErrNotExist.
	Get(ctx context.Context, id string) ([]byte, error)
	// List returns the id of every stored manifest, in no particular order.
	List(ctx context.Context) ([]string, error)
	// Delete removes a manifest; deleting a missing one is not an error.
	Delete(ctx context.Context, id string) error
}

// MaxManifestBytes bounds the encoding of one manifest (over a million entries): Save refuses a larger
// one and a local store never reads more, so a file swapped in for a manifest cannot exhaust memory.
const MaxManifestBytes = 256 << 20

// manifestLimit is MaxManifestBytes, lowered by tests.
var manifestLimit int64 = MaxManifestBytes

// DirManifests keeps manifests at <Dir>/checkpoints/<id>/manifest.json, the layout of the S3 store.
type DirManifests struct{ Dir string }

func (d DirManifests) path(id string) (string, error) {
	if !session.ValidBlobHash(id) {
		return "", fmt.Errorf("checkpoint id %q is not a sha256 hex digest", id)
	}
	return filepath.Join(d.Dir, "checkpoints", id, "manifest.json"), nil
}

// Put implements Manifests: the bytes go to a temporary file renamed into place.
func (d DirManifests) Put(_ context.Context, id string, data []byte) error {
	p, err := d.path(id)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".manifest-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return fsutil.RenameOverFile(tmp.Name(), p)
}

// Get implements Manifests. Only a regular file of at most MaxManifestBytes is read: a named pipe
// put where a manifest belongs would block the read forever (and a command's --timeout or SIGTERM
// with it), and a link to a device such as /dev/zero would be read until memory ran out; both, and
// any other link, are refused as corrupt without being waited on or followed.
func (d DirManifests) Get(_ context.Context, id string) ([]byte, error) {
	p, err := d.path(id)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, &ManifestError{Reason: fmt.Sprintf("%s is a symbolic link, which is not followed", p)}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &ManifestError{Reason: fmt.Sprintf("%s is not a regular file (%s)", p, fi.Mode().Type())}
	}
	if fi.Size() > manifestLimit {
		return nil, &ManifestError{Reason: fmt.Sprintf("%s holds %d bytes, more than a manifest may (%d)", p, fi.Size(), manifestLimit)}
	}
	data, err := io.ReadAll(io.LimitReader(f, manifestLimit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > manifestLimit {
		return nil, &ManifestError{Reason: fmt.Sprintf("%s grew past %d bytes while it was read", p, manifestLimit)}
	}
	return data, nil
}

// List implements Manifests: every checkpoints/<id> directory whose name is a digest.
func (d DirManifests) List(context.Context) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(d.Dir, "checkpoints"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && session.ValidBlobHash(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// Delete implements Manifests.
func (d DirManifests) Delete(_ context.Context, id string) error {
	p, err := d.path(id)
	if err != nil {
		return err
	}
	return os.RemoveAll(filepath.Dir(p))
}
