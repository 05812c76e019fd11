package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// JobSettings are the manager's settings for every engine Job.
type JobSettings struct {
	// Image is the engine image (this binary's image).
	Image string
	// ProxyImage is the image of the rewind proxy beside an agent (a recording's, a fork's, a replay's);
	// empty is Image. The proxy is the same binary: a separate image lets a cluster pin or patch it apart.
	ProxyImage string
	// TTLAfterFinished is how long a finished Job is kept for its logs.
	TTLAfterFinished time.Duration
	// ActiveDeadline bounds how long one Job may run.
	ActiveDeadline time.Duration
	// RetryAfter is how long after a Job failed for a reason that may pass (the store was unavailable,
	// the session not yet pushed) it is run again.
	RetryAfter time.Duration
	// StuckCheck is how often the pod of a running engine Job is looked at for a container that cannot
	// start (markRunning); 0 never looks.
	StuckCheck time.Duration
	// Upstreams are where the proxies of ForkRun and recording Jobs send live calls.
	Upstreams Upstreams
}

func (s JobSettings) spec() jobs.Spec {
	return jobs.Spec{Image: s.Image, TTLAfterFinished: new(int32(s.TTLAfterFinished.Seconds())), ActiveDeadline: new(int64(s.ActiveDeadline.Seconds()))}
}

// proxySpec is spec for a Job whose engine container becomes the proxy beside an agent (newAgentPod).
func (s JobSettings) proxySpec() jobs.Spec {
	spec := s.spec()
	if s.ProxyImage != "" {
		spec.Image = s.ProxyImage
	}
	return spec
}

// Deps are what every reconciler here shares.
type Deps struct {
	client.Client
	// APIReader reads pods (termination messages) and tenants' Secrets without a cache, so the manager
	// needs neither list nor watch on them.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Stores    *Stores
	Jobs      JobSettings
	Metrics   *Metrics // nil records nothing
	// Prices prices the usage written to status; nil prices nothing, so every cost reads as unknown.
	Prices *price.Table
}

// jobStateChanged passes an engine Job that finished (or failed) and one that is gone, never a Job's
// creation or progress: the pass that created a Job wrote that it runs. A Job first seen finished (a
// relist) passes too. The AgentSession and ResumePlan controllers watch their Jobs through it.
var jobStateChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return jobs.StateOf(e.Object.(*batchv1.Job)) != jobs.Running },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return jobs.StateOf(e.ObjectOld.(*batchv1.Job)) != jobs.StateOf(e.ObjectNew.(*batchv1.Job))
	},
}

// jobStep is where an engine Job stands after ensureJob.
type jobStep struct {
	job     *batchv1.Job
	started bool // created in this pass
	state   jobs.State
}

// ensureJob gets the Job named like desired, creating it when absent. A Job another pass (or a
// manager before a restart) created is found by its deterministic name, never created twice.
func (d *Deps) ensureJob(ctx context.Context, owner client.Object, desired *batchv1.Job) (jobStep, error) {
	var job batchv1.Job
	err := d.Get(ctx, client.ObjectKeyFromObject(desired), &job)
	switch {
	case err == nil:
		d.Metrics.jobFinished(&job, jobs.StateOf(&job))
		return jobStep{job: &job, state: jobs.StateOf(&job)}, nil
	case !apierrors.IsNotFound(err):
		return jobStep{}, err
	}
	if err := d.Create(ctx, desired); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return jobStep{}, d.jobNameTaken(ctx, owner, desired)
		}
		return jobStep{}, fmt.Errorf("creating Job %s: %w", desired.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Created engine Job", "job", desired.Name, "purpose", desired.Labels[jobs.LabelPurpose])
	d.Recorder.Eventf(owner, desired, corev1.EventTypeNormal, "JobStarted", "Start", "Started %s Job %s", desired.Labels[jobs.LabelPurpose], desired.Name)
	return jobStep{job: desired, started: true, state: jobs.Running}, nil
}

// jobNameTaken explains a Job name the cache did not hold but the API server has: most often the cache
// lagging behind an earlier create of the owner's (a quiet requeue), else a Job the operator did not
// make, which the cache (CacheOptions) does not see: an error naming it and what to do, retried with
// the controller's backoff rather than every conflictRequeue.
func (d *Deps) jobNameTaken(ctx context.Context, owner client.Object, desired *batchv1.Job) error {
	var existing batchv1.Job
	if err := d.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), &existing); err != nil {
		return errRequeue // gone again, or unreadable: the next pass decides
	}
	if metav1.IsControlledBy(&existing, owner) {
		return errRequeue
	}
	d.Recorder.Eventf(owner, &existing, corev1.EventTypeWarning, ReasonJobNameTaken, "Start",
		"Job %s exists and was not made by agentrewind for this object: delete or rename it", desired.Name)
	kind := "object"
	if gvk, err := apiutil.GVKForObject(owner, d.Scheme); err == nil {
		kind = gvk.Kind
	}
	return fmt.Errorf("job %s exists and was not made by agentrewind for %s %s: delete or rename it", desired.Name, kind, owner.GetName())
}

