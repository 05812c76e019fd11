package blobstore

import (
	"context"
	"fmt"
	"time"
)

// How a push or a checkpoint capture and a blob sweep stay out of each other's way
// (docs/architecture.md, "The blob sweep and a push"): a sweep deletes only inside delete windows the
// store enforces, each recorded under gc/windows/ before the sweep re-marks the roots. A writer stores
// its root (a push's segment index, a capture's manifest), which names every object it relies on,
// before it calls its work done; then it lists the windows. A window recorded later re-marks after
// the root was stored and keeps the objects; one recorded earlier may delete them until it closes.
// So when any window could have deleted during the write, the writer waits, by the store's clock,
// until every window listed has closed, then checks that each object it references is stored and
// stores again any that is not, and only then commits (a push) or returns (a capture).

// WindowRetention is how long after it closes a window's record is kept. A write that took longer
// than this cannot tell from the records whether a sweep deleted during it, so it checks every
// object it references.
const WindowRetention = 24 * time.Hour

// maxWindowWait bounds how long a write waits for a sweep's delete window to close. Sweeps open
// windows of a minute; a longer wait means a sweep configured otherwise or a sweeping host whose
// clock runs ahead of the store's.
const maxWindowWait = 15 * time.Minute

// windowSlack covers the whole seconds of Date headers and signatures, the clocks of a store's
// nodes differing a little, and a delete the store authorised at the window's end still removing
// its keys.
const windowSlack = 5 * time.Second

// storeClocked is an ObjectStore that can tell its own time; the blob sweep needs it too, so a
// store without it is never swept and a write to it has nothing to settle.
type storeClocked interface {
	ServerTime(ctx context.Context) (time.Time, error)
}

// WriteStep names a point of a push or a capture at which WriteHooks.Step runs.
type WriteStep string

// The points of a push, in order; a capture passes WriteStarted, RootStored, WindowsListed and
// Settled.
const (
	// WriteStarted: the store's time at the start of the write was read.
	WriteStarted WriteStep = "started"
	// PushBlobsStored: every blob is stored or was found stored.
	PushBlobsStored WriteStep = "blobs stored"
	// RootStored: the root a sweep marks is stored: a push's segments and index, a capture's
	// manifest.
	RootStored WriteStep = "root stored"
	// WindowsListed: the sweeps' delete windows were listed.
	WindowsListed WriteStep = "windows listed"
	// Settled: every referenced object was found stored, or stored again, after the last window
	// that could delete it closed.
	Settled WriteStep = "settled"
)

// WriteHooks let tests act at fixed points of a push or a capture and take the place of its waits.
// An error they return fails the write there.
type WriteHooks struct {
	Step func(ctx context.Context, step WriteStep) error
	// Sleep waits d, or until ctx ends.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (h WriteHooks) step(ctx context.Context, step WriteStep) error {
	if h.Step == nil {
		return nil
	}
	return h.Step(ctx, step)
}

func (h WriteHooks) sleep(ctx context.Context, d time.Duration) error {
	if h.Sleep != nil {
		return h.Sleep(ctx, d)
	}
	if !sleep(ctx, d) {
		return context.Cause(ctx)
	}
	return nil
}

// storeTime reads the store's clock; zero when the store cannot tell it.
func (s *SessionStore) storeTime(ctx context.Context) (time.Time, error) {
	c, ok := s.objects.(storeClocked)
	if !ok {
		return time.Time{}, nil
	}
	return c.ServerTime(ctx)
}

// settle makes sure that every blob and segment of local is stored after the last moment a sweep
// that missed the session's index could delete it. since is the store's time before the push first
// looked for any of them. It runs after the index is stored and before the commit.
func (s *SessionStore) settle(ctx context.Context, since time.Time, local *localSession, res *PushResult) error {
	swept, err := s.awaitSweeps(ctx, since)
	if err != nil || !swept {
		return err
	}
	restored, err := s.restoreMissing(ctx, local)
	if err != nil {
		return err
	}
	res.ObjectsRestored = restored
	return s.hooks.step(ctx, Settled)
}

// awaitSweeps returns once no blob sweep that marked before the writer's root was stored can still
// delete, reporting whether one may have deleted since since, the store's time before the writer
// first looked for an object: then every object the root names must be checked. When none could, it
// passes Settled itself. It runs after the root is stored.
func (s *SessionStore) awaitSweeps(ctx context.Context, since time.Time) (swept bool, err error) {
	if since.IsZero() {
		return false, nil
	}
	infos, err := s.objects.List(ctx, s.layout.SweepWindowsPrefix())
	if err != nil {
		return false, fmt.Errorf("listing the blob sweeps' delete windows: %w", err)
	}
	listed, err := s.storeTime(ctx)
	if err != nil {
		return false, err
	}
	if err := s.hooks.step(ctx, WindowsListed); err != nil {
		return false, err
	}
	// A record is removed only WindowRetention after its window closed, so while the listing is
	// within that of since, every window that was open at since or later is in it.
	complete := !listed.Add(windowSlack).After(since.Add(WindowRetention))
	var overlapping bool
	var latest time.Time
	for _, info := range infos {
		w, ok := s.layout.SweepWindowFromKey(info.Key)
		if !ok {
			// A record this version cannot read (a newer sweep's) may be a window that deleted:
			// check every object.
			complete = false
			continue
		}
		if !w.Closes().Add(windowSlack).Before(since) {
			overlapping = true
		}
		if w.Closes().After(latest) {
			latest = w.Closes()
		}
	}
	if complete && !overlapping {
		return false, s.hooks.step(ctx, Settled)
	}
	if err := s.waitForStoreTime(ctx, latest.Add(windowSlack)); err != nil {
		return false, err
	}
	return true, nil
}

// waitForStoreTime returns once the store's clock is past t.
func (s *SessionStore) waitForStoreTime(ctx context.Context, t time.Time) error {
	started := time.Now()
	for {
		if time.Since(started) > maxWindowWait {
			return fmt.Errorf("waited %s for the store's clock to pass %s, the end of a blob sweep's delete window, and it has not: the store's Date does not advance; try again later", maxWindowWait, t.UTC().Format(time.RFC3339))
		}
		now, err := s.storeTime(ctx)
		if err != nil {
			return err
		}
		wait := t.Sub(now)
		if wait < 0 {
			return nil
		}
		if wait > maxWindowWait {
			return fmt.Errorf("a blob sweep's delete window stays open until %s by the store's clock (now %s), longer than a write waits (%s): "+
				"its sweep runs with a longer window, or its host's clock runs ahead of the store's; try again once it has closed",
				t.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), maxWindowWait)
		}
		if err := s.hooks.sleep(ctx, wait+100*time.Millisecond); err != nil {
			return err
		}
	}
}

// restoreMissing checks that every blob and segment of local is stored at its size, and stores
// again each that is not (a sweep deleted it during the push); it returns how many it stored.
func (s *SessionStore) restoreMissing(ctx context.Context, local *localSession) (int, error) {
	objects := append(append([]localBlob(nil), local.blobs...), local.segments...)
	restored := make([]bool, len(objects))
	err := forEach(ctx, s.parallel, indexes(len(objects)), func(ctx context.Context, i int) error {
		b := objects[i]
		key := s.layout.Blob(b.hash)
		if held, err := s.heldAt(ctx, key, b.size); held || err != nil {
			return err
		}
		if err := s.uploadBlob(ctx, blobPath(local.dir, b), key, b); err != nil {
			return err
		}
		restored[i] = true
		return s.confirm(ctx, key, b.size)
	})
	n := 0
	for _, r := range restored {
		if r {
			n++
		}
	}
	return n, err
}
