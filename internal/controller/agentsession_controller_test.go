package controller

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/minio/minio-go/v7"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

func newSession(name, id string) *v1alpha1.AgentSession {
	return &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.AgentSessionSpec{SessionID: id}}
}

func (e *env) session(name string) *v1alpha1.AgentSession {
	e.t.Helper()
	var s v1alpha1.AgentSession
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &s); err != nil {
		e.t.Fatal(err)
	}
	return &s
}

// waitCondition waits until obj's condition typ has status and reason for its current generation.
func (e *env) waitCondition(obj client.Object, conds func() []metav1.Condition, typ string, st metav1.ConditionStatus, reason string) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s %s=%s (%s)", obj.GetName(), typ, st, reason), func() (bool, string) {
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(conds(), typ)
		if c == nil {
			return false, fmt.Sprintf("no %s condition in %+v", typ, conds())
		}
		return c.Status == st && c.Reason == reason && c.ObservedGeneration == obj.GetGeneration(), fmt.Sprintf("%+v", *c)
	})
}

func (e *env) waitSession(name, typ string, st metav1.ConditionStatus, reason string) *v1alpha1.AgentSession {
	e.t.Helper()
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
	e.waitCondition(s, func() []metav1.Condition { return s.Status.Conditions }, typ, st, reason)
	return s
}

// kstatusOf is the health Argo CD and Flux compute for an object.
func (e *env) kstatusOf(obj client.Object, kind string) status.Status {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(obj), u); err != nil {
		e.t.Fatal(err)
	}
	res, err := status.Compute(u)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Status
}

// eventReasons lists the reasons of the events about an object.
func (e *env) eventReasons(name string) []string {
	out := e.eventsAbout(name, func(ev eventsv1.Event) string { return ev.Reason })
	slices.Sort(out)
	return slices.Compact(out)
}

// eventMessages are the notes of the events about the object name, in the order listed.
func (e *env) eventMessages(name string) []string {
	return e.eventsAbout(name, func(ev eventsv1.Event) string { return ev.Note })
}

func (e *env) eventsAbout(name string, field func(eventsv1.Event) string) []string {
	e.t.Helper()
	var list eventsv1.EventList
	if err := e.c.List(e.ctx, &list, client.InNamespace(e.ns)); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Name == name {
			out = append(out, field(ev))
		}
	}
	return out
}

var jobNameRE = regexp.MustCompile(`^[a-z0-9.-]+-verify-[0-9a-f]{10}$`)

