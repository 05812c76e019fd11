package blobsweep

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Lock keeps two sweeps from running at once. The GC controller's implementation is a Kubernetes
// Lease; MemLock serves tests and a single process.
type Lock interface {
	// Acquire takes the lock for holder, or fails with an error wrapping ErrLocked when another
	// holder has it.
	Acquire(ctx context.Context, holder string) (Lease, error)
}

// Lease is a held lock.
type Lease interface {
	// Check returns nil while the lock is still held; the sweep checks it before every deletion.
	Check(ctx context.Context) error
	// Release gives the lock up.
	Release(ctx context.Context) error
}

// ErrLocked is wrapped when another sweep holds the lock.
var ErrLocked = errors.New("another blob sweep holds the lock")

// ErrLeaseLost is wrapped when the lock was lost while the sweep held it.
var ErrLeaseLost = errors.New("the blob sweep lost its lock")

// MemLock is a Lock within one process.
type MemLock struct {
	mu     sync.Mutex
	holder string
	epoch  int
}

// Acquire implements Lock.
func (l *MemLock) Acquire(_ context.Context, holder string) (Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holder != "" {
		return nil, fmt.Errorf("%w: %s", ErrLocked, l.holder)
	}
	l.holder = holder
	l.epoch++
	return &memLease{l: l, epoch: l.epoch}, nil
}

// Steal hands the lock to another holder, as an expired Lease taken over would: the lease of the
// previous holder fails its next Check.
func (l *MemLock) Steal(holder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holder = holder
	l.epoch++
}

// Holder is who holds the lock, "" when nobody does.
func (l *MemLock) Holder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holder
}

type memLease struct {
	l     *MemLock
	epoch int
}

func (m *memLease) Check(context.Context) error {
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	if m.l.epoch != m.epoch {
		return fmt.Errorf("%w: %s holds it now", ErrLeaseLost, m.l.holder)
	}
	return nil
}

func (m *memLease) Release(context.Context) error {
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	if m.l.epoch == m.epoch {
		m.l.holder = ""
		m.l.epoch++
	}
	return nil
}
