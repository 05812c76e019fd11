package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Store keeps checkpoints in a local directory laid out as the S3 store is:
// <Dir>/checkpoints/<id>/manifest.json, with file contents in Blobs.
type Store struct {
	Dir   string
	Blobs Blobs
}

// OpenStore is a Store over dir with its blobs in the same directory.
func OpenStore(dir string) *Store { return &Store{Dir: dir, Blobs: DirBlobs{Dir: dir}} }

func (s *Store) manifestPath(id string) string {
	return filepath.Join(s.Dir, "checkpoints", id, "manifest.json")
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
func (s *Store) Create(ctx context.Context, dir string, opts CaptureOptions) (Created, error) {
	m, st, err := Capture(ctx, dir, s.Blobs, opts)
	if err != nil {
		return Created{}, err
	}
	list, err := s.list(true)
	if err != nil {
		return Created{}, err
	}
	if prev, ok := latestOf(list, opts.Anchor.Session); ok {
		pm, err := s.Load(prev.ID)
		if err == nil && pm.ContentDigest() == m.ContentDigest() {
			return Created{ID: prev.ID, Stats: st}, nil
		}
		// An unreadable baseline never blocks a capture: it is simply not a baseline.
	}
	id, err := s.Save(m)
	if err != nil {
		return Created{}, err
	}
	return Created{ID: id, New: true, Stats: st}, nil
}

// Save validates and writes a manifest; it returns the manifest's id.
func (s *Store) Save(m *Manifest) (string, error) {
	if err := m.Validate(); err != nil {
		return "", err
	}
	id, data, err := m.Encode()
	if err != nil {
		return "", err
	}
	p := s.manifestPath(id)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".manifest-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return id, os.Rename(tmp.Name(), p)
}

// Load reads a checkpoint's manifest and checks that its bytes hash to id and that it validates.
func (s *Store) Load(id string) (*Manifest, error) {
	if !session.ValidBlobHash(id) {
		return nil, fmt.Errorf("checkpoint id %q is not a sha256 hex digest", id)
	}
	data, err := os.ReadFile(s.manifestPath(id))
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
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, &ManifestError{Reason: err.Error()}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// List summarises every checkpoint, newest first. A manifest that does not verify is an error.
func (s *Store) List() ([]Summary, error) { return s.list(false) }

// list summarises every checkpoint; lenient skips manifests that do not verify, so a damaged
// checkpoint never stops a new capture or a guard from being taken (seed D10).
func (s *Store) list(lenient bool) ([]Summary, error) {
	ents, err := os.ReadDir(filepath.Join(s.Dir, "checkpoints"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list []Summary
	for _, e := range ents {
		if !e.IsDir() || !session.ValidBlobHash(e.Name()) {
			continue
		}
		m, err := s.Load(e.Name())
		if err != nil && lenient {
			continue
		}
		if err != nil {
			return nil, err
		}
		list = append(list, Summarize(e.Name(), m))
	}
	SortNewestFirst(list)
	return list, nil
}

// Delete removes a checkpoint's manifest; its blobs stay for the blob sweep, which knows what else
// references them.
func (s *Store) Delete(id string) error {
	if !session.ValidBlobHash(id) {
		return fmt.Errorf("checkpoint id %q is not a sha256 hex digest", id)
	}
	return os.RemoveAll(filepath.Dir(s.manifestPath(id)))
}

// latestOf is the newest checkpoint of a session in a newest-first list.
func latestOf(list []Summary, sessionID string) (Summary, bool) {
	for _, s := range list {
		if s.Anchor.Session == sessionID {
			return s, true
		}
	}
	return Summary{}, false
}
