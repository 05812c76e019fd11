package controller

import (
	"context"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// snapshotJob is the checkpoint Job that captures the Checkpoint's workspace claim, mounted read-only,
// into the session's store, anchored at the Checkpoint's step, turn and digest.
func (r *CheckpointReconciler) snapshotJob(ck *v1alpha1.Checkpoint, s *v1alpha1.AgentSession) jobs.Spec {
	loc := r.Stores.LocationOf(s)
	w := ck.Spec.Workspace
	step, turn := strconv.FormatInt(*ck.Spec.Step, 10), strconv.FormatInt(int64(*ck.Spec.TurnIndex), 10)
	spec := r.Jobs.spec()
	spec.Owner = ck
	spec.Purpose = string(task.Checkpoint)
	spec.Inputs = append([]string{strconv.FormatInt(ck.Generation, 10), s.Spec.SessionID, loc.String(), step, turn,
		ck.Spec.TranscriptDigest, w.Volume.ClaimName, w.Volume.SubPath}, w.Excludes...)
	spec.Args = append(r.Stores.jobArgs(loc, s.Spec.SessionID),
		"--workspace", workspaceMount, "--step", step, "--turn", turn, "--turn-digest", ck.Spec.TranscriptDigest)
	for _, x := range w.Excludes {
		spec.Args = append(spec.Args, "--exclude", x)
	}
	r.Stores.jobStore(&spec, loc)
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: w.Volume.ClaimName, ReadOnly: true}}})
	spec.Mounts = append(spec.Mounts, corev1.VolumeMount{Name: "workspace", MountPath: workspaceMount, SubPath: w.Volume.SubPath, ReadOnly: true})
	return spec
}

// capture runs the snapshot Job and, once it finished, writes the snapshot it stored.
func (r *CheckpointReconciler) capture(ctx context.Context, ck *v1alpha1.Checkpoint, s *v1alpha1.AgentSession, desired *batchv1.Job) (ctrl.Result, error) {
	step, err := r.ensureJob(ctx, ck, desired)
	if err != nil {
		return ctrl.Result{}, err
	}
	if step.state == jobs.Running {
		return r.markRunning(ctx, &ck.Status.Conditions, ck.Generation, step,
			fmt.Sprintf("checkpoint Job %s is capturing workspace claim %s", step.job.Name, ck.Spec.Workspace.Volume.ClaimName))
	}
	store, err := r.Stores.Open(ctx, r.Stores.LocationOf(s))
	if err == nil {
		var rep jobs.Report
		if rep, err = jobs.Read(ctx, r.APIReader, store, step.job, task.Checkpoint); err == nil {
			return r.applySnapshot(ctx, ck, step, rep)
		}
	}
	conditions.MarkReconciling(&ck.Status.Conditions, ck.Generation, v1alpha1.ReasonStorageUnavailable,
		fmt.Sprintf("the result of checkpoint Job %s cannot be read yet: %v", step.job.Name, err))
	return ctrl.Result{}, err
}
