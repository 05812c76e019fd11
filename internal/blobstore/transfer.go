package blobstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sync"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// forEach runs fn on every item with at most limit running at once. The first error cancels the
// rest and is returned; so is the caller's context error when it ends first.
func forEach[T any](ctx context.Context, limit int, items []T, fn func(context.Context, T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	work := make(chan T)
	for range min(limit, len(items)) {
		wg.Go(func() {
			for item := range work {
				if err := fn(ctx, item); err != nil {
					once.Do(func() { first = err; cancel(err) })
				}
			}
		})
	}
	fed := 0
feed:
	for _, item := range items {
		select {
		case work <- item:
			fed++
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if first != nil {
		return first
	}
	if fed < len(items) {
		return context.Cause(ctx)
	}
	return nil
}

// copyVerified copies src to dst and fails with *session.DigestMismatchError naming object when the
// bytes do not hash to want. The caller must discard dst on error.
func copyVerified(dst io.Writer, src io.Reader, want, object string) error {
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(dst, h), src); err != nil {
		return fmt.Errorf("reading %s: %w", object, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return &session.DigestMismatchError{Object: object, Want: want, Got: got}
	}
	return nil
}

// Phase is the part of a transfer under way.
type Phase string

const (
	PhaseBlobs  Phase = "blobs"
	PhaseEvents Phase = "events"
	PhaseVault  Phase = "vault" // the sealed vault.enc, when the session has one
	PhaseMeta   Phase = "meta"
	PhaseDone   Phase = "done"
)

// Progress is a snapshot of a push or pull.
type Progress struct {
	Op      string // "push" or "pull"
	Session string
	Phase   Phase
	// Object is the key just transferred or skipped; empty when a phase starts.
	Object string
	// Skipped says the object was already in the store.
	Skipped      bool
	DoneObjects  int
	TotalObjects int
	DoneBytes    int64
	// TotalBytes is 0 when not known in advance (a pull learns blob sizes as it goes).
	TotalBytes int64
}

// tracker serialises progress reports from parallel transfers.
type tracker struct {
	mu sync.Mutex
	p  Progress
	fn func(Progress)
}

func newTracker(fn func(Progress), op, id string, objects int, bytes int64) *tracker {
	return &tracker{fn: fn, p: Progress{Op: op, Session: id, TotalObjects: objects, TotalBytes: bytes}}
}

// phase announces the start of a phase; total, when positive, corrects the object total.
func (t *tracker) phase(ph Phase, total int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.p.Phase, t.p.Object, t.p.Skipped = ph, "", false
	if total > 0 {
		t.p.TotalObjects = total
	}
	t.report()
}

func (t *tracker) done(object string, n int64, skipped bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.p.Object, t.p.Skipped = object, skipped
	t.p.DoneObjects++
	t.p.DoneBytes += n
	t.report()
}

func (t *tracker) report() {
	if t.fn != nil {
		t.fn(t.p)
	}
}
