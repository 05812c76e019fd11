package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// gcSession is one session of a GC test population: how it was recorded and what its ResumePlan said.
type gcSession struct {
	name, payload string
	open          bool
	// verdict is the ResumePlan's; "" makes no ResumePlan (no verdict yet).
	verdict     v1alpha1.ResumeVerdict
	evaluated   time.Duration // before testNow
	retain      bool
	parent      string
	recordedRun bool // pushed to the store
}

// gcHarness is a namespace with a manager whose cache serves the GC and the AgentSession finalizer.
type gcHarness struct {
	*env
	gc       *GarbageCollector
	finalize *AgentSessionReconciler
	recorder *events.FakeRecorder
}

func newGCHarness(t *testing.T, opts GCOptions) *gcHarness {
	e := newEnv(t)
	mgr, err := ctrl.NewManager(apiServer.Config, ctrl.Options{Scheme: apiServer.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: new(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.GetFieldIndexer().IndexField(e.ctx, &v1alpha1.AgentSession{}, sessionIDField, func(o client.Object) []string {
		return []string{o.(*v1alpha1.AgentSession).Spec.SessionID}
	}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(e.ctx) }()
	if !mgr.GetCache().WaitForCacheSync(e.ctx) {
		t.Fatal("the cache did not sync")
	}
	rec := events.NewFakeRecorder(1000)
	deps := Deps{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Clock: e.clock, Recorder: rec,
		Stores: &Stores{Secrets: mgr.GetAPIReader(), Config: StoreConfig{Endpoint: "http://" + s3.Endpoint, Bucket: testBucket, Prefix: testPrefix,
			Credentials: blobstore.Credentials{AccessKeyID: s3.AccessKey, SecretAccessKey: blobstore.Secret(s3.SecretKey)},
			JobSecret:   JobSecretKeys{Name: jobSecret, AccessKeyID: "accessKeyID", SecretAccessKey: "secretAccessKey"}}},
		Jobs: JobSettings{Image: "registry.example/agentrewind:test", TTLAfterFinished: time.Hour, ActiveDeadline: 10 * time.Minute, RetryAfter: time.Minute},
	}
	opts.Namespaces = []string{e.ns}
	return &gcHarness{env: e, gc: &GarbageCollector{Deps: deps, Options: opts, Ticker: e.clock}, finalize: &AgentSessionReconciler{Deps: deps}, recorder: rec}
}

func fakeHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// populate records and pushes each session, creates its AgentSession (with the finalizer, as the
// AgentSession controller would have added) and verified status, and its ResumePlan with the verdict.
func (h *gcHarness) populate(pop []gcSession) {
	h.t.Helper()
	for _, p := range pop {
		if p.recordedRun {
			push(h.t, testPrefix+"/"+h.ns, recordSession(h.t, p.name, gcPayload(p.payload), p.open))
		}
		s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: h.ns, Finalizers: []string{SessionFinalizer}},
			Spec: v1alpha1.AgentSessionSpec{SessionID: p.name}}
		if p.retain {
			s.Spec.Retention = v1alpha1.RetentionSpec{Policy: v1alpha1.RetentionRetain}
		}
		if p.parent != "" {
			s.Spec.ParentRef, s.Spec.ForkedAtStep = v1alpha1.LocalObjectReference{Name: p.parent}, new(int64(1))
		}
		h.create(s)
		logState := v1alpha1.LogClosed
		if p.open {
			logState = v1alpha1.LogOpen
		}
		n := new(int64(3))
		s.Status.Recording = v1alpha1.SessionRecording{EventsHash: fakeHash(p.name), LogState: logState, Events: n, Steps: n, ModelCalls: n, ToolCalls: n, Blobs: n, Bytes: n,
			Usage: v1alpha1.Usage{InputTokens: n, OutputTokens: n, CacheCreationInputTokens: n, CacheReadInputTokens: n, TotalTokens: n, CostMicroUSD: n}}
		if err := h.c.Status().Update(h.ctx, s); err != nil {
			h.t.Fatal(err)
		}
		if p.verdict == "" {
			continue
		}
		rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: h.ns},
			Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: p.name}}}
		h.create(rp)
		state, reason := v1alpha1.Reachable, "ResumableRetained"
		if p.verdict == v1alpha1.VerdictComplete {
			state, reason = v1alpha1.Collectible, "CompleteCollectible"
		}
		at := metav1.NewTime(testNow.Add(-p.evaluated))
		rp.Status = v1alpha1.ResumePlanStatus{ObservedGeneration: rp.Generation, Verdict: p.verdict, Reason: "ResidualRemains", Message: "judged by the test",
			Reachability: v1alpha1.ReachabilityStatus{State: state, Reason: reason, Message: string(p.verdict) + " by the test"},
			Evidence:     v1alpha1.PlanEvidence{EventsHash: fakeHash(p.name), Plan: v1alpha1.PlanDeclared}, EvaluatedAt: &at,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonVerdictComputed,
				Message: "computed", ObservedGeneration: rp.Generation, LastTransitionTime: at}}}
		if err := h.c.Status().Update(h.ctx, rp); err != nil {
			h.t.Fatal(err)
		}
	}
	// The cache serves the GC: wait until it holds every status written.
	h.eventually("the cache to hold the population", func() (bool, string) {
		var plans v1alpha1.ResumePlanList
		var sessions v1alpha1.AgentSessionList
		if err := h.gc.List(h.ctx, &plans, client.InNamespace(h.ns)); err != nil {
			return false, err.Error()
		}
		if err := h.gc.List(h.ctx, &sessions, client.InNamespace(h.ns)); err != nil {
			return false, err.Error()
		}
		for _, rp := range plans.Items {
			if rp.Status.EvaluatedAt == nil {
				return false, rp.Name + " without status"
			}
		}
		for _, s := range sessions.Items {
			if s.Status.Recording.EventsHash == "" {
				return false, s.Name + " without status"
			}
		}
		return len(sessions.Items) == len(pop), fmt.Sprintf("%d sessions", len(sessions.Items))
	})
}

