package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/proxyargs"
)

// recordPurpose names an AgentSession's recording Job: its agent beside the rewind proxy in record
// mode, which commits the run to the store under spec.sessionID when the agent exits.
const recordPurpose = "record"

// wantsRecording says whether the spec asks the operator to record the session: an agent to run, and
// no parent (a fork's child is recorded by its ForkRun's proxy).
func wantsRecording(s *v1alpha1.AgentSession) bool {
	return s.Spec.Agent.Image != "" && s.Spec.ParentRef.Name == ""
}

// recordJobName names the session's one recording Job: deterministic per AgentSession (its UID, so
// one deleted and created again under the same name may record again) and session id. The
// generation is left out: a spec changed while the agent runs must not start a second recording.
func recordJobName(s *v1alpha1.AgentSession) string {
	return jobs.Name(s.Name, recordPurpose, string(s.UID), s.Spec.SessionID)
}

// recordProvider is the model API the recording speaks: OpenAI's when only its key is given.
func recordProvider(k v1alpha1.ProviderKeys) string {
	if k.OpenAI.Name != "" && k.Anthropic.Name == "" {
		return "openai"
	}
	return "anthropic"
}

// recordJob builds the recording Job on the shared engine Job (name, owner, labels, backoffLimit 0,
// TTL, deadline, restricted security, store credentials): its engine container becomes the proxy in
// record mode with the provider keys, the agent runs beside it, with its workspace claim if it has one.
func (r *AgentSessionReconciler) recordJob(s *v1alpha1.AgentSession, loc Location) (*batchv1.Job, error) {
	spec := r.Jobs.proxySpec()
	spec.Owner = s
	spec.Purpose = recordPurpose
	spec.Inputs = []string{string(s.UID), s.Spec.SessionID}
	spec.Command = []string{"proxy", proxyargs.Flag(proxyargs.FlagMode), "record"}
	tools, err := liveToolArgs(s.Spec.Agent.Tools)
	if err != nil {
		return nil, err
	}
	mcpServers, err := mcpServerArgs(s.Spec.Agent.MCPServers, true)
	if err != nil {
		return nil, err
	}
	tools = append(tools, mcpServers...)
	spec.Args = append(append(append(append(proxyListenArgs(), r.Stores.jobArgs(loc, s.Spec.SessionID)...),
		proxyargs.Flag(proxyargs.FlagProvider), recordProvider(s.Spec.ProviderKeys)), r.Jobs.Upstreams.proxyArgs()...), tools...)
	r.Stores.jobStore(&spec, loc)
	spec.Env = append(spec.Env, providerKeyEnv(s.Spec.ProviderKeys)...)
	job, err := jobs.Build(spec, r.Scheme)
	if err != nil {
		return nil, err
	}
	if job.Name != recordJobName(s) {
		return nil, fmt.Errorf("recording Job %s is not named %s", job.Name, recordJobName(s)) // the two must agree: one is looked up, the other created
	}
	p, err := newAgentPod(job, s.Spec.Agent, s.Spec.ProviderKeys)
	if err != nil {
		return nil, err
	}
	p.mountWorkspace(s.Spec.Agent.Workspace, false)
	p.place()
	return job, nil
}

