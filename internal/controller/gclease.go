package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
)

// LeaseLock is the blob sweep's lock over a coordination.k8s.io Lease: one holder at a time, taken
// over only once the holder stopped renewing it for Duration. The holder renews it every Duration/3
// in the background (and at any Check due for it); it is lost when another holder took it over, or
// when no renewal succeeded for Duration, since another may take it over from then on.
type LeaseLock struct {
	// Client reads and writes the Lease; it must not be a cached client.
	Client    client.Client
	Namespace string
	Name      string
	// Duration is how long the lock stays held without a renewal.
	Duration time.Duration
	Clock    clock.WithTicker
}

var _ blobsweep.Lock = (*LeaseLock)(nil)

// Acquire implements blobsweep.Lock: it creates the Lease, or takes over one that is free or expired.
// A write that lost a race (the holder renewed, or another taker won) reads the Lease again to decide.
func (l *LeaseLock) Acquire(ctx context.Context, holder string) (blobsweep.Lease, error) {
	if holder == "" {
		return nil, fmt.Errorf("Lease %s/%s: the holder identity is empty", l.Namespace, l.Name)
	}
	for attempt := 1; ; attempt++ {
		lease, err := l.acquire(ctx, holder)
		if !errors.Is(err, errLeaseRace) {
			return lease, err
		}
		if attempt == 3 {
			return nil, fmt.Errorf("%w: Lease %s/%s keeps changing", blobsweep.ErrLocked, l.Namespace, l.Name)
		}
	}
}

// errLeaseRace: the Lease was written between the read and the write.
var errLeaseRace = errors.New("the Lease changed")

func (l *LeaseLock) acquire(ctx context.Context, holder string) (blobsweep.Lease, error) {
	now := metav1.NewMicroTime(l.Clock.Now())
	secs := int32(l.Duration.Round(time.Second).Seconds())
	var lease coordinationv1.Lease
	err := l.Client.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, &lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: new(int32(0))},
		}
		if err := l.Client.Create(ctx, &lease); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil, errLeaseRace
			}
			return nil, fmt.Errorf("creating Lease %s/%s: %w", l.Namespace, l.Name, err)
		}
	case err != nil:
		return nil, fmt.Errorf("reading Lease %s/%s: %w", l.Namespace, l.Name, err)
	default:
		if other := holderOf(&lease); other != "" && other != holder && !expired(&lease, now.Time) {
			return nil, fmt.Errorf("%w: %s holds Lease %s/%s, renewed %s", blobsweep.ErrLocked, other, l.Namespace, l.Name, lease.Spec.RenewTime.UTC().Format(time.RFC3339))
		}
		transitions := int32(0)
		if lease.Spec.LeaseTransitions != nil {
			transitions = *lease.Spec.LeaseTransitions
		}
		if holderOf(&lease) != holder {
			transitions++
		}
		lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: &transitions}
		// The resourceVersion read above makes this a compare-and-swap: two takers, one winner.
		if err := l.Client.Update(ctx, &lease); err != nil {
			if apierrors.IsConflict(err) {
				return nil, errLeaseRace
			}
			return nil, fmt.Errorf("taking Lease %s/%s: %w", l.Namespace, l.Name, err)
		}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &heldLease{l: l, holder: holder, renewed: now.Time, cancel: cancel, done: make(chan struct{})}
	go h.renewLoop(ctx)
	return h, nil
}

func holderOf(lease *coordinationv1.Lease) string {
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// expired: the Lease was not renewed within its duration (one without a renewal time or a duration
// is free).
func expired(lease *coordinationv1.Lease, now time.Time) bool {
	s := lease.Spec
	if s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return true
	}
	return !now.Before(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second))
}

// heldLease is an acquired LeaseLock.
type heldLease struct {
	l      *LeaseLock
	holder string
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	renewed time.Time // the last renewal that succeeded
	lost    error     // set once the lock is known lost
}

func (h *heldLease) renewLoop(ctx context.Context) {
	defer close(h.done)
	t := h.l.Clock.NewTicker(max(h.l.Duration/3, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			_ = h.renew(ctx) // a failure is seen by Check: lost, or expired when it lasts
		}
	}
}

// renew reads the Lease and, while it is still ours, writes a new renewal time.
func (h *heldLease) renew(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost != nil {
		return h.lost
	}
	l := h.l
	var lease coordinationv1.Lease
	if err := l.Client.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, &lease); err != nil {
		if apierrors.IsNotFound(err) {
			h.lost = fmt.Errorf("%w: Lease %s/%s was deleted", blobsweep.ErrLeaseLost, l.Namespace, l.Name)
			return h.lost
		}
		return fmt.Errorf("reading Lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	if other := holderOf(&lease); other != h.holder {
		h.lost = fmt.Errorf("%w: %s holds Lease %s/%s now", blobsweep.ErrLeaseLost, other, l.Namespace, l.Name)
		return h.lost
	}
	now := metav1.NewMicroTime(l.Clock.Now())
	if !now.Time.Before(h.renewed.Add(l.Duration)) {
		// Unrenewed for its whole duration: another may have taken it over since, even if it says us.
		h.lost = fmt.Errorf("%w: Lease %s/%s was not renewed for %s", blobsweep.ErrLeaseLost, l.Namespace, l.Name, l.Duration)
		return h.lost
	}
	lease.Spec.RenewTime = &now
	// A conflict means it was written since the read: the next renewal reads who holds it.
	if err := l.Client.Update(ctx, &lease); err != nil {
		return fmt.Errorf("renewing Lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	h.renewed = now.Time
	return nil
}

// Check implements blobsweep.Lease: it confirms with the API server that the Lease is still this
// holder's, renewing it, so a deletion never rests on a lock lost since the last renewal.
func (h *heldLease) Check(ctx context.Context) error {
	if err := h.renew(ctx); err != nil {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.lost != nil {
			return h.lost
		}
		if !h.l.Clock.Now().Before(h.renewed.Add(h.l.Duration)) {
			h.lost = fmt.Errorf("%w: Lease %s/%s could not be renewed for %s: %v", blobsweep.ErrLeaseLost, h.l.Namespace, h.l.Name, h.l.Duration, err)
			return h.lost
		}
		// Still within the time it was last renewed for, but unconfirmed: the sweep stops rather than
		// delete on a lock it cannot vouch for.
		return fmt.Errorf("cannot confirm Lease %s/%s: %w", h.l.Namespace, h.l.Name, err)
	}
	return nil
}

// Release implements blobsweep.Lease: it stops renewing and, while the Lease is still ours, frees it
// (no holder), so the next sweep need not wait for it to expire.
func (h *heldLease) Release(ctx context.Context) error {
	h.cancel()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost != nil {
		return nil
	}
	l := h.l
	var lease coordinationv1.Lease
	if err := l.Client.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, &lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if holderOf(&lease) != h.holder {
		return nil
	}
	lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Spec.AcquireTime = nil, nil, nil
	if err := l.Client.Update(ctx, &lease); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing Lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	h.lost = fmt.Errorf("%w: released", blobsweep.ErrLeaseLost)
	return nil
}