// TestVerifyWritesTheRecordingAndJudgesTheSession is the happy path end to end: the verify Job is built
// to the contract, the real engine verifies the session from the store, the recording lands in status,
// the ResumePlan is created and judged by its own Job, and the session mirrors the verdict.
func TestVerifyWritesTheRecordingAndJudgesTheSession(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "run-1", strings.Repeat("result ", 40), false))
	e.startManager(nil)
	e.create(newSession("run-1", "run-1"))

	job := e.waitJob("run-1", "verify")
	checkJobContract(t, job, e.ns)
	if got, want := job.Spec.Template.Spec.Containers[0].Args, []string{"engine", "verify", "--store", "s3://" + testBucket + "/" + testPrefix + "/" + e.ns,
		"--session-id", "run-1", "--endpoint", "http://" + s3.Endpoint}; !cmp.Equal(got, want) {
		t.Errorf("verify args (-want +got):\n%s", cmp.Diff(want, got))
	}
	e.waitSession("run-1", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)
	if out := e.runJob(job); !strings.Contains(out, `"headline":"intact"`) {
		t.Fatalf("engine verify:\n%s", out)
	}

	s := e.waitSession("run-1", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
	want := v1alpha1.SessionRecording{
		EventsHash: s.Status.Recording.EventsHash, LogState: v1alpha1.LogClosed,
		Events: new(int64(4)), Steps: new(int64(4)), ModelCalls: new(int64(1)), ToolCalls: new(int64(1)), Blobs: new(int64(1)),
		Bytes: s.Status.Recording.Bytes, AddedBytes: s.Status.Recording.Bytes, // not a fork: all of it is its own
		Usage: v1alpha1.Usage{InputTokens: new(int64(900)), OutputTokens: new(int64(120)), CacheCreationInputTokens: new(int64(100)),
			CacheReadInputTokens: new(int64(500)), TotalTokens: new(int64(1020)), CostMicroUSD: new(int64(4100))},
		SchemaVersion: session.CurrentSchemaVersion, RedactedSecrets: new(int64(0)), RedactedPatterns: new(int32(0)), Vault: v1alpha1.VaultAbsent,
	}
	if d := cmp.Diff(want, s.Status.Recording); d != "" {
		t.Errorf("recording (-want +got):\n%s", d)
	}
	meta, err := openStore(t, e.storeKey()).ReadMeta(e.ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if s.Status.Recording.EventsHash != meta.EventsHash || s.Status.Recording.Bytes == nil || *s.Status.Recording.Bytes <= 0 {
		t.Errorf("eventsHash %q (stored %q), bytes %v", s.Status.Recording.EventsHash, meta.EventsHash, s.Status.Recording.Bytes)
	}
	wantConds := []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonVerified},
		{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonVerified},
		{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonVerified},
		{Type: v1alpha1.SessionConditionVerified, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonVerified},
	}
	condOpts := cmp.Options{cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime", "Message", "ObservedGeneration"),
		cmpopts.SortSlices(func(a, b metav1.Condition) bool { return a.Type < b.Type })}
	if d := cmp.Diff(wantConds, s.Status.Conditions, condOpts); d != "" {
		t.Errorf("conditions (-want +got):\n%s", d)
	}
	if got := e.kstatusOf(s, "AgentSession"); got != status.CurrentStatus {
		t.Errorf("kstatus of a verified session = %s, want Current", got)
	}
	if !slices.Contains(s.Finalizers, SessionFinalizer) {
		t.Errorf("finalizers %v, want %s", s.Finalizers, SessionFinalizer)
	}

	// The ResumePlan of the session, owned by it, judged by its own Job over the verified log.
	var rp v1alpha1.ResumePlan
	e.eventually("the session's ResumePlan", func() (bool, string) {
		err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "run-1"}, &rp)
		return err == nil, fmt.Sprint(err)
	})
	if ref := metav1.GetControllerOf(&rp); ref == nil || ref.UID != s.UID || rp.Spec.SessionRef.Name != "run-1" {
		t.Errorf("ResumePlan owner %+v, sessionRef %q", ref, rp.Spec.SessionRef.Name)
	}
	planJob := e.waitJob("run-1", "resume-plan")
	checkJobContract(t, planJob, e.ns)
	if out := e.runJob(planJob); !strings.Contains(out, `"outcome":"Succeeded"`) {
		t.Fatalf("engine resume-plan:\n%s", out)
	}
	e.waitCondition(&rp, func() []metav1.Condition { return rp.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerdictComputed)
	// No ledger and no workspace: nothing can be resumed against a plan, so the run is collectible.
	wantPlan := v1alpha1.ResumePlanStatus{
		Verdict: v1alpha1.VerdictUnresumable, Reason: "NoIntent", ResidualSteps: new(int32(0)), Stop: v1alpha1.RunInterrupted,
		Reachability:   v1alpha1.ReachabilityStatus{State: v1alpha1.Collectible, Reason: "UnresumableCollectible"},
		Rewind:         v1alpha1.RewindPlan{Decision: v1alpha1.DecisionNoRewind, Reason: "NotAGroundTruthStop"},
		Convergence:    v1alpha1.Convergence{Verdict: v1alpha1.ConvergenceInsufficient, Reason: "NoResidualHistory", Window: new(int32(8)), Observations: new(int32(0)), Changes: new(int32(0))},
		Drift:          v1alpha1.PlanDrift{Verdict: v1alpha1.DriftNoPlan},
		Reconciliation: v1alpha1.Reconciliation{Promised: new(int32(0)), MarkedDone: new(int32(0)), Evidenced: new(int32(0))},
		Evidence:       v1alpha1.PlanEvidence{EventsHash: meta.EventsHash, Plan: v1alpha1.PlanAbsent},
		EvaluatedAt:    &metav1.Time{Time: testNow},
	}
	planOpts := cmp.Options{cmpopts.IgnoreFields(v1alpha1.ResumePlanStatus{}, "Conditions", "ObservedGeneration", "Message"),
		cmpopts.IgnoreFields(v1alpha1.ReachabilityStatus{}, "Message"), cmpopts.IgnoreFields(v1alpha1.RewindPlan{}, "Message"),
		cmpopts.IgnoreFields(v1alpha1.Convergence{}, "Message"), cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) })}
	if d := cmp.Diff(wantPlan, rp.Status, planOpts); d != "" {
		t.Errorf("ResumePlan status (-want +got):\n%s", d)
	}

	// The session mirrors the plan's verdict and reachability.
	e.eventually("the session to mirror the verdict", func() (bool, string) {
		s = e.session("run-1")
		return s.Status.ResumeVerdict == v1alpha1.VerdictUnresumable && s.Status.Reachability.State == v1alpha1.Collectible,
			fmt.Sprintf("%s %+v", s.Status.ResumeVerdict, s.Status.Reachability)
	})
	if d := cmp.Diff(rp.Status.Reachability, s.Status.Reachability); d != "" {
		t.Errorf("mirrored reachability (-plan +session):\n%s", d)
	}
	e.eventually("the events a user sees", func() (bool, string) {
		got := e.eventReasons("run-1")
		return slices.Contains(got, "JobStarted") && slices.Contains(got, v1alpha1.ReasonVerified) &&
			slices.Contains(got, "ResumePlanCreated") && slices.Contains(got, "VerdictChanged"), fmt.Sprint(got)
	})
	if n := len(e.jobsOf("run-1", "verify")); n != 1 {
		t.Errorf("%d verify Jobs after the session settled, want 1", n)
	}
}

