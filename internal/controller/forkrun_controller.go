package controller

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
)

// forkRunSessionField indexes ForkRuns by the session they replay or fork.
const forkRunSessionField = "spec.sessionRef.name"

// sessionWaitRequeue is how often a ForkRun waiting for its session looks again, beside the watch.
const sessionWaitRequeue = 30 * time.Second

// ForkRunReconciler replays or forks a session in one Job (the agent with the rewind proxy as a native
// sidecar), writes the outcome into status, creates a fork's child AgentSession, and deletes a
// finished ForkRun after its TTL.
type ForkRunReconciler struct {
	Deps
}

// SetupWithManager registers the reconciler: it owns its Job and watches the sessions and Checkpoints
// ForkRuns wait for.
func (r *ForkRunReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ForkRun{}, forkRunSessionField, func(o client.Object) []string {
		return []string{o.(*v1alpha1.ForkRun).Spec.SessionRef.Name}
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ForkRun{}, forkRunCheckpointField, checkpointOfRun); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ForkRun{}).
		Owns(&batchv1.Job{}).
		Watches(&v1alpha1.AgentSession{}, handler.EnqueueRequestsFromMapFunc(r.runsOfSession)).
		Watches(&v1alpha1.Checkpoint{}, handler.EnqueueRequestsFromMapFunc(r.runsOfCheckpoint)).
		Named("forkrun").
		Complete(r)
}

// runsOfSession maps an AgentSession to the ForkRuns of it, and a fork's child to the ForkRun that
// made it (its label).
func (r *ForkRunReconciler) runsOfSession(ctx context.Context, o client.Object) []reconcile.Request {
	reqs := requestsFor(ctx, r, &v1alpha1.ForkRunList{}, o.GetNamespace(), forkRunSessionField, o.GetName(), "the ForkRuns of a session")
	if by := o.GetLabels()[LabelForkRun]; by != "" {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: by}})
	}
	return reqs
}

// noteCollected says in a finished run's final condition that a session it points at, the one it
// ran from or the child it recorded, was collected since (noteRunCollected).
func (r *ForkRunReconciler) noteCollected(ctx context.Context, fr *v1alpha1.ForkRun) error {
	for _, name := range []string{fr.Spec.SessionRef.Name, fr.Status.ChildSessionRef.Name} {
		if name == "" {
			continue
		}
		var s v1alpha1.AgentSession
		if err := r.Get(ctx, types.NamespacedName{Namespace: fr.Namespace, Name: name}, &s); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			continue // gone: the collector wrote it as it deleted it
		}
		if collected(&s) {
			noteRunCollected(fr.Status.Conditions, &s)
		}
	}
	return nil
}

// ForkRun: one Job per ForkRun, the child AgentSession of a fork (created, never updated or deleted:
// it outlives the ForkRun), deletion after the TTL; the Checkpoint a fork starts from is read. Pods are read (never watched) for the proxy's
// termination message. Provider keys and the agent's Secrets reach the pod as Secret references the
// kubelet resolves: the manager reads no Secret for a ForkRun.
// +kubebuilder:rbac:groups=agentrewind.io,resources=forkruns,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=agentrewind.io,resources=forkruns/status,verbs=get;patch
// +kubebuilder:rbac:groups=agentrewind.io,resources=forkruns/finalizers,verbs=update
// +kubebuilder:rbac:groups=agentrewind.io,resources=agentsessions,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=agentrewind.io,resources=checkpoints,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list

// Reconcile is get → TTL → the session's facts → the Job → status, with one status patch at the end.
func (r *ForkRunReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var fr v1alpha1.ForkRun
	if err := r.Get(ctx, req.NamespacedName, &fr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !fr.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // nothing of its own outside the cluster: its Job goes with it
	}
	if expired, wait := r.expiry(&fr); expired {
		return settle(ctx, ctrl.Result{}, r.expire(ctx, &fr))
	} else if wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil // finished and settled: only the TTL is left
	}

	base := fr.DeepCopy()
	rerun(&fr)
	defer func() {
		fr.Status.ObservedGeneration = fr.Generation
		err = passError(err, patchStatus(ctx, r.Client, &fr, base, func(o client.Object) any { return o.(*v1alpha1.ForkRun).Status }))
		r.Metrics.forkRunWritten(base, &fr, err)
		if err == nil && res.IsZero() {
			if _, wait := r.expiry(&fr); wait > 0 {
				res.RequeueAfter = wait
			}
		}
		res, err = settle(ctx, res, err)
	}()
	return r.run(ctx, &fr)
}

