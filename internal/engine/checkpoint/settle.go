package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// Settler is a Blobs a blob sweep deletes from. A capture that finds a blob stored does not upload
// it, and a sweep that marked its roots before the capture's manifest was stored may delete that
// blob before the manifest names it. Settling is called before the capture looks at the store; the
// Settle it returns once the manifest is stored, and the capture stores again what it reports
// missing, then marks the checkpoint settled. Only a checkpoint so marked is a later capture's
// baseline: one whose capture stopped before it settled may name a blob a sweep took.
type Settler interface {
	Settling(ctx context.Context) (Settle, error)
	MarkSettled(ctx context.Context, id string) error
	Settled(ctx context.Context, id string) (bool, error)
}

// Settle waits until no blob sweep that marked before the manifest was stored can still delete, and
// returns those of the blobs refs lists that are not stored then: none when no sweep could have
// deleted, which is the common case, so refs is called only when one could.
type Settle func(ctx context.Context, refs func() []BlobRef) (missing []BlobRef, err error)

// BlobRef names a blob and its size.
type BlobRef struct {
	Hash string
	Size int64
}

// withdrawTimeout bounds the delete of a checkpoint that cannot be restored, which runs even when
// the capture's own context ended.
const withdrawTimeout = 30 * time.Second

// settling starts the settlement of a capture into s.Blobs; nil when the blob space is never swept
// while a capture runs. It also forgets the chunks this Store remembers from earlier captures: a
// sweep since may have taken them.
func (s *Store) settling(ctx context.Context) (Settle, error) {
	st, ok := s.Blobs.(Settler)
	if !ok {
		return nil, nil
	}
	settle, err := st.Settling(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the store's time before the capture: %w", err)
	}
	s.mu.Lock()
	s.chunks = nil
	s.mu.Unlock()
	return settle, nil
}

// trusted says whether checkpoint id may be a capture's baseline: always in a blob space no sweep
// deletes from, else only once its capture settled it.
func (s *Store) trusted(ctx context.Context, settle Settle, id string) (bool, error) {
	if settle == nil {
		return true, nil
	}
	return s.Blobs.(Settler).Settled(ctx, id)
}

// refsOf are the blobs manifest m names, each once: its files' and its chunks'.
func refsOf(m *Manifest, chunks []encodedChunk) []BlobRef {
	seen := map[string]bool{}
	var refs []BlobRef
	for _, e := range m.Files {
		if e.Type == TypeFile && !seen[e.Hash] {
			seen[e.Hash] = true
			refs = append(refs, BlobRef{Hash: e.Hash, Size: e.Size})
		}
	}
	for _, c := range chunks {
		refs = append(refs, BlobRef{Hash: c.ref.Hash, Size: c.ref.Size})
	}
	return refs
}

