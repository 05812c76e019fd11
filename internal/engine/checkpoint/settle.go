package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
)

// Settler is a Blobs a blob sweep deletes from. A capture that finds a blob stored does not upload
// it, and a sweep that marked its roots before the capture's manifest was stored may delete that
// blob before the manifest names it. Settling is called before the capture looks for any blob; the
// Settle it returns once the manifest is stored, and the capture stores again what it reports
// missing.
type Settler interface {
	Settling(ctx context.Context) (Settle, error)
}

// Settle waits until no blob sweep that marked before the manifest was stored can still delete, and
// returns those of refs that are not stored then: none when no sweep could have deleted.
type Settle func(ctx context.Context, refs []BlobRef) (missing []BlobRef, err error)

// BlobRef names a blob and its size.
type BlobRef struct {
	Hash string
	Size int64
}

// settling starts the settlement of a capture into s.Blobs; nil when the blob space is never swept
// while a capture runs.
func (s *Store) settling(ctx context.Context) (Settle, error) {
	st, ok := s.Blobs.(Settler)
	if !ok {
		return nil, nil
	}
	settle, err := st.Settling(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the store's time before the capture: %w", err)
	}
	return settle, nil
}

// settleCapture makes sure that every blob the manifest m, stored as checkpoint id, names is stored
// once no blob sweep can delete it any more: it stores again, from the workspace dir and from chunks,
// each blob a sweep deleted while the capture ran, and returns how many. A file that changed since
// it was captured cannot be stored again; the checkpoint is then withdrawn, so none is listed that
// cannot be restored.
func (s *Store) settleCapture(ctx context.Context, settle Settle, dir, id string, m *Manifest, chunks []encodedChunk) (int, error) {
	files := map[string]Entry{}
	var refs []BlobRef
	for _, e := range m.Files {
		if e.Type != TypeFile {
			continue
		}
		if _, seen := files[e.Hash]; !seen {
			files[e.Hash] = e
			refs = append(refs, BlobRef{Hash: e.Hash, Size: e.Size})
		}
	}
	chunkData := map[string][]byte{}
	for _, c := range chunks {
		chunkData[c.ref.Hash] = c.data
		refs = append(refs, BlobRef{Hash: c.ref.Hash, Size: c.ref.Size})
	}
	missing, err := settle(ctx, refs)
	if err != nil {
		return 0, fmt.Errorf("checkpoint %s: making sure a blob sweep deleted none of its blobs: %w", id, err)
	}
	if len(missing) == 0 {
		return 0, nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, s.withdraw(ctx, id, err)
	}
	defer root.Close()
	for _, b := range missing {
		if data, ok := chunkData[b.Hash]; ok {
			if err := s.Blobs.Put(ctx, b.Hash, b.Size, bytes.NewReader(data)); err != nil {
				return 0, s.withdraw(ctx, id, fmt.Errorf("storing again a manifest chunk a blob sweep deleted: %w", err))
			}
			continue
		}
		e, ok := files[b.Hash]
		if !ok {
			return 0, s.withdraw(ctx, id, fmt.Errorf("the store reports blob %s missing, which the checkpoint does not name", b.Hash))
		}
		if err := s.putFile(ctx, root, e); err != nil {
			return 0, s.withdraw(ctx, id, fmt.Errorf("a blob sweep deleted the stored copy of %s while the checkpoint was taken, and it cannot be stored again from the workspace: %w", e.Path, err))
		}
	}
	return len(missing), nil
}

// putFile stores the workspace file e names again; Put refuses it when its bytes are no longer the
// ones captured.
func (s *Store) putFile(ctx context.Context, root *os.Root, e Entry) error {
	f, _, err := openRegular(root, e.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	return s.Blobs.Put(ctx, e.Hash, e.Size, f)
}

// withdraw deletes checkpoint id, which names a blob the store lost, and forgets it; the error says
// why and what to do.
func (s *Store) withdraw(ctx context.Context, id string, cause error) error {
	err := fmt.Errorf("checkpoint %s is withdrawn: %w; take the checkpoint again", id, cause)
	if derr := s.Manifests.Delete(ctx, id); derr != nil {
		err = errors.Join(err, fmt.Errorf("withdrawing checkpoint %s, which cannot be restored: %w; delete it", id, derr))
	}
	s.mu.Lock()
	delete(s.summaries, id)
	delete(s.heads, id)
	if s.last.id == id {
		s.last.id, s.last.m = "", nil
	}
	s.chunks = nil // some may be the lost ones: ask the store again
	s.mu.Unlock()
	return err
}