// expiry says whether a finished ForkRun's TTL ran out, or how long it has left (0 when it has none or
// is not finished).
func (r *ForkRunReconciler) expiry(fr *v1alpha1.ForkRun) (bool, time.Duration) {
	ttl := fr.Spec.TTLSecondsAfterFinished
	if ttl == nil || fr.Status.Outcome == "" || fr.Status.CompletionTime == nil || fr.Status.ObservedGeneration != fr.Generation {
		return false, 0 // not finished, or finished a generation the spec has moved past: it runs again
	}
	left := fr.Status.CompletionTime.Add(time.Duration(*ttl) * time.Second).Sub(r.Clock.Now())
	if left <= 0 {
		return true, 0
	}
	return false, left
}

// expire deletes a ForkRun whose TTL ran out, only as it was read (preconditions on its UID and
// resource version): a spec edited since, which the cache may not show yet, is a new generation to run,
// not a finished run to delete; the conflict requeues the pass, which reads the edit.
func (r *ForkRunReconciler) expire(ctx context.Context, fr *v1alpha1.ForkRun) error {
	uid, rv := fr.UID, fr.ResourceVersion
	if err := r.Delete(ctx, fr, client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting ForkRun %s after its TTL: %w", fr.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted finished ForkRun after its TTL", "outcome", fr.Status.Outcome, "ttlSeconds", *fr.Spec.TTLSecondsAfterFinished)
	return nil
}

// rerun starts the status over when the spec changed since the last run (a GitOps commit bumped the
// agent image, a goal was corrected): the outcome, child, Job, divergences, usage, provenance and times
// of the earlier generation's run say nothing of the one to come, and a Replay's outcome left in place
// would have a suite read an old pass as a new one.
func rerun(fr *v1alpha1.ForkRun) {
	ran := fr.Status.ObservedGeneration
	if ran == 0 || ran == fr.Generation {
		return
	}
	fr.Status = v1alpha1.ForkRunStatus{Conditions: fr.Status.Conditions, ObservedGeneration: ran}
	conditions.MarkReconciling(&fr.Status.Conditions, fr.Generation, v1alpha1.ReasonSpecChanged,
		fmt.Sprintf("the spec changed since generation %d ran: running generation %d", ran, fr.Generation))
}

// run drives the ForkRun's one Job: settled already, waiting for the session, starting the Job,
// following it, reading its result.
func (r *ForkRunReconciler) run(ctx context.Context, fr *v1alpha1.ForkRun) (ctrl.Result, error) {
	gen, name := fr.Generation, forkJobName(fr)
	if err := r.stopEarlierRuns(ctx, fr, name); err != nil {
		return ctrl.Result{}, err
	}
	if conditions.RunSettled(fr.Status.Conditions, fr.Status.LastRun, gen, name) {
		// This ForkRun's Job was read already.
		if err := r.stopCrashed(ctx, fr, name); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.noteCollected(ctx, fr)
	}
	var s v1alpha1.AgentSession
	if err := r.Get(ctx, types.NamespacedName{Namespace: fr.Namespace, Name: fr.Spec.SessionRef.Name}, &s); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		conditions.MarkReconciling(&fr.Status.Conditions, gen, conditions.ReasonWaitingForSession,
			fmt.Sprintf("AgentSession %s does not exist", fr.Spec.SessionRef.Name))
		return ctrl.Result{RequeueAfter: sessionWaitRequeue}, nil
	}

	var job batchv1.Job
	err := r.Get(ctx, types.NamespacedName{Namespace: fr.Namespace, Name: name}, &job)
	switch {
	case apierrors.IsNotFound(err):
		return r.start(ctx, fr, &s)
	case err != nil:
		return ctrl.Result{}, err
	}
	// A Job that exists is followed whatever its session does meanwhile: it runs from its own copy.
	step := jobStep{job: &job, state: jobs.StateOf(&job)}
	return r.follow(ctx, fr, &s, step)
}

