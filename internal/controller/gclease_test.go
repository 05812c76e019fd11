package controller

import (
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
)

func TestLeaseLockIsHeldByOneSweepAndLostWhenTakenOver(t *testing.T) {
	e := newEnv(t)
	lock := func() *LeaseLock {
		return &LeaseLock{Client: apiServer.Client, Namespace: e.ns, Name: "gc-sweep", Duration: time.Minute, Clock: e.clock}
	}
	first, err := lock().Acquire(e.ctx, "sweep-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Check(e.ctx); err != nil {
		t.Fatalf("the holder's Check: %v", err)
	}
	if _, err := lock().Acquire(e.ctx, "sweep-2"); !errors.Is(err, blobsweep.ErrLocked) {
		t.Fatalf("a second sweep acquired a held lock: %v, want ErrLocked", err)
	}
	var lease coordinationv1.Lease
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "gc-sweep"}, &lease); err != nil {
		t.Fatal(err)
	}
	if got := holderOf(&lease); got != "sweep-1" {
		t.Fatalf("the Lease is held by %q, want sweep-1", got)
	}

	// Within its duration a Check renews it, so it is still not free half a duration later.
	e.clock.Step(40 * time.Second)
	if err := first.Check(e.ctx); err != nil {
		t.Fatalf("the holder's Check after 40s: %v", err)
	}
	e.clock.Step(40 * time.Second)
	if _, err := lock().Acquire(e.ctx, "sweep-2"); !errors.Is(err, blobsweep.ErrLocked) {
		t.Fatalf("a second sweep took over a lock renewed 40s ago: %v, want ErrLocked", err)
	}

	// Unrenewed for its duration, the Lease is taken over; the first holder's next Check fails.
	e.clock.Step(2 * time.Minute)
	second, err := lock().Acquire(e.ctx, "sweep-2")
	if err != nil {
		t.Fatalf("taking over an expired Lease: %v", err)
	}
	if err := first.Check(e.ctx); !errors.Is(err, blobsweep.ErrLeaseLost) {
		t.Fatalf("the first holder's Check after the takeover: %v, want ErrLeaseLost", err)
	}
	// Releasing a lost lock leaves the new holder's Lease alone.
	if err := first.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := second.Check(e.ctx); err != nil {
		t.Fatalf("the new holder's Check after the old one released: %v", err)
	}
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "gc-sweep"}, &lease); err != nil {
		t.Fatal(err)
	}
	if got, n := holderOf(&lease), *lease.Spec.LeaseTransitions; got != "sweep-2" || n != 1 {
		t.Fatalf("the Lease is held by %q after %d transitions, want sweep-2 after 1", got, n)
	}
	// Released, it is free at once.
	if err := second.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	third, err := lock().Acquire(e.ctx, "sweep-3")
	if err != nil {
		t.Fatalf("acquiring a released Lease: %v", err)
	}
	_ = third.Release(e.ctx)
}

// A Lease deleted under its holder is lost too.
func TestLeaseLockIsLostWhenItsLeaseIsDeleted(t *testing.T) {
	e := newEnv(t)
	l := &LeaseLock{Client: apiServer.Client, Namespace: e.ns, Name: "gc-sweep", Duration: time.Minute, Clock: e.clock}
	held, err := l.Acquire(e.ctx, "sweep-1")
	if err != nil {
		t.Fatal(err)
	}
	var lease coordinationv1.Lease
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "gc-sweep"}, &lease); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(e.ctx, &lease); err != nil {
		t.Fatal(err)
	}
	if err := held.Check(e.ctx); !errors.Is(err, blobsweep.ErrLeaseLost) {
		t.Fatalf("Check after the Lease was deleted: %v, want ErrLeaseLost", err)
	}
}
