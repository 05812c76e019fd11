package controller

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestAFailedStatusWriteOutranksATerminalError: a pass whose status write failed is retried even when
// the pass itself ended for good, since what it found was not written; a transient error of the pass
// stays the pass's, and a written status leaves the pass's outcome alone.
func TestAFailedStatusWriteOutranksATerminalError(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "resumeplans"}, "p", fmt.Errorf("stale"))
	terminal := reconcile.TerminalError(errors.New("resume-plan Job p-1 failed"))
	transient := errors.New("the store is unavailable")
	for _, c := range []struct {
		name            string
		pass, write     error
		want            error
		wantRequeueSoon bool
	}{
		{"nothing failed", nil, nil, nil, false},
		{"the write lost a race", nil, conflict, conflict, true},
		{"a terminal pass whose write lost a race", terminal, conflict, conflict, true},
		{"a terminal pass whose write was refused otherwise", terminal, transient, transient, false},
		{"a terminal pass, written", terminal, nil, terminal, false},
		{"a transient pass whose write lost a race", transient, conflict, transient, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := passError(c.pass, c.write)
			if got != c.want {
				t.Fatalf("passError(%v, %v) = %v, want %v", c.pass, c.write, got, c.want)
			}
			res, err := settle(t.Context(), reconcile.Result{}, got)
			if soon := err == nil && res.RequeueAfter == conflictRequeue; soon != c.wantRequeueSoon {
				t.Errorf("settled as %+v, %v: requeued soon %t, want %t", res, err, soon, c.wantRequeueSoon)
			}
		})
	}
}
