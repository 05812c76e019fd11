package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// scrape gathers m from a registry of its own, as the metrics endpoint would, into
// "name{label=value,...}" → value; a histogram gives its sample count as name_count{...}. The garbage
// collector's metrics are left out: TestGCMetricsReportPassesAndSweeps covers them.
func scrape(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("scraping: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "agentrewind_gc_") {
			continue
		}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			key := "{" + strings.Join(labels, ",") + "}"
			switch {
			case s.Counter != nil:
				out[f.GetName()+key] = s.Counter.GetValue()
			case s.Gauge != nil:
				out[f.GetName()+key] = s.Gauge.GetValue()
			case s.Histogram != nil:
				out[f.GetName()+"_count"+key] = float64(s.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

// series keeps the scraped series whose names start with prefix.
func series(all map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range all {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

func fakeReader(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func judgedSession(name string, ready metav1.ConditionStatus, verdict v1alpha1.ResumeVerdict, reach v1alpha1.Reachability) *v1alpha1.AgentSession {
	s := newSession(name, name)
	s.Namespace = "team-a"
	s.Status = v1alpha1.AgentSessionStatus{ResumeVerdict: verdict, Reachability: v1alpha1.ReachabilityStatus{State: reach},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: ready, Reason: "Test", LastTransitionTime: metav1.Now()}}}
	return s
}

// TestTheSessionGaugeCountsWhatTheCacheHolds: the gauge is the cache's sessions grouped by Ready,
// verdict and reachability, computed on every scrape; a cache that cannot be listed fails the scrape
// instead of reporting zero sessions.
func TestTheSessionGaugeCountsWhatTheCacheHolds(t *testing.T) {
	unjudged := newSession("new", "new")
	unjudged.Namespace = "team-b"
	c := fakeReader(t,
		judgedSession("a", metav1.ConditionTrue, v1alpha1.VerdictResumable, v1alpha1.Reachable),
		judgedSession("b", metav1.ConditionTrue, v1alpha1.VerdictResumable, v1alpha1.Reachable),
		judgedSession("c", metav1.ConditionTrue, v1alpha1.VerdictComplete, v1alpha1.Collectible),
		judgedSession("d", metav1.ConditionFalse, "", ""),
		unjudged)
	m := NewMetrics(c)
	want := map[string]float64{
		"agentrewind_agentsessions{reachability=Reachable,ready=True,verdict=Resumable}":  2,
		"agentrewind_agentsessions{reachability=Collectible,ready=True,verdict=Complete}": 1,
		"agentrewind_agentsessions{reachability=none,ready=False,verdict=none}":           1,
		"agentrewind_agentsessions{reachability=none,ready=Unknown,verdict=none}":         1,
	}
	if d := diff(want, series(scrape(t, m), "agentrewind_agentsessions")); d != "" {
		t.Errorf("session gauge (-want +got):\n%s", d)
	}
	if err := c.Delete(context.Background(), judgedSession("a", "", "", "")); err != nil {
		t.Fatal(err)
	}
	if got := scrape(t, m)["agentrewind_agentsessions{reachability=Reachable,ready=True,verdict=Resumable}"]; got != 1 {
		t.Errorf("after a deletion the gauge says %v Resumable sessions, want 1", got)
	}

	broken := NewMetrics(interceptor.NewClient(c, interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return errors.New("cache not started")
	}}))
	reg := prometheus.NewRegistry()
	if err := broken.Register(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "cache not started") {
		t.Errorf("scraping over a failing cache: %v, want its error", err)
	}
}

// settledRun is a ForkRun of generation gen settled on Job job with outcome and live tokens in, out.
func settledRun(gen int64, job string, outcome v1alpha1.ForkOutcome, in, out int64) *v1alpha1.ForkRun {
	fr := newFork("f", "s", 1)
	fr.Generation = gen
	fr.Status = v1alpha1.ForkRunStatus{Outcome: outcome, JobRef: v1alpha1.LocalObjectReference{Name: job},
		Usage: v1alpha1.ForkUsage{Live: usageOf(in, out), Replayed: usageOf(900, 120)}}
	fr.Status.Usage.Live.CacheReadInputTokens = new(int64(2))
	fr.Status.Usage.Live.CostMicroUSD = new(int64(50))
	conditions.MarkReady(&fr.Status.Conditions, gen, string(outcome), "fork Job "+job+": "+string(outcome))
	return fr
}

// runningRun is the ForkRun as read while Job job of generation gen runs.
func runningRun(gen int64, job string) *v1alpha1.ForkRun {
	fr := newFork("f", "s", 1)
	fr.Generation = gen
	fr.Status.JobRef.Name = job
	conditions.MarkReconciling(&fr.Status.Conditions, gen, v1alpha1.ReasonJobRunning, "fork Job "+job+" is running")
	return fr
}

// TestCountsFollowTheWriteThatSettled drives the observation points with the objects a pass reads
// and writes: only the pass whose write settled an object counts it, so resyncs, a write that lost a
// conflict and a restarted manager (which reads the settled object) count nothing more; a new
// generation's run counts again. A Job's duration is observed once per Job.
func TestCountsFollowTheWriteThatSettled(t *testing.T) {
	m := NewMetrics(fakeReader(t))
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "forkruns"}, "f", errors.New("stale"))

	m.forkRunWritten(runningRun(1, "f-fork-1"), settledRun(1, "f-fork-1", v1alpha1.OutcomeCompleted, 100, 52), conflict)                                // lost the race
	m.forkRunWritten(runningRun(1, "f-fork-1"), settledRun(1, "f-fork-1", v1alpha1.OutcomeCompleted, 100, 52), nil)                                     // settled
	m.forkRunWritten(settledRun(1, "f-fork-1", v1alpha1.OutcomeCompleted, 100, 52), settledRun(1, "f-fork-1", v1alpha1.OutcomeCompleted, 100, 52), nil) // resync, restart
	m.forkRunWritten(runningRun(1, "f-fork-1"), runningRun(1, "f-fork-1"), nil)                                                                         // still running
	m.forkRunWritten(settledRun(1, "f-fork-1", v1alpha1.OutcomeCompleted, 100, 52), settledRun(2, "f-fork-2", v1alpha1.OutcomeGoalMissed, 10, 5), nil)  // a new generation

	ck := func(gen int64, job string, stored bool) *v1alpha1.Checkpoint {
		c := &v1alpha1.Checkpoint{ObjectMeta: metav1.ObjectMeta{Name: "ck", Generation: gen}}
		if !stored {
			conditions.MarkReconciling(&c.Status.Conditions, gen, v1alpha1.ReasonJobRunning, "checkpoint Job "+job+" is capturing")
			return c
		}
		c.Status.Snapshot = v1alpha1.WorkspaceSnapshot{TotalBytes: new(int64(4096)), IncrementalBytes: new(int64(1024))}
		conditions.MarkReady(&c.Status.Conditions, gen, v1alpha1.ReasonSnapshotStored, "checkpoint Job "+job+" stored manifest")
		return c
	}
	m.checkpointWritten(ck(1, "ck-1", false), ck(1, "ck-1", true), nil)
	m.checkpointWritten(ck(1, "ck-1", true), ck(1, "ck-1", true), nil)
	m.checkpointWritten(ck(1, "ck-1", false), ck(1, "ck-1", true), conflict)

	start := metav1.NewTime(testNow)
	job := func(uid, purpose string, secs int, failed bool) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Labels: map[string]string{jobs.LabelPurpose: purpose}, CreationTimestamp: start},
			Status: batchv1.JobStatus{StartTime: &start}}
		end := metav1.NewTime(testNow.Add(time.Duration(secs) * time.Second))
		if failed {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: end}}
		} else {
			j.Status.CompletionTime = &end
		}
		return j
	}
	m.jobFinished(job("v1", "verify", 3, false), jobs.Succeeded)
	m.jobFinished(job("v1", "verify", 3, false), jobs.Succeeded) // seen again before its owner settled
	m.jobFinished(job("v2", "verify", 700, true), jobs.Failed)
	m.jobFinished(job("r1", "replay", 1, false), jobs.Running)

	want := map[string]float64{
		"agentrewind_forkrun_outcomes_total{mode=Fork,outcome=Completed}":             1,
		"agentrewind_forkrun_outcomes_total{mode=Fork,outcome=GoalMissed}":            1,
		"agentrewind_forkrun_tokens_total{type=input,usage=live}":                     110,
		"agentrewind_forkrun_tokens_total{type=output,usage=live}":                    57,
		"agentrewind_forkrun_tokens_total{type=cache_read,usage=live}":                4,
		"agentrewind_forkrun_tokens_total{type=cache_creation,usage=live}":            0,
		"agentrewind_forkrun_tokens_total{type=input,usage=replayed}":                 1800,
		"agentrewind_forkrun_tokens_total{type=output,usage=replayed}":                240,
		"agentrewind_forkrun_tokens_total{type=cache_read,usage=replayed}":            0,
		"agentrewind_forkrun_tokens_total{type=cache_creation,usage=replayed}":        0,
		"agentrewind_forkrun_cost_microusd_total{usage=live}":                         100,
		"agentrewind_forkrun_cost_microusd_total{usage=replayed}":                     0,
		"agentrewind_checkpoint_snapshot_bytes_total{kind=total}":                     4096,
		"agentrewind_checkpoint_snapshot_bytes_total{kind=incremental}":               1024,
		"agentrewind_engine_job_duration_seconds_count{result=succeeded,task=verify}": 1,
		"agentrewind_engine_job_duration_seconds_count{result=failed,task=verify}":    1,
		"agentrewind_store_sync_sessions_created_total{}":                             0,
	}
	if d := diff(want, scrape(t, m)); d != "" {
		t.Errorf("metrics (-want +got):\n%s", d)
	}

	var nilMetrics *Metrics // a reconciler built without metrics records nothing and does not panic
	nilMetrics.forkRunWritten(runningRun(1, "x"), settledRun(1, "x", v1alpha1.OutcomeCompleted, 1, 1), nil)
	nilMetrics.jobFinished(job("n", "verify", 1, false), jobs.Succeeded)
}