// checkJobContract checks what every engine Job promises: a deterministic name, the owner, no retries,
// a TTL, restricted pod security, the termination message from a file, its UID from the label the API
// server puts on its pods, and credentials only as Secret key references.
func checkJobContract(t *testing.T, job *batchv1.Job, ns string) {
	t.Helper()
	if len(job.Name) > 63 || !strings.HasPrefix(job.Name, job.Labels[jobs.LabelParent]+"-"+job.Labels[jobs.LabelPurpose]+"-") {
		t.Errorf("Job name %q", job.Name)
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.Name != job.Labels[jobs.LabelParent] {
		t.Errorf("Job %s has controller %+v", job.Name, ref)
	}
	if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 || job.Spec.TTLSecondsAfterFinished == nil || *job.Spec.TTLSecondsAfterFinished != 3600 {
		t.Errorf("backoffLimit %v, ttl %v", job.Spec.BackoffLimit, job.Spec.TTLSecondsAfterFinished)
	}
	if got := job.Spec.Template.Labels[batchv1.ControllerUidLabel]; got != string(job.UID) || got == "" {
		t.Errorf("the pod template label %s = %q, want the Job's UID %s", batchv1.ControllerUidLabel, got, job.UID)
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	wantSC := &corev1.SecurityContext{RunAsNonRoot: new(true), ReadOnlyRootFilesystem: new(true), AllowPrivilegeEscalation: new(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if d := cmp.Diff(wantSC, c.SecurityContext); d != "" {
		t.Errorf("container security context (-want +got):\n%s", d)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
		pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken || pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod security %+v, automount %v, restart %s", pod.SecurityContext, pod.AutomountServiceAccountToken, pod.RestartPolicy)
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageReadFile || c.Image != "registry.example/agentrewind:test" {
		t.Errorf("termination message policy %s, image %s", c.TerminationMessagePolicy, c.Image)
	}
	env := map[string]corev1.EnvVar{}
	for _, v := range c.Env {
		env[v.Name] = v
	}
	if f := env[jobs.EnvJobUID].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/controller-uid']" {
		t.Errorf("JOB_UID %+v", env[jobs.EnvJobUID])
	}
	if env[jobs.EnvTmpDir].Value != "/tmp" || !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" }) {
		t.Errorf("TMPDIR %+v, mounts %+v", env[jobs.EnvTmpDir], c.VolumeMounts)
	}
	for _, name := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if v := env[name]; v.Value != "" || v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s must come from a Secret key reference, not a value: %+v", name, v)
		}
	}
	if raw := fmt.Sprintf("%+v", job); strings.Contains(raw, s3.SecretKey) {
		t.Errorf("Job %s holds the store's secret key", job.Name)
	}
}

// TestACorruptSessionStallsWithTheReason tampers with a blob at rest: the real engine finds the digest
// mismatch, the session is Stalled with DigestMismatch (kstatus Failed), and its plan is not judged.
func TestACorruptSessionStallsWithTheReason(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "run-bad", strings.Repeat("corrupt me ", 40), false))
	c, err := s3.Client()
	if err != nil {
		t.Fatal(err)
	}
	blob := ""
	for _, k := range keys(t, e.storeKey("blobs")+"/") {
		blob = k
	}
	if _, err := c.PutObject(e.ctx, testBucket, blob, strings.NewReader("tampered"), 8, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startManager(nil)
	e.create(newSession("run-bad", "run-bad"))
	e.runJob(e.waitJob("run-bad", "verify"))

	s := e.waitSession("run-bad", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonDigestMismatch)
	v := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SessionConditionVerified)
	if v == nil || v.Status != metav1.ConditionFalse || v.Reason != v1alpha1.ReasonDigestMismatch || !strings.Contains(v.Message, "tampered") {
		t.Errorf("Verified condition %+v", v)
	}
	if !cmp.Equal(s.Status.Recording, v1alpha1.SessionRecording{}) || meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady) {
		t.Errorf("a corrupt session reports a recording %+v or Ready", s.Status.Recording)
	}
	if got := e.kstatusOf(s, "AgentSession"); got != status.FailedStatus {
		t.Errorf("kstatus of a corrupt session = %s, want Failed", got)
	}
	rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: "run-bad", Namespace: e.ns}}
	e.waitCondition(rp, func() []metav1.Condition { return rp.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue, conditions.ReasonSessionNotVerified)
	if n := len(e.jobsOf("run-bad", "resume-plan")); n != 0 {
		t.Errorf("%d resume-plan Jobs for a corrupt session", n)
	}
}

