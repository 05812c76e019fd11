package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// Metrics are the operator's Prometheus collectors. Labels are bounded enums (never a namespace or a
// name), so a cluster with many sessions has a fixed number of series.
//
// What a reconciler counts is derived from state, never from events: a ForkRun's outcome and tokens,
// and a Checkpoint's bytes, are counted by the pass whose status write took the object from not
// settled to settled on its Job. The write carries an optimistic lock, so of two passes that read the
// same object only one can make it (a pass on a stale cache gets a conflict and counts nothing), and
// an object settled before a restart is never settled again. A Job's duration is observed the first
// time this process sees the Job finished, once per Job UID; an owner settled on the Job before a
// restart never looks at it again. Sessions are a gauge computed on scrape from the informer cache:
// it is exact after a restart and for objects deleted meanwhile, with no bookkeeping in reconcilers.
// A nil *Metrics records nothing.
type Metrics struct {
	forkOutcomes  *prometheus.CounterVec
	forkTokens    *prometheus.CounterVec
	forkCost      *prometheus.CounterVec
	jobDurations  *prometheus.HistogramVec
	snapshotBytes *prometheus.CounterVec
	syncCreated   prometheus.Counter
	sessions      *sessionCollector
	gc            gcMetrics

	mu   sync.Mutex
	seen uidRing // Jobs whose duration was observed
}

// Label values of the token counters.
const (
	usageLive, usageReplayed = "live", "replayed"
)

// NewMetrics makes the collectors; sessions lists AgentSessions on scrape (the manager's cache).
func NewMetrics(sessions client.Reader) *Metrics {
	return &Metrics{
		forkOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrewind_forkrun_outcomes_total",
			Help: "ForkRuns that finished, by mode (Fork, Replay) and outcome (Passed, Diverged, Completed, GoalReached, GoalMissed, Failed).",
		}, []string{"mode", "outcome"}),
		forkTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrewind_forkrun_tokens_total",
			Help: "Tokens of finished ForkRuns: spent live, or served from the recording (replayed), by type (input, output, cache_creation, cache_read; cache tokens are part of input).",
		}, []string{"usage", "type"}),
		forkCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrewind_forkrun_cost_microusd_total",
			Help: "Cost of finished ForkRuns in millionths of a US dollar, spent live or served from the recording (replayed).",
		}, []string{"usage"}),
		jobDurations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentrewind_engine_job_duration_seconds",
			Help:    "How long engine Jobs ran, from start to completion or failure, by task (verify, resume-plan, checkpoint, fork, replay) and result (succeeded, failed).",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600},
		}, []string{"task", "result"}),
		snapshotBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrewind_checkpoint_snapshot_bytes_total",
			Help: "Bytes of the workspace snapshots Checkpoints stored: the workspaces' size (total) and what they added to storage after deduplication (incremental).",
		}, []string{"kind"}),
		syncCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentrewind_store_sync_sessions_created_total",
			Help: "AgentSessions the store sync created for sessions committed to the store from outside the cluster.",
		}),
		sessions: &sessionCollector{reader: sessions, desc: prometheus.NewDesc("agentrewind_agentsessions",
			"AgentSessions by Ready condition status (True, False, Unknown), resume verdict and reachability (none when not judged yet).",
			[]string{"ready", "verdict", "reachability"}, nil)},
		gc:   newGCMetrics(),
		seen: newUIDRing(4096),
	}
}