// record runs the session's recording Job when the spec asks for one and the session is not in the
// store yet, and follows it. proceed is true when verification may go on: no recording was asked
// for, the session was verified or in the store already, or the recording Job completed (the proxy
// committed the session before it exited).
func (r *AgentSessionReconciler) record(ctx context.Context, s *v1alpha1.AgentSession) (proceed bool, again time.Duration, err error) {
	if !wantsRecording(s) || meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.SessionConditionVerified) {
		return true, 0, nil
	}
	name := recordJobName(s)
	var job batchv1.Job
	err = r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &job)
	switch {
	case err == nil:
		r.Metrics.jobFinished(&job, jobs.StateOf(&job))
		return r.followRecording(ctx, s, &job)
	case !apierrors.IsNotFound(err):
		return false, 0, err
	}
	if recordingFailed(s, name) {
		stillStalled(s) // its Job is gone after its TTL; a failed recording is never run again
		return false, 0, nil
	}
	// No Job, or none any more: a session in the store (recorded by this Job before its TTL ran out,
	// or from anywhere else) is never recorded again.
	loc := r.Stores.LocationOf(s)
	stored, err := r.sessionStored(ctx, loc, s.Spec.SessionID)
	if err != nil {
		conditions.MarkReconciling(&s.Status.Conditions, s.Generation, v1alpha1.ReasonStorageUnavailable,
			fmt.Sprintf("cannot tell whether session %s is in %s yet: %v", s.Spec.SessionID, loc, err))
		return false, 0, err
	}
	if stored {
		return true, 0, nil
	}
	other, err := r.recordedElsewhere(ctx, s, loc)
	if err != nil {
		return false, 0, err
	}
	if other != "" {
		conditions.MarkReconciling(&s.Status.Conditions, s.Generation, v1alpha1.ReasonRecording,
			fmt.Sprintf("AgentSession %s records session %s in %s: this one verifies that recording once it is stored", other, s.Spec.SessionID, loc))
		return false, recordingCheck, nil // woken by the other's Job too, unless the other is gone first
	}
	desired, err := r.recordJob(s, loc)
	if se := (*specError)(nil); errors.As(err, &se) {
		conditions.MarkStalled(&s.Status.Conditions, s.Generation, v1alpha1.ReasonInvalidSpec, se.Error())
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	step, err := r.ensureJob(ctx, s, desired)
	if err != nil {
		return false, 0, err
	}
	return r.followRecording(ctx, s, step.job)
}

// sessionStored says whether anything of the session is in the store: a committed session, or an
// upload that stopped before meta.json, which a recording must not overwrite either.
func (r *AgentSessionReconciler) sessionStored(ctx context.Context, loc Location, id string) (bool, error) {
	st, err := r.Stores.Open(ctx, loc)
	if err != nil {
		return false, err
	}
	objs, err := st.objects.List(ctx, st.sessions.Layout().SessionsPrefix()+id+"/")
	return len(objs) > 0, err
}

// followRecording writes where the recording Job stands: running, completed (proceed to verify), or
// failed (stalled, with what the Job and its containers said).
//
// While the Job runs it looks at its pod every recordingCheck: a container that cannot start (a
// missing Secret or key, an image that cannot be pulled) is said in Reconciling, since the kubelet
// retries and the Job would otherwise say "running" until its deadline, doing nothing.
func (r *AgentSessionReconciler) followRecording(ctx context.Context, s *v1alpha1.AgentSession, job *batchv1.Job) (bool, time.Duration, error) {
	switch jobs.StateOf(job) {
	case jobs.Succeeded:
		if s.Status.AgentEnd.How == "" {
			ts, err := jobs.Terminations(ctx, r.APIReader, job)
			if err != nil {
				return false, 0, err
			}
			if end, ok := agentEndOf(job, ts); ok {
				s.Status.AgentEnd = end
			}
		}
		return true, 0, nil
	case jobs.Running:
		if recordingFailed(s, job.Name) {
			// Failed on a crash-looping container in an earlier pass, which this one sees: stop it.
			stillStalled(s)
			return false, 0, deleteRunningJob(ctx, r.Client, r.Recorder, s, client.ObjectKeyFromObject(job))
		}
		// The Job's own agent image: a spec changed since does not change the run.
		msg := fmt.Sprintf("recording Job %s is running agent %s", job.Name, job.Spec.Template.Spec.Containers[0].Image)
		crash, err := jobs.Crashing(ctx, r.APIReader, job)
		if err != nil {
			return false, 0, err
		}
		if crash != nil {
			return false, time.Second, r.stopCrashingRecording(ctx, s, job, crash)
		}
		stuck, err := jobs.Stuck(ctx, r.APIReader, job)
		if err != nil {
			return false, 0, err
		}
		if stuck != "" {
			msg = fmt.Sprintf("recording Job %s waits: %s; the pod starts once that is fixed", job.Name, stuck)
		}
		conditions.MarkReconciling(&s.Status.Conditions, s.Generation, v1alpha1.ReasonRecording, msg)
		return false, recordingCheck, nil
	}
	if recordingFailed(s, job.Name) {
		stillStalled(s)
		return false, 0, nil
	}
	ts, err := jobs.Terminations(ctx, r.APIReader, job)
	if err != nil {
		return false, 0, err
	}
	// An agent that failed, was killed or ran out of time is a run to judge, not a failed recording,
	// once the proxy committed what it did: its ResumePlan says what is left. Once seen, its end is
	// kept: the pod may be gone by a later pass.
	end, ok := agentEndOf(job, ts)
	if !ok && s.Status.AgentEnd.How != "" {
		end, ok = s.Status.AgentEnd, true
	}
	if ok && end.How != v1alpha1.AgentFinished {
		committed, err := r.sessionCommitted(ctx, s)
		if err != nil {
			return false, 0, err
		}
		if committed {
			if s.Status.AgentEnd.How == "" {
				r.Recorder.Eventf(s, job, corev1.EventTypeWarning, v1alpha1.ReasonAgentStoppedShort, "Record",
					"the agent of recording Job %s ended %s before the run finished; the proxy committed what it did, and the ResumePlan judges what is left (kubectl logs -n %s job/%s -c %s)",
					job.Name, agentEndWords(end), job.Namespace, job.Name, AgentContainer)
			}
			s.Status.AgentEnd = end
			return true, 0, nil
		}
	}
	msg := recordingFailure(job, ts)
	conditions.MarkStalled(&s.Status.Conditions, s.Generation, v1alpha1.ReasonRecordingFailed, msg)
	r.Recorder.Eventf(s, job, corev1.EventTypeWarning, v1alpha1.ReasonRecordingFailed, "Record", "%s", apimap.Message(msg))
	ctrl.LoggerFrom(ctx).Info("Recording failed", "job", job.Name, "sessionID", s.Spec.SessionID)
	return false, 0, reconcile.TerminalError(errors.New(msg))
}