// TestAFailingJobStalls: a Job the engine failed for good (its termination message says why; there is
// no result in the store) and a Job that failed without a word both stall the session as JobFailed.
func TestAFailingJobStalls(t *testing.T) {
	e := newEnv(t)
	e.startManager(nil)
	e.create(newSession("said-why", "said-why"))
	e.create(newSession("said-nothing", "said-nothing"))

	job := e.waitJob("said-why", "verify")
	summary := task.TerminationMessage(&task.Result{APIVersion: task.APIVersion, Task: task.Verify, JobUID: string(job.UID), Outcome: task.Failed,
		Failure: &task.Failure{Reason: task.ReasonInvalidInput, Message: "--session-id is not a valid id"}})
	e.finishJob(job, false, string(summary))
	s := e.waitSession("said-why", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonJobFailed)
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled); !strings.Contains(c.Message, "InvalidInput: --session-id is not a valid id") ||
		!strings.Contains(c.Message, job.Name) {
		t.Errorf("Stalled message %q should carry the engine's reason and the Job's name", c.Message)
	}

	job = e.waitJob("said-nothing", "verify")
	e.finishJob(job, false, "")
	s = e.waitSession("said-nothing", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonJobFailed)
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled); !strings.Contains(c.Message, "backoff limit") {
		t.Errorf("Stalled message %q should carry what Kubernetes said", c.Message)
	}
	e.eventually("a JobFailed event", func() (bool, string) {
		got := e.eventReasons("said-nothing")
		return slices.Contains(got, v1alpha1.ReasonJobFailed), fmt.Sprint(got)
	})
	// Settled: the failed Job is not run again for the same generation.
	time.Sleep(time.Second)
	if n := len(e.jobsOf("said-why", "verify")); n != 1 {
		t.Errorf("%d verify Jobs after a permanent failure, want 1", n)
	}
}

