package ui

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// DirSource serves the sessions under a directory: each subdirectory holding a meta.json is one,
// named by its directory; a directory that is itself a session is served alone. A fork's parent is
// found by its session id as a sibling directory, as the proxy lays sessions out.
type DirSource struct {
	root string
	// single is the name of the session when root is one.
	single string
	// checkpoints, when set, is the checkpoint store whose checkpoints are listed.
	checkpoints *checkpoint.Store
}

// NewDirSource serves the sessions under dir; checkpointsDir, when not empty, is a local checkpoint
// store (as checkpoint --store-dir takes it) whose checkpoints are listed with their sessions.
func NewDirSource(dir, checkpointsDir string) (*DirSource, error) {
	root, err := filepath.Abs(dir)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return nil, fmt.Errorf("session directory %s: %w", dir, err)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("session directory %s is not a directory", dir)
	}
	d := &DirSource{root: root}
	if _, err := os.Stat(filepath.Join(root, session.MetaFile)); err == nil {
		d.single = filepath.Base(root)
		d.root = filepath.Dir(root)
	}
	if checkpointsDir != "" {
		d.checkpoints = checkpoint.OpenStore(checkpointsDir)
	}
	return d, nil
}

// Sessions lists every committed session under the root, sorted by creation time then name.
func (d *DirSource) Sessions(context.Context) ([]Listing, error) {
	names := []string{d.single}
	if d.single == "" {
		entries, err := os.ReadDir(d.root)
		if err != nil {
			return nil, err
		}
		names = names[:0]
		for _, e := range entries {
			if e.IsDir() {
				names = append(names, e.Name())
			}
		}
	}
	var out []Listing
	for _, name := range names {
		dir, err := d.dir(name)
		if err != nil {
			continue
		}
		meta, err := session.ReadMeta(dir)
		switch {
		case errors.Is(err, session.ErrNotCommitted):
			continue // not a session, or one still being written
		case err != nil:
			out = append(out, Listing{ID: name, Problem: err.Error()})
		default:
			out = append(out, listingOf(name, meta))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Open loads the session named id.
func (d *DirSource) Open(_ context.Context, id string) (*session.Session, error) {
	dir, err := d.dir(id)
	if err != nil {
		return nil, err
	}
	s, err := session.Open(dir)
	if errors.Is(err, session.ErrNotCommitted) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return s, err
}

// Revision names the recording under id now (RevisionSource) by its meta.json and the state of its
// files: a directory the proxy records into again under the same name is loaded again, and so is
// a log edited after the server loaded it, which the load then reports as failing its digest.
// Blobs are not stamped: each is checked against its hash when the log is loaded, not after.
func (d *DirSource) Revision(_ context.Context, id string) (string, error) {
	dir, err := d.dir(id)
	if err != nil {
		return "", err
	}
	meta, err := session.ReadMeta(dir)
	if errors.Is(err, session.ErrNotCommitted) {
		return "", fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return "", err
	}
	rev := revisionOf(meta)
	for _, name := range []string{session.MetaFile, session.EventsFile} {
		stamp, err := fileStamp(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		rev += "\x00" + stamp
	}
	return rev, nil
}

// Checkpoints lists the checkpoint store's checkpoints anchored in session id.
func (d *DirSource) Checkpoints(ctx context.Context, id string) ([]CheckpointView, error) {
	if d.checkpoints == nil {
		return nil, nil
	}
	return storedCheckpoints(ctx, d.checkpoints, id)
}

// dir is the directory of session id: one entry directly under the root, never a path that leaves it
// (through "..", a separator or a symbolic link).
func (d *DirSource) dir(id string) (string, error) {
	if err := CheckID(id); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	if d.single != "" && id != d.single {
		return "", fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	p := filepath.Join(d.root, id)
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(d.root, real); err != nil || rel != id || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("%w: %s leads out of the session directory", ErrNotFound, id)
	}
	return real, nil
}

// storedCheckpoints lists the checkpoints of a store anchored in session id, newest first. A
// manifest that does not load names no session it could be listed under, so it is left out, as
// checkpoint list leaves it out.
func storedCheckpoints(ctx context.Context, store *checkpoint.Store, id string) ([]CheckpointView, error) {
	list, _, err := store.Scan(ctx)
	if err != nil {
		return nil, err
	}
	checkpoint.SortNewestFirst(list)
	out := []CheckpointView{}
	for _, s := range list {
		if s.Anchor.Session == id {
			out = append(out, checkpointView(s))
		}
	}
	return out, nil
}