// stopCrashingRecording fails a recording whose pod has a container that keeps failing (the proxy
// cannot record: a Secret key that holds no key, a store it cannot reach): the kubelet would restart
// it until the Job's deadline. The session stalls with the container's last line (the proxy's; the
// agent's log is pointed to, not quoted), and the next pass, which sees it stalled, deletes the Job.
func (r *AgentSessionReconciler) stopCrashingRecording(ctx context.Context, s *v1alpha1.AgentSession, job *batchv1.Job, crash *jobs.Crash) error {
	msg := fmt.Sprintf("recording Job %s failed: %s", job.Name, crash)
	switch {
	case crash.Container == AgentContainer:
		msg += "; the agent's log says why"
	case crash.LastLine != "":
		msg += ": " + crash.LastLine
	}
	msg += "; the Job is deleted rather than left to run until its deadline"
	conditions.MarkStalled(&s.Status.Conditions, s.Generation, v1alpha1.ReasonRecordingFailed, msg)
	r.Recorder.Eventf(s, job, corev1.EventTypeWarning, v1alpha1.ReasonRecordingFailed, "Record", "%s", apimap.Message(msg))
	ctrl.LoggerFrom(ctx).Info("Failed a recording whose container crash-loops", "job", job.Name, "container", crash.Container, "exitCode", crash.ExitCode)
	return nil
}

// recordingFailed says whether the session stalled on this recording Job already.
func recordingFailed(s *v1alpha1.AgentSession, job string) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonRecordingFailed && strings.Contains(c.Message, job)
}

// stillStalled keeps a failed recording's Stalled condition for the current generation: said once,
// it keeps its time and message, and the event is not repeated on every pass.
func stillStalled(s *v1alpha1.AgentSession) {
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled)
	conditions.MarkStalled(&s.Status.Conditions, s.Generation, v1alpha1.ReasonRecordingFailed, c.Message)
}

// recordingFailure says why a recording Job failed: the Job's own condition, then every container
// that exited non-zero, with the proxy's termination message. The agent's is left out: it is the end of
// the agent's own log, which may print any secret the agent was given, and status and events are read
// far more widely than the pod's log; the message points there instead.
func recordingFailure(job *batchv1.Job, ts []jobs.Termination) string {
	var b strings.Builder
	fmt.Fprintf(&b, "recording Job %s failed", job.Name)
	if m := jobs.FailedMessage(job); m != "" {
		fmt.Fprintf(&b, " (%s)", m)
	}
	for _, t := range ts {
		if t.ExitCode == 0 {
			continue
		}
		fmt.Fprintf(&b, "; %s exited %d", t.Container, t.ExitCode)
		if t.Reason != "" {
			fmt.Fprintf(&b, " (%s)", t.Reason)
		}
		if t.Container == AgentContainer {
			fmt.Fprintf(&b, ": its log says why (kubectl logs -n %s job/%s -c %s)", job.Namespace, job.Name, AgentContainer)
			continue
		}
		if m := strings.TrimSpace(t.Message); m != "" {
			fmt.Fprintf(&b, ": %s", m)
		}
	}
	return b.String()
}