// TestAMissingOrCorruptResultStalls: a Job that succeeded but left nothing readable stalls the session
// with ResultMissing or ResultCorrupt; no status is guessed from a headline.
func TestAMissingOrCorruptResultStalls(t *testing.T) {
	e := newEnv(t)
	e.startManager(nil)
	e.create(newSession("no-result", "no-result"))
	e.create(newSession("headline-only", "headline-only"))
	e.create(newSession("garbled", "garbled"))

	e.finishJob(e.waitJob("no-result", "verify"), true, "")
	s := e.waitSession("no-result", v1alpha1.ConditionStalled, metav1.ConditionTrue, conditions.ReasonResultMissing)
	if !cmp.Equal(s.Status.Recording, v1alpha1.SessionRecording{}) {
		t.Errorf("recording %+v from a Job without a result", s.Status.Recording)
	}

	job := e.waitJob("headline-only", "verify")
	summary := task.TerminationMessage(&task.Result{APIVersion: task.APIVersion, Task: task.Verify, JobUID: string(job.UID), Outcome: task.Succeeded,
		Verify: &task.VerifyResult{Intact: true, Ended: true}})
	e.finishJob(job, true, string(summary))
	s = e.waitSession("headline-only", v1alpha1.ConditionStalled, metav1.ConditionTrue, conditions.ReasonResultMissing)
	if !cmp.Equal(s.Status.Recording, v1alpha1.SessionRecording{}) || meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.SessionConditionVerified) {
		t.Errorf("a headline was taken for a result: %+v", s.Status)
	}

	job = e.waitJob("garbled", "verify")
	if err := openStore(t, e.storeKey()).PutResult(e.ctx, string(job.UID), []byte(`{"apiVersion":"engine.agentrewind.io/v1","task":"verify"`)); err != nil {
		t.Fatal(err)
	}
	e.finishJob(job, true, "")
	e.waitSession("garbled", v1alpha1.ConditionStalled, metav1.ConditionTrue, conditions.ReasonResultCorrupt)
}

// TestAConflictIsRequeuedAndConverges makes the first status writes fail with 409 Conflict: the
// reconciler requeues and the session still converges to its verified status.
func TestAConflictIsRequeuedAndConverges(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "run-409", strings.Repeat("conflict ", 40), false))
	var conflicts atomic.Int64
	e.startManager(conflictingStatus[*v1alpha1.AgentSession](e.ns, "agentsessions", &conflicts))
	e.create(newSession("run-409", "run-409"))
	e.runJob(e.waitJob("run-409", "verify"))
	s := e.waitSession("run-409", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
	if conflicts.Load() < 4 || s.Status.Recording.Events == nil || *s.Status.Recording.Events != 4 {
		t.Errorf("after %d status writes (3 refused): recording %+v", conflicts.Load(), s.Status.Recording)
	}
	if n := len(e.jobsOf("run-409", "verify")); n != 1 {
		t.Errorf("%d verify Jobs, want 1", n)
	}
}