// stopEarlierRuns deletes the Jobs of the ForkRun's earlier generations that still run: the spec moved
// past them, nothing reads their results, and a fork's would go on spending live tokens (and a quick
// series of edits would run one fork per edit side by side). Finished ones stay for their logs until
// their TTL.
func (r *ForkRunReconciler) stopEarlierRuns(ctx context.Context, fr *v1alpha1.ForkRun, current string) error {
	var list batchv1.JobList
	if err := r.List(ctx, &list, client.InNamespace(fr.Namespace), client.MatchingLabels{jobs.LabelParent: fr.Name}); err != nil {
		return err
	}
	for i := range list.Items {
		job := &list.Items[i]
		owner := metav1.GetControllerOf(job)
		if job.Name == current || owner == nil || owner.UID != fr.UID || !job.DeletionTimestamp.IsZero() || jobs.StateOf(job) != jobs.Running {
			continue
		}
		if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Job %s of an earlier generation: %w", job.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Deleted the running Job of an earlier generation", "job", job.Name)
		r.Recorder.Eventf(fr, job, corev1.EventTypeNormal, "JobStopped", "Delete",
			"Stopped Job %s of an earlier generation: the spec changed, generation %d runs instead", job.Name, fr.Generation)
	}
	return nil
}

// start checks the Checkpoint a fork starts from, the session and the spec, then creates the Job.
func (r *ForkRunReconciler) start(ctx context.Context, fr *v1alpha1.ForkRun, s *v1alpha1.AgentSession) (ctrl.Result, error) {
	agent, agentErr := agentOf(fr, s)
	var start forkStart
	if fr.Spec.Mode == v1alpha1.ModeFork {
		if at := fr.Spec.Fork.AtStep; at != nil {
			start.step = *at
		} else if fr.Spec.Fork.CheckpointRef.Name != "" {
			// Checked before the session is Ready: a Checkpoint of another session is wrong whatever
			// the session does.
			var done bool
			var res ctrl.Result
			var err error
			if start, done, res, err = r.checkpointStart(ctx, fr, agent); done || err != nil {
				return res, err
			}
		} else {
			return ctrl.Result{}, r.stallInvalid(fr, &specError{"spec.fork: set atStep or checkpointRef"})
		}
	}
	if !meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady) {
		conditions.MarkReconciling(&fr.Status.Conditions, fr.Generation, conditions.ReasonWaitingForSession,
			fmt.Sprintf("waiting for AgentSession %s to be Ready (verified)", s.Name))
		return ctrl.Result{RequeueAfter: sessionWaitRequeue}, nil
	}
	err := agentErr
	if err == nil && fr.Spec.Mode == v1alpha1.ModeFork {
		err = forkStepInRange(fr, s, start.step)
	}
	var desired *batchv1.Job
	if err == nil {
		desired, err = r.forkRunJob(fr, s, agent, start)
	}
	if isSpecError(err) {
		return ctrl.Result{}, r.stallInvalid(fr, err)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	step, err := r.ensureJob(ctx, fr, desired)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.announceStart(fr, step, start, agent)
	return r.follow(ctx, fr, s, step)
}

// forkStepInRange refuses a fork at a step past the end of its verified session (spec.fork.atStep 500
// of a 13-step session): every step would be served and nothing forked.
func forkStepInRange(fr *v1alpha1.ForkRun, s *v1alpha1.AgentSession, step int64) error {
	steps := s.Status.Recording.Steps
	if steps == nil {
		return nil // not counted: the proxy checks it again
	}
	if err := replay.CheckAtStep(step, s.Spec.SessionID, *steps); err != nil {
		field := "spec.fork.atStep"
		if fr.Spec.Fork.AtStep == nil {
			field = "spec.fork.checkpointRef (Checkpoint " + fr.Spec.Fork.CheckpointRef.Name + ")"
		}
		return &specError{fmt.Sprintf("%s: %v (AgentSession %s)", field, err, s.Name)}
	}
	return nil
}

