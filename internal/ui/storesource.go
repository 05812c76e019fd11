package ui

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// StoreSource serves the sessions of an object store, as push and pull see it. A session is pulled
// (and so verified) into a private directory each time the server loads it and removed once opened
// (PullAndOpen); the sealed vault comes with it, as pull brings it, and is never opened. Close
// removes the directory.
type StoreSource struct {
	store *blobstore.SessionStore
	cache string
}

// NewStoreSource serves store, pulling sessions under a new directory in tmpDir ("" is the system's).
func NewStoreSource(store *blobstore.SessionStore, tmpDir string) (*StoreSource, error) {
	cache, err := os.MkdirTemp(tmpDir, "agentrewind-ui-*")
	if err != nil {
		return nil, fmt.Errorf("making a directory to read sessions into: %w (set TMPDIR to a writable directory)", err)
	}
	return &StoreSource{store: store, cache: cache}, nil
}

// Close removes the pulled sessions.
func (s *StoreSource) Close() error { return os.RemoveAll(s.cache) }

// Sessions lists the committed sessions of the store.
func (s *StoreSource) Sessions(ctx context.Context) ([]Listing, error) {
	infos, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Listing, 0, len(infos))
	for _, info := range infos {
		l := listingOf(info.ID, info.Meta)
		l.Problem = info.Problem
		out = append(out, l)
	}
	return out, nil
}

// Open pulls session id and opens it (PullAndOpen).
func (s *StoreSource) Open(ctx context.Context, id string) (*session.Session, error) {
	if err := CheckID(id); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	sess, err := PullAndOpen(ctx, s.store, id, s.cache)
	if errors.Is(err, blobstore.ErrSessionNotFound) {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return sess, err
}

// PullAndOpen pulls session id from store into a new directory under tmp, opens it and removes the
// directory. session.Open holds the whole recording in memory, blobs resolved, so nothing reads the
// copy again; a server that loads sessions again after evicting them so leaves no copies, nor their
// sealed vaults, behind. A pull error is returned as the store gave it.
func PullAndOpen(ctx context.Context, store *blobstore.SessionStore, id, tmp string) (*session.Session, error) {
	dir, err := os.MkdirTemp(tmp, "pull-*")
	if err != nil {
		return nil, fmt.Errorf("making a directory to read session %s into: %w", id, err)
	}
	defer os.RemoveAll(dir)
	if _, err := store.Pull(ctx, id, dir); err != nil {
		return nil, fmt.Errorf("reading session %s from the store: %w", id, err)
	}
	return session.Open(dir)
}

// Checkpoints lists the store's checkpoints anchored in session id.
func (s *StoreSource) Checkpoints(ctx context.Context, id string) ([]CheckpointView, error) {
	return storedCheckpoints(ctx, s.store.Checkpoints(), id)
}
