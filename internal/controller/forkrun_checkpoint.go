package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// A fork from a Checkpoint restores the files first, then forks the conversation (seed 001 D3/D4): the
// Job's pod runs `agentrewind checkpoint restore` into the agent's workspace volume as an init container
// ordered before the proxy sidecar, so the proxy (and with it the agent) starts only once the files are
// back, and a restore that fails fails the pod before anything went live or was recorded.
const (
	// RestoreContainer names the init container that restores the Checkpoint's workspace.
	RestoreContainer = "restore-workspace"
	// ReasonWaitingForCheckpoint is set on Reconciling while a ForkRun's Checkpoint does not exist or
	// is not Ready.
	ReasonWaitingForCheckpoint = "WaitingForCheckpoint"
	// ReasonRestoringWorkspace is the event of a Job created to restore a Checkpoint's workspace.
	ReasonRestoringWorkspace = "RestoringWorkspace"

	// forkRunCheckpointField indexes ForkRuns by the Checkpoint they fork from.
	forkRunCheckpointField = "spec.fork.checkpointRef.name"
	// workspaceVolume is the pod volume the agent works in and the restore writes into.
	workspaceVolume = "workspace"
)

// forkStart is where a fork starts: the step that goes live and, for a fork from a Checkpoint, the
// Checkpoint and the workspace snapshot restored before the agent starts ("" when nothing is restored).
type forkStart struct {
	step       int64
	checkpoint string
	manifest   string
}