// ReasonJobNameTaken: a Job the operator did not make holds the name of one it must create.
const ReasonJobNameTaken = "JobNameTaken"

// markRunning writes, while an engine Job runs, Reconciling with running, or with why its pod cannot
// start (an image that cannot be pulled, a Secret or key that does not exist), which the kubelet retries
// while the Job says it runs until its deadline. The manager does not watch pods, so it looks again every
// Jobs.StuckCheck; a Job created in this pass has no pod to look at yet.
func (d *Deps) markRunning(ctx context.Context, conds *[]metav1.Condition, generation int64, step jobStep, running string) (ctrl.Result, error) {
	msg := running
	if !step.started && d.Jobs.StuckCheck > 0 {
		stuck, err := jobs.Stuck(ctx, d.APIReader, step.job)
		if err != nil {
			return ctrl.Result{}, err
		}
		if stuck != "" {
			msg = fmt.Sprintf("%s Job %s waits: %s; it starts once that is fixed", step.job.Labels[jobs.LabelPurpose], step.job.Name, stuck)
		}
	}
	conditions.MarkReconciling(conds, generation, v1alpha1.ReasonJobRunning, msg)
	return ctrl.Result{RequeueAfter: d.Jobs.StuckCheck}, nil
}

// failure is what a failed Job says about why, from its result, its summary, or Kubernetes.
type failure struct {
	reason  task.FailureReason // "" when the engine said nothing
	message string
}

// failureOf reads the engine's failure from a report, or the Job's own Failed condition.
func failureOf(job *batchv1.Job, rep jobs.Report) failure {
	switch {
	case rep.Result != nil && rep.Result.Failure != nil:
		return failure{rep.Result.Failure.Reason, rep.Result.Failure.Message}
	case rep.Summary != nil && rep.Summary.Outcome == task.Failed:
		return failure{rep.Summary.Reason, rep.Summary.Message}
	}
	msg := jobs.FailedMessage(job)
	if rep.Problem != "" {
		msg = rep.Problem + "; the Job " + msg
	}
	return failure{message: msg}
}

// retryable says whether running the Job again may help: the engine said the failure may pass, or the
// session was not in the store yet.
func (f failure) retryable() bool {
	return f.reason != "" && (f.reason.Retryable() || f.reason == task.ReasonSessionNotFound)
}

func (f failure) String() string {
	if f.reason == "" {
		return f.message
	}
	return string(f.reason) + ": " + f.message
}

// retryLater deletes a Job that failed for a passing reason once RetryAfter has gone by since it
// failed, so the next pass runs it again under the same name; until then it waits.
func (d *Deps) retryLater(ctx context.Context, job *batchv1.Job) (ctrl.Result, error) {
	failedAt := job.CreationTimestamp.Time
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			failedAt = c.LastTransitionTime.Time
		}
	}
	if wait := failedAt.Add(d.Jobs.RetryAfter).Sub(d.Clock.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if err := d.Delete(ctx, job, client.PropagationPolicy("Background")); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("deleting failed Job %s to run it again: %w", job.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted failed engine Job to run it again", "job", job.Name)
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

// failedRun handles a finished Job that failed or left no usable report, for the conditions conds of
// owner at generation gen: a failure that may pass runs the Job again after RetryAfter; any other
// stalls owner with reason stalled, and an event of action says why. handled is false when the Job
// succeeded with a result to apply. what names the Job in messages ("resume-plan Job").
func (d *Deps) failedRun(ctx context.Context, owner client.Object, conds *[]metav1.Condition, gen int64, step jobStep, rep jobs.Report,
	what, stalled, action string) (res ctrl.Result, handled bool, err error) {
	job := step.job
	failed := step.state == jobs.Failed || (rep.Result != nil && rep.Result.Outcome == task.Failed) ||
		(rep.Summary != nil && rep.Summary.Outcome == task.Failed)
	switch {
	case failed:
		f := failureOf(job, rep)
		msg := fmt.Sprintf("%s %s failed: %s", what, job.Name, f)
		if f.retryable() {
			conditions.MarkReconciling(conds, gen, string(f.reason), msg+"; it runs again after "+d.Jobs.RetryAfter.String())
			res, err = d.retryLater(ctx, job)
			return res, true, err
		}
		conditions.MarkStalled(conds, gen, stalled, msg)
		d.Recorder.Eventf(owner, job, corev1.EventTypeWarning, stalled, action, "%s", apimap.Message(msg))
		return ctrl.Result{}, true, reconcile.TerminalError(errors.New(msg))
	case rep.ProblemReason != "":
		conditions.MarkStalled(conds, gen, rep.ProblemReason, rep.Problem)
		d.Recorder.Eventf(owner, job, corev1.EventTypeWarning, rep.ProblemReason, action, "%s", apimap.Message(rep.Problem))
		return ctrl.Result{}, true, reconcile.TerminalError(errors.New(rep.Problem))
	}
	return ctrl.Result{}, false, nil
}
