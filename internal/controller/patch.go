package controller

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// errRequeue asks for another pass soon without reporting an error: the cache is behind the API server.
var errRequeue = errors.New("the cache is behind the API server")

// conflictRequeue is how soon a pass that lost a write race runs again.
const conflictRequeue = 200 * time.Millisecond

// patchStatus writes the status of obj when it differs from base's, with an optimistic lock, so a
// pass that read a stale object fails with a conflict instead of writing over newer status.
func patchStatus(ctx context.Context, c client.Client, obj, base client.Object, statusOf func(client.Object) any) error {
	if equality.Semantic.DeepEqual(statusOf(obj), statusOf(base)) {
		return nil
	}
	return c.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// passError is a pass's error once its deferred status write returned writeErr. A write that failed
// outranks a terminal error: the terminal error stops the retries, and the status that says why was
// not written, so the object would go on saying what an earlier pass wrote (a Job running, long after
// it failed). A conflict becomes settle's quiet requeue; any other error of the pass stays as it is.
func passError(err, writeErr error) error {
	if writeErr != nil && (err == nil || errors.Is(err, reconcile.TerminalError(nil))) {
		return writeErr
	}
	return err
}

// settle turns a pass's outcome into what controller-runtime expects: a conflict or a lagging cache
// is a quiet requeue, not an error to log; anything else is returned as it is.
func settle(ctx context.Context, res ctrl.Result, err error) (ctrl.Result, error) {
	if err == nil {
		return res, nil
	}
	if errors.Is(err, errRequeue) || apierrors.IsConflict(err) {
		ctrl.LoggerFrom(ctx).V(1).Info("Requeued after a conflict", "reason", err.Error())
		return ctrl.Result{RequeueAfter: conflictRequeue}, nil
	}
	return res, err
}