// decideCheckpointStart decides where a fork from a Checkpoint starts, from the facts gathered: the
// Checkpoint (nil when it does not exist) and the agent the run would start. It returns a message to
// wait with, or a spec error, or the start.
//
// A Checkpoint without a workspace snapshot (an anchor only) cannot bring back the files of an agent
// that works in a workspace claim: running it over the claim as it is now would pair the conversation
// at the Checkpoint's step with files of another moment, so the ForkRun is refused, and its message says
// that fork.atStep forks the conversation only. An agent without a workspace has nothing to restore and
// is forked at the Checkpoint's step.
func decideCheckpointStart(fr *v1alpha1.ForkRun, ck *v1alpha1.Checkpoint, agent v1alpha1.AgentSpec) (forkStart, string, error) {
	name := fr.Spec.Fork.CheckpointRef.Name
	if ck == nil {
		return forkStart{}, fmt.Sprintf("Checkpoint %s does not exist", name), nil
	}
	if ck.Spec.SessionRef.Name != fr.Spec.SessionRef.Name {
		return forkStart{}, "", &specError{fmt.Sprintf("spec.fork.checkpointRef: Checkpoint %s is an anchor of AgentSession %s, not of %s: fork from a Checkpoint of the session the ForkRun names",
			name, ck.Spec.SessionRef.Name, fr.Spec.SessionRef.Name)}
	}
	ready := meta.FindStatusCondition(ck.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != ck.Generation || ck.Spec.Step == nil {
		msg := fmt.Sprintf("waiting for Checkpoint %s to be Ready", name)
		switch {
		case ready != nil && ready.Reason != "" && ready.Message != "":
			msg += fmt.Sprintf(" (now %s: %s)", ready.Reason, ready.Message)
		case ready != nil && ready.Reason != "":
			msg += fmt.Sprintf(" (now %s)", ready.Reason)
		}
		return forkStart{}, msg, nil
	}
	start := forkStart{step: *ck.Spec.Step, checkpoint: name, manifest: ck.Status.Snapshot.ManifestDigest}
	if start.manifest == "" && agent.Workspace.ClaimName != "" {
		return forkStart{}, "", &specError{fmt.Sprintf("spec.fork.checkpointRef: Checkpoint %s holds no workspace snapshot (an anchor only), so the agent's workspace claim %s cannot be brought back to step %d: "+
			"set spec.fork.atStep: %d instead to fork the conversation only, over the claim as it is", name, agent.Workspace.ClaimName, start.step, start.step)}
	}
	return start, "", nil
}

// checkpointStart gathers the ForkRun's Checkpoint and decides where the fork starts. done is true when
// status was written (waiting or stalled) and the pass has nothing more to do.
func (r *ForkRunReconciler) checkpointStart(ctx context.Context, fr *v1alpha1.ForkRun, agent v1alpha1.AgentSpec) (forkStart, bool, ctrl.Result, error) {
	var ck *v1alpha1.Checkpoint
	var got v1alpha1.Checkpoint
	switch err := r.Get(ctx, types.NamespacedName{Namespace: fr.Namespace, Name: fr.Spec.Fork.CheckpointRef.Name}, &got); {
	case err == nil:
		ck = &got
	case client.IgnoreNotFound(err) != nil:
		return forkStart{}, true, ctrl.Result{}, err
	}
	start, wait, err := decideCheckpointStart(fr, ck, agent)
	switch {
	case err != nil:
		return forkStart{}, true, ctrl.Result{}, r.stallInvalid(fr, err)
	case wait != "":
		// The Checkpoint watch brings the next pass; the requeue covers a Checkpoint created later.
		conditions.MarkReconciling(&fr.Status.Conditions, fr.Generation, ReasonWaitingForCheckpoint, wait)
		return forkStart{}, true, ctrl.Result{RequeueAfter: sessionWaitRequeue}, nil
	}
	return start, false, ctrl.Result{}, nil
}

// restoreContainer is the init container that writes the Checkpoint's files into the workspace volume:
// the engine image, restricted like the proxy, with the store's credentials only. The address is the
// manifest's full digest, bounded to the session (--session), so it names that snapshot and no other.
// A claim outlives the pod, so its current files are kept in a guard checkpoint first and the restore
// refuses without one (restoring the guard undoes it); an emptyDir starts empty and needs no guard.
func (r *ForkRunReconciler) restoreContainer(s *v1alpha1.AgentSession, loc Location, start forkStart, claim bool, sc *corev1.SecurityContext) corev1.Container {
	guard := "off"
	if claim {
		guard = "require"
	}
	args := []string{"checkpoint", "restore", workspaceMount, start.manifest, "--store", loc.String(), "--session", s.Spec.SessionID}
	if e := r.Stores.Config.Endpoint; e != "" {
		args = append(args, "--endpoint", e)
	}
	if rg := r.Stores.Config.Region; rg != "" {
		args = append(args, "--region", rg)
	}
	args = append(args, "--guard", guard)
	c := corev1.Container{
		Name:                     RestoreContainer,
		Image:                    r.Jobs.Image,
		Args:                     args,
		Env:                      append([]corev1.EnvVar{{Name: jobs.EnvTmpDir, Value: jobs.TmpDir}}, r.Stores.jobEnv(loc)...),
		VolumeMounts:             []corev1.VolumeMount{{Name: "tmp", MountPath: jobs.TmpDir}},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          sc.DeepCopy(),
	}
	if _, mount, env, ok := r.Stores.jobCA(); ok { // the pod has the volume: the fork Job's spec (jobStore)
		c.VolumeMounts = append(c.VolumeMounts, mount)
		c.Env = append(c.Env, env)
	}
	return c
}

// restoredManifest is the snapshot a ForkRun Job restores before its agent starts, "" when none.
func restoredManifest(pod corev1.PodSpec) string {
	for _, c := range pod.InitContainers {
		if c.Name == RestoreContainer && len(c.Args) > 3 {
			return c.Args[3]
		}
	}
	return ""
}

// announceStart says, once, how the Job a fork from a Checkpoint started begins: the files it restores
// and where, or that there is nothing to restore.
func (r *ForkRunReconciler) announceStart(fr *v1alpha1.ForkRun, step jobStep, start forkStart, agent v1alpha1.AgentSpec) {
	if start.checkpoint == "" || !step.started {
		return
	}
	var msg string
	switch w := agent.Workspace; {
	case start.manifest == "":
		msg = fmt.Sprintf("Job %s forks the conversation at Checkpoint %s's step %d; the Checkpoint holds no workspace snapshot and the agent has no workspace, so no files are restored",
			step.job.Name, start.checkpoint, start.step)
	case w.ClaimName != "":
		msg = fmt.Sprintf("Job %s restores the workspace from Checkpoint %s (manifest %.12s) into claim %s%s before the agent starts, then goes live at step %d",
			step.job.Name, start.checkpoint, start.manifest, w.ClaimName, subPathNote(w.SubPath), start.step)
	default:
		msg = fmt.Sprintf("Job %s restores the workspace from Checkpoint %s (manifest %.12s) into an emptyDir at %s before the agent starts, then goes live at step %d",
			step.job.Name, start.checkpoint, start.manifest, workspaceMount, start.step)
	}
	r.Recorder.Eventf(fr, step.job, corev1.EventTypeNormal, ReasonRestoringWorkspace, "Start", "%s", msg)
}

func subPathNote(p string) string {
	if p == "" {
		return ""
	}
	return " (subPath " + p + ")"
}

// runsOfCheckpoint maps a Checkpoint to the ForkRuns that fork from it.
func (r *ForkRunReconciler) runsOfCheckpoint(ctx context.Context, o client.Object) []reconcile.Request {
	return requestsFor(ctx, r, &v1alpha1.ForkRunList{}, o.GetNamespace(), forkRunCheckpointField, o.GetName(), "the ForkRuns of a Checkpoint")
}

// checkpointOfRun is the index value of a ForkRun: the Checkpoint it forks from, if any.
func checkpointOfRun(o client.Object) []string {
	if n := strings.TrimSpace(o.(*v1alpha1.ForkRun).Spec.Fork.CheckpointRef.Name); n != "" {
		return []string{n}
	}
	return nil
}