// recordingCheck is how often a running recording's pod is looked at for a container that cannot start.
const recordingCheck = 15 * time.Second

// recordingStopRequeue is how soon a deleted session looks again whether its recording Job is gone
// (the Job's deletion wakes it too).
const recordingStopRequeue = 5 * time.Second

// recordedElsewhere names another AgentSession that records the same session id into the same
// store, which this one then leaves the recording to: two proxies committing one session id would
// overwrite each other's run. The other records when its recording Job runs (read from the API
// server, not the cache, which may not hold a Job just created) or is still there while the other is
// deleted (its pod is being stopped, and the proxy commits as it stops), or when it has no Job yet,
// wants one and was created first (its name decides a tie), unless it stalled.
func (r *AgentSessionReconciler) recordedElsewhere(ctx context.Context, s *v1alpha1.AgentSession, loc Location) (string, error) {
	var list v1alpha1.AgentSessionList
	if err := r.List(ctx, &list, client.MatchingFields{sessionIDField: s.Spec.SessionID}); err != nil {
		return "", err
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == s.UID || o.Spec.ParentRef.Name != "" || r.Stores.LocationOf(o).String() != loc.String() {
			continue
		}
		deleting := !o.DeletionTimestamp.IsZero()
		var job batchv1.Job
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: recordJobName(o)}, &job)
		switch {
		case err == nil:
			// A deleted session's Job is being stopped, and its proxy commits when it stops.
			if jobs.StateOf(&job) == jobs.Running || deleting {
				return o.Namespace + "/" + o.Name, nil
			}
		case !apierrors.IsNotFound(err):
			return "", err
		case !deleting && wantsRecording(o) && createdFirst(o, s) && !meta.IsStatusConditionTrue(o.Status.Conditions, v1alpha1.ConditionStalled):
			return o.Namespace + "/" + o.Name, nil
		}
	}
	return "", nil
}

// createdFirst says whether a was created before b, the name deciding a tie.
func createdFirst(a, b *v1alpha1.AgentSession) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// sharersOfRecording maps a recording Job that finished or went away to the other AgentSessions of
// its session id, which may be waiting for it (recordedElsewhere); its owner hears of it through Owns.
func (r *AgentSessionReconciler) sharersOfRecording(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[jobs.LabelPurpose] != recordPurpose {
		return nil
	}
	owner := metav1.GetControllerOf(o)
	if owner == nil {
		return nil
	}
	var s v1alpha1.AgentSession
	if err := r.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: owner.Name}, &s); err != nil || s.UID != owner.UID {
		return nil
	}
	var list v1alpha1.AgentSessionList
	if err := r.List(ctx, &list, client.MatchingFields{sessionIDField: s.Spec.SessionID}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, other := range list.Items {
		if other.UID != s.UID {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&other)})
		}
	}
	return out
}

// stopRecording deletes the session's recording Job, its pods first (foreground), and says whether it
// is gone: read from the API server, since a Job the cache does not hold yet may be running.
// Looked for whatever the spec says now: spec.agent taken out while the agent is recorded leaves the
// Job running.
func (r *AgentSessionReconciler) stopRecording(ctx context.Context, s *v1alpha1.AgentSession) (gone bool, err error) {
	var job batchv1.Job
	err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: recordJobName(s)}, &job)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	case !job.DeletionTimestamp.IsZero():
		return false, nil
	}
	if err := r.Delete(ctx, &job, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("deleting recording Job %s: %w", job.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted the recording Job before the session's stored objects", "job", job.Name)
	r.Recorder.Eventf(s, &job, corev1.EventTypeNormal, "RecordingStopped", "Delete",
		"Stopped recording Job %s; the session's stored objects go once its pod is gone", job.Name)
	return false, nil
}