// stallInvalid stalls a ForkRun whose spec cannot run with InvalidSpec, until the session's agent or
// the Checkpoint changes (the ForkRun's spec cannot): said once, not on every pass an update brings.
func (r *ForkRunReconciler) stallInvalid(fr *v1alpha1.ForkRun, err error) error {
	gen := fr.Generation
	if c := meta.FindStatusCondition(fr.Status.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue &&
		c.Reason == v1alpha1.ReasonInvalidSpec && c.ObservedGeneration == gen && c.Message == err.Error() {
		return nil
	}
	conditions.MarkStalled(&fr.Status.Conditions, gen, v1alpha1.ReasonInvalidSpec, err.Error())
	r.Recorder.Eventf(fr, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalidSpec, "Start", "%s", err.Error())
	return reconcile.TerminalError(err)
}

// follow writes where the Job stands; once it finished, it reads the result.
func (r *ForkRunReconciler) follow(ctx context.Context, fr *v1alpha1.ForkRun, s *v1alpha1.AgentSession, step jobStep) (ctrl.Result, error) {
	job := step.job
	fr.Status.JobRef = v1alpha1.LocalObjectReference{Name: job.Name}
	if job.Status.StartTime != nil {
		fr.Status.StartTime = job.Status.StartTime.DeepCopy()
	}
	if step.state == jobs.Running {
		if !step.started && r.Jobs.StuckCheck > 0 {
			crash, err := jobs.Crashing(ctx, r.APIReader, job)
			if err != nil {
				return ctrl.Result{}, err
			}
			if crash != nil {
				return r.stopCrashing(ctx, fr, job, crash)
			}
		}
		return r.markRunning(ctx, &fr.Status.Conditions, fr.Generation, step, fmt.Sprintf("%s Job %s is running", forkTask(fr), job.Name))
	}
	store, err := r.Stores.Open(ctx, r.Stores.LocationOf(s))
	if err == nil {
		var rep jobs.Report
		if rep, err = jobs.Read(ctx, r.APIReader, store, job, forkTask(fr)); err == nil {
			return r.applyRun(ctx, fr, s, step, rep)
		}
	}
	conditions.MarkReconciling(&fr.Status.Conditions, fr.Generation, v1alpha1.ReasonStorageUnavailable,
		fmt.Sprintf("the result of %s Job %s cannot be read yet: %v", forkTask(fr), job.Name, err))
	return ctrl.Result{}, err
}

// stopCrashing ends a run whose pod has a container that keeps failing (the proxy could not serve: a
// session it cannot open, a flag it refuses): the kubelet would restart it until the Job's deadline an
// hour later while the run said it was running. The run fails with the container's last line; its
// Job is deleted by the next pass (stopCrashed), once the cache shows the run settled, so that no
// pass can take the missing Job for one to create.
func (r *ForkRunReconciler) stopCrashing(ctx context.Context, fr *v1alpha1.ForkRun, job *batchv1.Job, crash *jobs.Crash) (ctrl.Result, error) {
	msg := fmt.Sprintf("%s Job %s failed: %s", forkTask(fr), job.Name, crash)
	switch {
	case crash.Container == AgentContainer:
		// The agent's log may print any secret it was given: status is read more widely than logs.
		msg += "; the agent's log says why"
	case crash.LastLine != "":
		msg += ": " + crash.LastLine
	}
	msg += "; the Job is deleted rather than left to run until its deadline"
	fr.Status.Outcome = v1alpha1.OutcomeFailed
	fr.Status.CompletionTime = &metav1.Time{Time: r.Clock.Now()}
	conditions.MarkStalled(&fr.Status.Conditions, fr.Generation, conditions.ReasonContainerCrashLooping, msg)
	r.Recorder.Eventf(fr, job, corev1.EventTypeWarning, conditions.ReasonContainerCrashLooping, "Run", "%s", apimap.Message(msg))
	ctrl.LoggerFrom(ctx).Info("Failed a ForkRun whose container crash-loops", "job", job.Name, "container", crash.Container, "exitCode", crash.ExitCode)
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

// stopCrashed deletes the Job of a run that failed on a crash-looping container, if it still runs.
func (r *ForkRunReconciler) stopCrashed(ctx context.Context, fr *v1alpha1.ForkRun, name string) error {
	c := meta.FindStatusCondition(fr.Status.Conditions, v1alpha1.ConditionStalled)
	if c == nil || c.Reason != conditions.ReasonContainerCrashLooping {
		return nil
	}
	return deleteRunningJob(ctx, r.Client, r.Recorder, fr, types.NamespacedName{Namespace: fr.Namespace, Name: name})
}

// deleteRunningJob deletes owner's Job name if it exists and still runs, saying so in an event.
func deleteRunningJob(ctx context.Context, c client.Client, rec events.EventRecorder, owner client.Object, name types.NamespacedName) error {
	var job batchv1.Job
	if err := c.Get(ctx, name, &job); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !job.DeletionTimestamp.IsZero() || jobs.StateOf(&job) != jobs.Running {
		return nil
	}
	uid := job.UID
	if err := c.Delete(ctx, &job, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting Job %s, whose container crash-loops: %w", job.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted a Job whose container crash-loops", "job", job.Name)
	rec.Eventf(owner, &job, corev1.EventTypeNormal, "JobStopped", "Delete", "Deleted Job %s: a container of its pod crash-loops", job.Name)
	return nil
}