// stillWhole says whether checkpoint id, whose manifest is pm and whose files a capture found
// unchanged, may stand for that capture: its manifest is still stored and every blob it names is,
// once no sweep can delete them.
func (s *Store) stillWhole(ctx context.Context, settle Settle, id string, pm *Manifest) (bool, error) {
	if settle == nil {
		return true, nil
	}
	var unencodable bool
	refs := func() []BlobRef {
		var chunks []encodedChunk
		if pm.SchemaVersion >= 3 {
			c := *pm
			c.Files = sortedByPath(pm.Files)
			var err error
			if _, _, chunks, err = c.encodeChunked(); err != nil {
				unencodable = true // its chunks cannot be named: store the capture anew
			}
		}
		return refsOf(pm, chunks)
	}
	missing, err := settle(ctx, refs)
	if err != nil || len(missing) > 0 || unencodable {
		return false, err
	}
	_, err = s.Manifests.Get(ctx, id)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// settleCapture makes sure that every blob the manifest m, stored as checkpoint id, names is stored
// once no blob sweep can delete it any more: it stores again, from the workspace dir and from chunks,
// each blob a sweep deleted while the capture ran, returns how many, and marks the checkpoint
// settled. On any failure (a file changed since it was captured, the wait cut short) the checkpoint
// is withdrawn, so none is listed that cannot be restored.
func (s *Store) settleCapture(ctx context.Context, settle Settle, dir, id string, m *Manifest, chunks []encodedChunk) (int, error) {
	missing, err := settle(ctx, func() []BlobRef { return refsOf(m, chunks) })
	if err != nil {
		return 0, s.withdraw(ctx, id, fmt.Errorf("making sure a blob sweep deleted none of its blobs: %w", err))
	}
	if err := s.storeAgain(ctx, dir, m, chunks, missing); err != nil {
		return 0, s.withdraw(ctx, id, err)
	}
	// A mark that cannot be written costs only the next capture its baseline.
	_ = s.Blobs.(Settler).MarkSettled(ctx, id)
	return len(missing), nil
}

// storeAgain stores each of missing again, from chunks or from a workspace file holding its bytes,
// and confirms the store holds it.
func (s *Store) storeAgain(ctx context.Context, dir string, m *Manifest, chunks []encodedChunk, missing []BlobRef) error {
	if len(missing) == 0 {
		return nil
	}
	chunkData := map[string][]byte{}
	for _, c := range chunks {
		chunkData[c.ref.Hash] = c.data
	}
	paths := map[string][]Entry{}
	for _, e := range m.Files {
		if e.Type == TypeFile {
			paths[e.Hash] = append(paths[e.Hash], e)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, b := range missing {
		if data, ok := chunkData[b.Hash]; ok {
			if err := s.Blobs.Put(ctx, b.Hash, b.Size, bytes.NewReader(data)); err != nil {
				return fmt.Errorf("storing again a manifest chunk a blob sweep deleted: %w", err)
			}
		} else if err := s.putFromWorkspace(ctx, root, paths[b.Hash]); err != nil {
			return err
		}
		held, err := s.Blobs.Has(ctx, b.Hash)
		if err != nil {
			return err
		}
		if !held {
			return fmt.Errorf("blob %s was stored again and the store does not hold it", b.Hash)
		}
	}
	return nil
}

// putFromWorkspace stores again the blob of entries, all of the same bytes, from the first of their
// files that still holds them; Put refuses a file whose bytes are no longer the ones captured.
func (s *Store) putFromWorkspace(ctx context.Context, root *os.Root, entries []Entry) error {
	if len(entries) == 0 {
		return errors.New("the store reports a blob missing that the checkpoint does not name")
	}
	var errs []error
	for _, e := range entries {
		f, _, err := openRegular(root, e.Path)
		if err == nil {
			err = s.Blobs.Put(ctx, e.Hash, e.Size, f)
			f.Close()
		}
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", e.Path, err))
	}
	return fmt.Errorf("a blob sweep deleted the stored copy of %s while the checkpoint was taken, and no file holds those bytes any more: %w",
		entries[0].Path, errors.Join(errs...))
}

// withdraw deletes checkpoint id, which names a blob the store lost or may have, and forgets it; the
// error says why and what to do. The delete runs even when ctx ended (a capture cancelled while it
// settled).
func (s *Store) withdraw(ctx context.Context, id string, cause error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), withdrawTimeout)
	defer cancel()
	s.mu.Lock()
	delete(s.summaries, id)
	delete(s.heads, id)
	if s.last.id == id {
		s.last.id, s.last.m = "", nil
	}
	s.chunks = nil // some may be the lost ones: ask the store again
	s.mu.Unlock()
	if err := s.Manifests.Delete(dctx, id); err != nil {
		return fmt.Errorf("checkpoint %s cannot be restored: %w; withdrawing it failed too (%v): delete it, then take the checkpoint again", id, cause, err)
	}
	return fmt.Errorf("checkpoint %s is withdrawn: %w; take the checkpoint again", id, cause)
}