// startMetricsManager runs the AgentSession and ForkRun reconcilers with m, the manager's cache limited
// to the test's namespace (so the session gauge counts its sessions only); funcs, when given,
// intercept the manager's client. NewMetrics is given the manager's cache, as cmd/agentrewind does.
func (e *env) startMetricsManager(funcs *interceptor.Funcs) (*Metrics, func()) {
	e.t.Helper()
	var m *Metrics
	stop := e.runManager(funcs, cache.Options{DefaultNamespaces: map[string]cache.Config{e.ns: {}}},
		func(mgr ctrl.Manager, deps *Deps, n int64) []setupper {
			m = NewMetrics(mgr.GetCache())
			deps.Metrics = m
			return forkReconcilers(mgr, deps, n)
		})
	return m, stop
}

// TestMetricsOfRealRunsSurviveConflictsAndARestart drives a session's verify Job and a fork through
// the reconcilers on envtest and scrapes the registry: the fork's outcome and tokens are counted once
// although its first settling write was refused with a 409, the Jobs' durations once each, and the
// session gauge shows the parent verified and the child waiting. A manager started afterwards (a
// restart) counts nothing again, while its gauge, read from its own cache, shows the same sessions.
func TestMetricsOfRealRunsSurviveConflictsAndARestart(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "metered", strings.Repeat("metered ", 40), false))
	e.forkSecrets()
	var refused atomic.Int64
	m, stop := e.startMetricsManager(&interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		if fr, ok := obj.(*v1alpha1.ForkRun); ok && fr.Status.Outcome != "" && refused.Add(1) == 1 {
			return apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "forkruns"}, obj.GetName(), errors.New("forced by the test"))
		}
		return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
	}})
	e.readySession("metered")
	fr := newFork("metered-fork", "metered", 1)
	e.create(fr)
	job := e.waitJob("metered-fork", "fork")
	e.writeResult(job, &task.Result{Task: task.Fork, Outcome: task.Succeeded, Fork: &task.ForkResult{ParentSessionID: "metered",
		ChildSessionID: childSessionName(fr), AtStep: 1, TokensSpent: task.Usage{InputTokens: 100, OutputTokens: 52, CacheReadInputTokens: 40, CostMicroUSD: 700},
		Replayed: task.Usage{InputTokens: 900, OutputTokens: 120, CacheCreationInputTokens: 100, CacheReadInputTokens: 500}}})
	e.finishJob(job, true, "")
	e.waitForkRun("metered-fork", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonCompleted)
	child := childSessionName(fr)
	e.waitSession(child, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonJobRunning)
	// Resyncs: a change of the ForkRun's metadata brings it back to the reconciler.
	touch(t, e, fr)

	want := map[string]float64{
		"agentrewind_forkrun_outcomes_total{mode=Fork,outcome=Completed}":             1,
		"agentrewind_forkrun_tokens_total{type=input,usage=live}":                     100,
		"agentrewind_forkrun_tokens_total{type=output,usage=live}":                    52,
		"agentrewind_forkrun_tokens_total{type=cache_read,usage=live}":                40,
		"agentrewind_forkrun_tokens_total{type=cache_creation,usage=live}":            0,
		"agentrewind_forkrun_tokens_total{type=input,usage=replayed}":                 900,
		"agentrewind_forkrun_tokens_total{type=output,usage=replayed}":                120,
		"agentrewind_forkrun_tokens_total{type=cache_read,usage=replayed}":            500,
		"agentrewind_forkrun_tokens_total{type=cache_creation,usage=replayed}":        100,
		"agentrewind_forkrun_cost_microusd_total{usage=live}":                         700,
		"agentrewind_forkrun_cost_microusd_total{usage=replayed}":                     0,
		"agentrewind_engine_job_duration_seconds_count{result=succeeded,task=verify}": 1,
		"agentrewind_engine_job_duration_seconds_count{result=succeeded,task=fork}":   1,
		"agentrewind_agentsessions{reachability=none,ready=True,verdict=none}":        1,
		"agentrewind_agentsessions{reachability=none,ready=False,verdict=none}":       1,
		"agentrewind_store_sync_sessions_created_total{}":                             0,
	}
	if d := diff(want, scrape(t, m)); d != "" {
		t.Errorf("metrics after the runs (-want +got):\n%s", d)
	}
	if refused.Load() < 2 {
		t.Fatalf("the settling write was not retried after the refused one (%d writes)", refused.Load())
	}

	stop()
	m, _ = e.startMetricsManager(nil)
	touch(t, e, fr)
	e.eventually("the restarted manager's cache", func() (bool, string) {
		got := series(scrape(t, m), "agentrewind_agentsessions")
		return len(got) == 2, fmt.Sprint(got)
	})
	time.Sleep(time.Second) // the touched ForkRun's pass
	want = map[string]float64{
		"agentrewind_agentsessions{reachability=none,ready=True,verdict=none}":  1,
		"agentrewind_agentsessions{reachability=none,ready=False,verdict=none}": 1,
		"agentrewind_store_sync_sessions_created_total{}":                       0,
	}
	if d := diff(want, scrape(t, m)); d != "" {
		t.Errorf("metrics of a restarted manager (-want +got):\n%s", d)
	}
}

// touch changes an annotation of fr, which queues it for its reconciler again.
func touch(t *testing.T, e *env, fr *v1alpha1.ForkRun) {
	t.Helper()
	var cur v1alpha1.ForkRun
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(fr), &cur); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	cur.Annotations = map[string]string{"test/touched": time.Now().String()}
	if err := e.c.Patch(e.ctx, &cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
}
