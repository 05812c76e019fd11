package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentrewind/agentrewind/internal/engine/session"
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
	return os.Rename(tmp.Name(), p)
}

// Get implements Manifests.
func (d DirManifests) Get(_ context.Context, id string) ([]byte, error) {
	p, err := d.path(id)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
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