// TestDeletionRemovesOnlyTheSessionsObjects deletes one of two sessions that share a blob: the
// finalizer removes sessions/<id>/ of that session only, never the shared blob nor the other session.
func TestDeletionRemovesOnlyTheSessionsObjects(t *testing.T) {
	e := newEnv(t)
	shared := strings.Repeat("shared tool output ", 20)
	push(t, e.storeKey(), recordSession(t, "keep", shared, false))
	push(t, e.storeKey(), recordSession(t, "drop", shared, true))
	before := keys(t, e.storeKey()+"/")
	e.startManager(nil)
	e.create(newSession("keep", "keep"))
	e.create(newSession("drop", "drop"))
	e.eventually("the finalizer", func() (bool, string) {
		s := e.session("drop")
		return slices.Contains(s.Finalizers, SessionFinalizer), fmt.Sprint(s.Finalizers)
	})
	if err := e.c.Delete(e.ctx, e.session("drop")); err != nil {
		t.Fatal(err)
	}
	e.eventually("the session to be gone", func() (bool, string) {
		err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "drop"}, &v1alpha1.AgentSession{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	var want []string
	for _, k := range before {
		if !strings.HasPrefix(k, e.storeKey("sessions", "drop")+"/") {
			want = append(want, k)
		}
	}
	if len(want) == len(before) {
		t.Fatalf("fixture: no objects of session drop in %v", before)
	}
	if d := cmp.Diff(want, keys(t, e.storeKey()+"/")); d != "" {
		t.Errorf("store after deleting session drop (-want +got):\n%s", d)
	}
	// Blobs, log segments among them, may be shared with other sessions and forks: the finalizer leaves
	// every one to the blob sweep, the shared tool output too.
	blobsBefore := slices.DeleteFunc(slices.Clone(before), func(k string) bool { return !strings.HasPrefix(k, e.storeKey("blobs")+"/") })
	if d := cmp.Diff(blobsBefore, keys(t, e.storeKey("blobs")+"/")); d != "" || len(blobsBefore) == 0 {
		t.Errorf("blobs after deleting session drop (-before +after):\n%s", d)
	}
}

// TestDeletionWaitsForAnUnavailableStore: a session in a tenant's bucket whose credentials Secret is
// missing keeps its finalizer; once the Secret exists the objects are deleted and the session goes.
func TestDeletionWaitsForAnUnavailableStore(t *testing.T) {
	e := newEnv(t)
	const tenantPrefix = "tenant-x"
	push(t, tenantPrefix, recordSession(t, "tenant-run", strings.Repeat("tenant ", 30), false))
	e.startManager(nil)
	s := newSession("tenant-run", "tenant-run")
	ref := func(key string) v1alpha1.SecretKeyReference {
		return v1alpha1.SecretKeyReference{Name: "tenant-creds", Key: key}
	}
	s.Spec.Storage = v1alpha1.StorageSpec{Bucket: testBucket, Prefix: tenantPrefix,
		Credentials: v1alpha1.S3Credentials{AccessKeyID: ref("id"), SecretAccessKey: ref("secret")}}
	e.create(s)
	job := e.waitJob("tenant-run", "verify")
	if got := job.Spec.Template.Spec.Containers[0].Args[3]; got != "s3://"+testBucket+"/"+tenantPrefix {
		t.Errorf("a tenant's session is read from %s", got)
	}
	e.eventually("the finalizer", func() (bool, string) {
		return slices.Contains(e.session("tenant-run").Finalizers, SessionFinalizer), ""
	})
	if err := e.c.Delete(e.ctx, e.session("tenant-run")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if s := e.session("tenant-run"); !slices.Contains(s.Finalizers, SessionFinalizer) {
		t.Fatal("the finalizer went while the store could not be opened")
	}
	if n := len(keys(t, tenantPrefix+"/sessions/tenant-run/")); n == 0 {
		t.Fatal("the session's objects went without credentials")
	}
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tenant-creds"},
		Data: map[string][]byte{"id": []byte(s3.AccessKey), "secret": []byte(s3.SecretKey)}})
	e.eventually("the session to be gone", func() (bool, string) {
		err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "tenant-run"}, &v1alpha1.AgentSession{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if left := keys(t, tenantPrefix+"/sessions/tenant-run/"); len(left) != 0 {
		t.Errorf("objects left: %v", left)
	}
}

// TestAManagerRestartedMidReconcileConverges stops the manager once the verify Job exists and starts
// a new one: the new manager finds the Job by its name, creates no second one, and status converges.
func TestAManagerRestartedMidReconcileConverges(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "restart", strings.Repeat("restart ", 40), false))
	stop := e.startManager(nil)
	e.create(newSession("restart", "restart"))
	job := e.waitJob("restart", "verify")
	stop()
	e.runJob(job) // the Job finishes while no manager runs
	e.startManager(nil)
	s := e.waitSession("restart", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
	if got := e.jobsOf("restart", "verify"); len(got) != 1 || got[0].UID != job.UID {
		t.Errorf("verify Jobs after the restart: %d (want the one created before it)", len(got))
	}
	var rps v1alpha1.ResumePlanList
	if err := e.c.List(e.ctx, &rps, client.InNamespace(e.ns)); err != nil || len(rps.Items) != 1 {
		t.Errorf("ResumePlans after the restart: %d, %v", len(rps.Items), err)
	}
	if s.Status.Recording.Events == nil || *s.Status.Recording.Events != 4 {
		t.Errorf("recording %+v", s.Status.Recording)
	}
}

// conflictingStatus refuses the first three status writes of objects of type T in namespace ns with
// 409 Conflict, counting every write in conflicts.
func conflictingStatus[T client.Object](ns, resource string, conflicts *atomic.Int64) *interceptor.Funcs {
	return &interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		if _, ok := obj.(T); ok && obj.GetNamespace() == ns && conflicts.Add(1) <= 3 {
			return apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: resource}, obj.GetName(), fmt.Errorf("forced by the test"))
		}
		return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
	}}
}
