package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// applySnapshot writes what a finished checkpoint Job reported. Every final state names the Job, which
// ties it to the anchor and the claim the Job was named after (conditions.Settled).
func (r *CheckpointReconciler) applySnapshot(ctx context.Context, ck *v1alpha1.Checkpoint, step jobStep, rep jobs.Report) (ctrl.Result, error) {
	job, gen := step.job, ck.Generation
	if res, handled, err := r.failedRun(ctx, ck, &ck.Status.Conditions, gen, step, rep, "checkpoint Job", v1alpha1.ReasonSnapshotFailed, "Snapshot"); handled {
		return res, err
	}

	res := rep.Result.Checkpoint
	previous := ""
	if res.Deduplicated {
		var err error
		if previous, err = r.previousCheckpoint(ctx, ck, res.ManifestHash); err != nil {
			return ctrl.Result{}, err
		}
	}
	snap, err := apimap.CheckpointSnapshot(res, previous)
	if err != nil {
		msg := fmt.Sprintf("the result of checkpoint Job %s cannot be written into status: %v", job.Name, err)
		conditions.MarkStalled(&ck.Status.Conditions, gen, conditions.ReasonResultCorrupt, msg)
		return ctrl.Result{}, reconcile.TerminalError(errors.New(msg))
	}
	ck.Status.Snapshot = snap
	msg := fmt.Sprintf("checkpoint Job %s stored manifest %.12s: %d files, %d bytes, %d of them new", job.Name, res.ManifestHash, res.Files, res.Bytes, res.IncrementalBytes)
	if previous != "" {
		msg += "; the workspace equals Checkpoint " + previous
	}
	conditions.MarkReady(&ck.Status.Conditions, gen, v1alpha1.ReasonSnapshotStored, msg)
	r.Recorder.Eventf(ck, job, corev1.EventTypeNormal, v1alpha1.ReasonSnapshotStored, "Snapshot", "%s", msg)
	ctrl.LoggerFrom(ctx).Info("Stored workspace snapshot", "job", job.Name, "manifest", res.ManifestHash, "deduplicated", res.Deduplicated)
	return ctrl.Result{}, nil
}

// previousCheckpoint names the Checkpoint of the same session whose snapshot is the manifest a
// deduplicated capture equalled: the latest one before this Checkpoint's step, else the earliest one
// after it; "" when no Checkpoint holds it (it was captured outside the cluster).
func (r *CheckpointReconciler) previousCheckpoint(ctx context.Context, ck *v1alpha1.Checkpoint, manifest string) (string, error) {
	list, err := r.sessionCheckpoints(ctx, ck.Namespace, ck.Spec.SessionRef.Name)
	if err != nil {
		return "", err
	}
	var before, after *v1alpha1.Checkpoint
	for i := range list {
		o := &list[i]
		if o.UID == ck.UID || o.Status.Snapshot.ManifestDigest != manifest || o.Spec.Step == nil {
			continue
		}
		switch step := *o.Spec.Step; {
		case step < *ck.Spec.Step && (before == nil || step > *before.Spec.Step):
			before = o
		case step >= *ck.Spec.Step && (after == nil || step < *after.Spec.Step):
			after = o
		}
	}
	switch {
	case before != nil:
		return before.Name, nil
	case after != nil:
		return after.Name, nil
	}
	return "", nil
}