// sessions names the AgentSessions left, with their reachability.
func (h *gcHarness) sessions() map[string]v1alpha1.ReachabilityStatus {
	h.t.Helper()
	var list v1alpha1.AgentSessionList
	if err := h.c.List(h.ctx, &list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]v1alpha1.ReachabilityStatus{}
	for _, s := range list.Items {
		out[s.Name] = s.Status.Reachability
	}
	return out
}

// storeKeys are the sessions/ and blobs/ keys of the namespace's prefix.
func (h *gcHarness) storeKeys() []string {
	var out []string
	for _, k := range keys(h.t, h.storeKey()+"/") {
		if strings.HasPrefix(k, h.storeKey("sessions")+"/") || strings.HasPrefix(k, h.storeKey("blobs")+"/") {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func (h *gcHarness) events() []string {
	var out []string
	for {
		select {
		case ev := <-h.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// runSweepJob runs a sweep Job's engine as the kubelet would, with the cluster configuration its
// ServiceAccount token would give it (here the test's API server credentials).
func (h *gcHarness) runSweepJob(job *batchv1.Job) string {
	h.t.Helper()
	kubeconfig := filepath.Join(h.t.TempDir(), "kubeconfig")
	cfg := apiServer.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["sweep"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "sweep"}
	kc.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		h.t.Fatal(err)
	}
	c := job.Spec.Template.Spec.Containers[0]
	termLog := filepath.Join(h.t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil {
		h.t.Fatal(err)
	}
	cmd := exec.Command(engineBin, append(append([]string{}, c.Args...), "--termination-log", termLog)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + h.t.TempDir(), "KUBECONFIG=" + kubeconfig}, h.resolveEnv(job, c.Env)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		h.t.Fatalf("running %v: %v", c.Args, err)
	}
	msg, _ := os.ReadFile(termLog)
	h.finishJob(job, err == nil, string(msg))
	return string(out)
}

func (h *gcHarness) sweepJobs() []batchv1.Job {
	h.t.Helper()
	var list batchv1.JobList
	if err := h.c.List(h.ctx, &list, client.InNamespace(h.ns), client.MatchingLabels{jobs.LabelPurpose: string(task.GCSweep)}); err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

var mixedPopulation = []gcSession{
	{name: "resumable-old", payload: "the residual of a crashed run, a month old", verdict: v1alpha1.VerdictResumable, evaluated: 30 * 24 * time.Hour, recordedRun: true},
	{name: "complete-old", payload: "the output of a finished run nobody needs", verdict: v1alpha1.VerdictComplete, evaluated: 10 * 24 * time.Hour, recordedRun: true},
	{name: "complete-fresh", payload: "the output of a run finished an hour ago", verdict: v1alpha1.VerdictComplete, evaluated: time.Hour, recordedRun: true},
	{name: "pinned", payload: "a finished run someone wants to keep", verdict: v1alpha1.VerdictComplete, evaluated: 30 * 24 * time.Hour, retain: true, recordedRun: true},
	{name: "parent", payload: "a finished run a live fork descends from", verdict: v1alpha1.VerdictComplete, evaluated: 30 * 24 * time.Hour, recordedRun: true},
	{name: "fork-child", payload: "the fork of parent, still resumable", verdict: v1alpha1.VerdictResumable, evaluated: 30 * 24 * time.Hour, parent: "parent", recordedRun: true},
	{name: "recording", payload: "a run being recorded right now", open: true, recordedRun: true},
	{name: "no-verdict", payload: "a run whose verdict is not computed yet", recordedRun: true},
}

// After one pass over a mixed population exactly the collectible session past its grace is gone, with
// its objects (the finalizer) and then its blob (the sweep Job); a dry run before it deletes nothing
// and says what it would delete.
func TestGCPassDeletesOnlyCollectibleSessionsPastTheirGraceAndTheSweepTheirBlobs(t *testing.T) {
	h := newGCHarness(t, GCOptions{Interval: time.Minute, Grace: 7 * 24 * time.Hour, DryRun: true, SweepInterval: 24 * time.Hour,
		SweepMargin: 0, SweepLeaseDuration: time.Minute, SweepCreateRBAC: true})
	h.populate(mixedPopulation)
	before := h.storeKeys()
	doomedKeys := slices.DeleteFunc(slices.Clone(before), func(k string) bool {
		return !strings.HasPrefix(k, h.storeKey("sessions", "complete-old")+"/")
	})
	if len(doomedKeys) == 0 {
		t.Fatalf("complete-old has no objects in the store: %v", before)
	}
	// The sweep takes complete-old's blob and the log segments no other session lists.
	swept := []string{h.storeKey("blobs", "sha256", blobOf(t, gcPayload("the output of a finished run nobody needs")))}
	kept := map[string]bool{}
	for _, s := range mixedPopulation {
		if s.name != "complete-old" {
			hashes, _ := segmentsOf(h.ctx, t, h.storeKey("sessions", s.name))
			for _, hash := range hashes {
				kept[hash] = true
			}
		}
	}
	doomedSegments, _ := segmentsOf(h.ctx, t, h.storeKey("sessions", "complete-old"))
	for _, hash := range doomedSegments {
		if !kept[hash] {
			swept = append(swept, h.storeKey("blobs", "sha256", hash[:2], hash))
		}
	}

	// Dry run: reachability everywhere, nothing deleted, the would-be deletion said.
	h.gc.Options.SweepInterval = 0
	rep, err := h.gc.Pass(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{h.ns + "/complete-old"}, rep.WouldDelete); d != "" || len(rep.Deleted) != 0 {
		t.Fatalf("dry run: would delete (-want +got):\n%s deleted %v", d, rep.Deleted)
	}
	want := map[string]struct {
		state  v1alpha1.Reachability
		reason string
	}{
		"resumable-old":  {v1alpha1.Reachable, "ResumableRetained"},
		"complete-old":   {v1alpha1.Collectible, "CompleteCollectible"},
		"complete-fresh": {v1alpha1.Collectible, "CompleteCollectible"},
		"pinned":         {v1alpha1.Reachable, "Pinned"},
		"parent":         {v1alpha1.Reachable, "ParentOfRetainedFork"},
		"fork-child":     {v1alpha1.Reachable, "ResumableRetained"},
		"recording":      {v1alpha1.Reachable, "Recording"},
		"no-verdict":     {v1alpha1.Reachable, "VerdictPending"},
	}
	var got map[string]v1alpha1.ReachabilityStatus
	h.eventually("the reachability of every session", func() (bool, string) {
		got = h.sessions()
		for name, w := range want {
			if g := got[name]; g.State != w.state || g.Reason != w.reason {
				return false, fmt.Sprintf("%s: %+v, want %s/%s", name, g, w.state, w.reason)
			}
		}
		return len(got) == len(want), fmt.Sprintf("%d sessions", len(got))
	})
	if m := got["complete-old"].Message; !strings.HasPrefix(m, "would delete (dry run): ") {
		t.Errorf("complete-old's message in a dry run: %q", m)
	}
	if m := got["complete-fresh"].Message; !strings.Contains(m, "deleted after") {
		t.Errorf("complete-fresh's message: %q, want when it will be deleted", m)
	}
	if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, ReasonGCWouldDelete) || strings.Contains(evs, ReasonGCDeleted) {
		t.Errorf("dry-run events:\n%s", evs)
	}
	if d := cmp.Diff(before, h.storeKeys()); d != "" {
		t.Fatalf("the dry run changed the store (-before +after):\n%s", d)
	}

	// The real pass: complete-old goes, and a sweep Job is scheduled.
	h.gc.Options.DryRun, h.gc.Options.SweepInterval = false, 24*time.Hour
	h.eventually("the cache to see the dry run's status", func() (bool, string) {
		var s v1alpha1.AgentSession
		err := h.gc.Get(h.ctx, types.NamespacedName{Namespace: h.ns, Name: "complete-old"}, &s)
		return err == nil && strings.HasPrefix(s.Status.Reachability.Message, "would delete"), fmt.Sprint(err)
	})
	if rep, err = h.gc.Pass(h.ctx); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{h.ns + "/complete-old"}, rep.Deleted); d != "" {
		t.Fatalf("deleted (-want +got):\n%s", d)
	}
	if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, ReasonGCDeleted+" Deleted: CompleteCollectible") {
		t.Errorf("no deletion event with its reason:\n%s", evs)
	}
	// The AgentSession controller's finalizer removes its objects from the store.
	if _, err := h.finalize.Reconcile(h.ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: h.ns, Name: "complete-old"}}); err != nil {
		t.Fatal(err)
	}
	h.eventually("complete-old to be gone", func() (bool, string) {
		_, ok := h.sessions()["complete-old"]
		return !ok, "still there"
	})
	if d := cmp.Diff(slices.DeleteFunc(slices.Clone(before), func(k string) bool { return slices.Contains(doomedKeys, k) }), h.storeKeys()); d != "" {
		t.Fatalf("store after the finalizer (-want +got):\n%s", d)
	}

	// The sweep Job: its ServiceAccount may renew its Lease, and it runs alone.
	sweeps := h.sweepJobs()
	if len(sweeps) != 1 {
		t.Fatalf("%d sweep Jobs, want 1: %v", len(sweeps), rep.Sweeps)
	}
	job := &sweeps[0]
	pod := job.Spec.Template.Spec
	if pod.ServiceAccountName != SweepServiceAccount || pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Errorf("sweep pod runs as %q with automount %v, want %s with its token", pod.ServiceAccountName, pod.AutomountServiceAccountToken, SweepServiceAccount)
	}
	lease := sweepLeaseName(h.gc.Stores.LocationOf(&v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns}}))
	args := strings.Join(pod.Containers[0].Args, " ")
	if !strings.Contains(args, "engine gc-sweep --store s3://"+testBucket+"/"+testPrefix+"/"+h.ns) || !strings.Contains(args, "--lease-name "+lease+" --lease-namespace "+h.ns) {
		t.Errorf("sweep args: %s", args)
	}
	var role rbacv1.Role
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: lease}, &role); err != nil {
		t.Fatal(err)
	}
	wantRule := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{lease}, Verbs: []string{"get", "update"}}}
	if d := cmp.Diff(wantRule, role.Rules); d != "" {
		t.Errorf("the sweep's Role (-want +got):\n%s", d)
	}
	var sa corev1.ServiceAccount
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: SweepServiceAccount}, &sa); err != nil {
		t.Errorf("the sweep's ServiceAccount: %v", err)
	}
	// A day later, while it still runs, no second sweep starts.
	h.clock.Step(25 * time.Hour)
	h.eventually("the cache to see the sweep Job", func() (bool, string) {
		var l batchv1.JobList
		err := h.gc.List(h.ctx, &l, client.InNamespace(h.ns))
		return err == nil && len(l.Items) == 1, fmt.Sprint(err)
	})
	if rep, err = h.gc.Pass(h.ctx); err != nil || len(rep.Sweeps) != 0 || len(rep.Deleted) != 0 {
		t.Fatalf("a pass while the sweep runs: %+v, %v", rep, err)
	}

	// S3 keeps modification times to the second and the sweep's cutoff is truncated to one, so a blob
	// stored in the second the sweep starts is young even with a zero margin: let that second pass.
	time.Sleep(1100 * time.Millisecond)
	out := h.runSweepJob(job)
	if d := cmp.Diff(slices.DeleteFunc(slices.Clone(before), func(k string) bool {
		return slices.Contains(doomedKeys, k) || slices.Contains(swept, k)
	}), h.storeKeys()); d != "" {
		t.Fatalf("store after the sweep (-want +got):\n%s\n%s", d, out)
	}
	// The next pass reads its result and, the interval being over, starts the next sweep.
	h.eventually("the cache to see the sweep finished", func() (bool, string) {
		var j batchv1.Job
		err := h.gc.Get(h.ctx, client.ObjectKeyFromObject(job), &j)
		return err == nil && jobs.StateOf(&j) == jobs.Succeeded, fmt.Sprint(err)
	})
	if rep, err = h.gc.Pass(h.ctx); err != nil || len(rep.Sweeps) != 1 {
		t.Fatalf("the pass after the sweep: %+v, %v", rep, err)
	}
	if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, ReasonGCSweepFinished+" Blob sweep of s3://"+testBucket+"/"+testPrefix+"/"+h.ns+fmt.Sprintf(" deleted %d unreferenced blob(s)", len(swept))) {
		t.Errorf("no event with the sweep's result:\n%s", evs)
	}
	if _, ok := h.sessions()["complete-fresh"]; !ok {
		t.Error("complete-fresh was deleted within its grace")
	}
}

// gcPayload makes a tool result big enough to be stored as a blob.
func gcPayload(s string) string { return strings.Repeat(s+"; ", 3) }

// blobOf is the blob path (xx/hash) of a tool result recorded by recordSession.
func blobOf(t *testing.T, toolResult string) string {
	t.Helper()
	data := fmt.Appendf(nil, "%q", toolResult)
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	return h[:2] + "/" + h
}