// Register adds every collector to reg (controller-runtime's metrics.Registry in the manager). A
// collector of the same description already there, from an earlier manager of this process (the
// manager started again in one test binary), is replaced: it reads the earlier manager's cache.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range append([]prometheus.Collector{m.forkOutcomes, m.forkTokens, m.forkCost, m.jobDurations, m.snapshotBytes, m.syncCreated, m.sessions}, m.gc.collectors()...) {
		err := reg.Register(c)
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			reg.Unregister(are.ExistingCollector)
			err = reg.Register(c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// forkRunWritten counts a ForkRun's outcome, tokens and cost when the status write that ended a pass
// (err is that pass's error, the write's included) settled it on its Job: base is the ForkRun as read.
func (m *Metrics) forkRunWritten(base, fr *v1alpha1.ForkRun, err error) {
	if m == nil || err != nil {
		return
	}
	st, job := fr.Status, fr.Status.JobRef.Name
	if st.Outcome == "" || job == "" || !conditions.RunSettled(st.Conditions, st.LastRun, fr.Generation, job) ||
		(base.Status.JobRef.Name == job && conditions.RunSettled(base.Status.Conditions, base.Status.LastRun, fr.Generation, job)) {
		return
	}
	m.forkOutcomes.WithLabelValues(string(fr.Spec.Mode), string(st.Outcome)).Inc()
	for usage, u := range map[string]v1alpha1.Usage{usageLive: st.Usage.Live, usageReplayed: st.Usage.Replayed} {
		add(m.forkTokens.WithLabelValues(usage, "input"), u.InputTokens)
		add(m.forkTokens.WithLabelValues(usage, "output"), u.OutputTokens)
		add(m.forkTokens.WithLabelValues(usage, "cache_creation"), u.CacheCreationInputTokens)
		add(m.forkTokens.WithLabelValues(usage, "cache_read"), u.CacheReadInputTokens)
		add(m.forkCost.WithLabelValues(usage), u.CostMicroUSD)
	}
}

// checkpointWritten counts a Checkpoint's snapshot bytes when the status write that ended a pass
// stored a snapshot its status did not hold for this generation: base is the Checkpoint as read.
func (m *Metrics) checkpointWritten(base, ck *v1alpha1.Checkpoint, err error) {
	if m == nil || err != nil {
		return
	}
	now, before := storedSnapshot(ck), storedSnapshot(base)
	if now == "" || now == before {
		return
	}
	add(m.snapshotBytes.WithLabelValues("total"), ck.Status.Snapshot.TotalBytes)
	add(m.snapshotBytes.WithLabelValues("incremental"), ck.Status.Snapshot.IncrementalBytes)
}

// storedSnapshot is the message of a Checkpoint's Ready condition when it says, for the current
// generation, that a snapshot was stored; the message names the Job that stored it.
func storedSnapshot(ck *v1alpha1.Checkpoint) string {
	c := meta.FindStatusCondition(ck.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != "True" || c.Reason != v1alpha1.ReasonSnapshotStored || c.ObservedGeneration != ck.Generation {
		return ""
	}
	return c.Message
}

// jobFinished observes how long a finished engine Job ran, once per Job.
func (m *Metrics) jobFinished(job *batchv1.Job, state jobs.State) {
	if m == nil || state == jobs.Running {
		return
	}
	m.mu.Lock()
	first := m.seen.add(job.UID)
	m.mu.Unlock()
	if !first {
		return
	}
	start := job.CreationTimestamp.Time
	if job.Status.StartTime != nil {
		start = job.Status.StartTime.Time
	}
	end := finishedAt(job, job.CreationTimestamp).Time
	result := "succeeded"
	if state == jobs.Failed {
		result = "failed"
	}
	m.jobDurations.WithLabelValues(job.Labels[jobs.LabelPurpose], result).Observe(max(end.Sub(start), 0).Seconds())
}

// sessionsCreated counts the AgentSessions a store sync pass created.
func (m *Metrics) sessionsCreated(n int) {
	if m != nil {
		m.syncCreated.Add(float64(n))
	}
}

func add(c prometheus.Counter, v *int64) {
	if v != nil && *v > 0 {
		c.Add(float64(*v))
	}
}

// sessionCollector reports AgentSessions by state, listed from the informer cache on every scrape.
type sessionCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

// scrapeTimeout bounds the cache listing of one scrape.
const scrapeTimeout = 10 * time.Second

func (c *sessionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sessionCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var list v1alpha1.AgentSessionList
	if err := c.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	type key struct{ ready, verdict, reach string }
	counts := map[key]int{}
	for i := range list.Items {
		s := &list.Items[i]
		k := key{"Unknown", orNone(string(s.Status.ResumeVerdict)), orNone(string(s.Status.Reachability.State))}
		if r := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady); r != nil {
			k.ready = string(r.Status)
		}
		counts[k]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), k.ready, k.verdict, k.reach)
	}
}

// uidRing is a set of the latest n UIDs added; the oldest leaves when a new one comes.
type uidRing struct {
	set  map[types.UID]struct{}
	ring []types.UID
	next int
}

func newUIDRing(n int) uidRing {
	return uidRing{set: make(map[types.UID]struct{}, n), ring: make([]types.UID, n)}
}

// add adds uid and says whether it was new.
func (r *uidRing) add(uid types.UID) bool {
	if _, ok := r.set[uid]; ok {
		return false
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next], r.next = uid, (r.next+1)%len(r.ring)
	r.set[uid] = struct{}{}
	return true
}
