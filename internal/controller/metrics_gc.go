package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentrewind/agentrewind/internal/engine/gc"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// gcMetrics are what the garbage collector reports: the latest pass's reachable and collectible
// sessions (gauges: a pass judges every session again), what it deleted and pruned (counters), and
// each blob sweep's outcome.
type gcMetrics struct {
	sessions    *prometheus.GaugeVec
	deleted     *prometheus.CounterVec
	pruned      *prometheus.CounterVec
	passSeconds prometheus.Histogram
	sweeps      *prometheus.CounterVec
	freedBytes  prometheus.Counter
	freedBlobs  prometheus.Counter
	sweepTook   prometheus.Histogram
}

func newGCMetrics() gcMetrics {
	return gcMetrics{
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentrewind_gc_sessions",
			Help: "AgentSessions the latest garbage collection pass judged reachable (kept however old) or collectible.",
		}, []string{"reachability"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrewind_gc_sessions_deleted_total",
			Help: "Collectible AgentSessions past their grace the garbage collector deleted (dry_run=true: would have deleted).",
		}, []string{"dry_run"}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrewind_gc_checkpoints_pruned_total",
			Help: "Checkpoints the prune plan deleted (dry_run=true: would have deleted).",
		}, []string{"dry_run"}),
		passSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agentrewind_gc_pass_duration_seconds",
			Help:    "How long a garbage collection pass took.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
		}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrewind_gc_sweeps_total",
			Help: "Blob sweep Jobs that finished, by result (succeeded, failed).",
		}, []string{"result"}),
		freedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentrewind_gc_sweep_reclaimed_bytes_total",
			Help: "Bytes of unreferenced blobs the blob sweeps deleted.",
		}),
		freedBlobs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentrewind_gc_sweep_deleted_blobs_total",
			Help: "Unreferenced blobs the blob sweeps deleted.",
		}),
		sweepTook: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agentrewind_gc_sweep_duration_seconds",
			Help:    "How long blob sweep Jobs ran.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600},
		}),
	}
}

func (g gcMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.sessions, g.deleted, g.pruned, g.passSeconds, g.sweeps, g.freedBytes, g.freedBlobs, g.sweepTook}
}

var _ GCObserver = (*Metrics)(nil)

// GCPass implements GCObserver.
func (m *Metrics) GCPass(plan gc.Plan, deleted int, dryRun bool, took time.Duration) {
	if m == nil {
		return
	}
	m.gc.sessions.WithLabelValues("Reachable").Set(float64(plan.Reachable))
	m.gc.sessions.WithLabelValues("Collectible").Set(float64(plan.Collectible))
	if dryRun {
		m.gc.deleted.WithLabelValues("true").Add(float64(plan.Deleted))
	} else {
		m.gc.deleted.WithLabelValues("false").Add(float64(deleted))
	}
	m.gc.passSeconds.Observe(took.Seconds())
}

// CheckpointsPruned implements GCObserver.
func (m *Metrics) CheckpointsPruned(n int, dryRun bool) {
	if m == nil {
		return
	}
	label := "false"
	if dryRun {
		label = "true"
	}
	m.gc.pruned.WithLabelValues(label).Add(float64(n))
}

// GCSweepFinished implements GCObserver.
func (m *Metrics) GCSweepFinished(res *task.GCSweepResult, failed bool, took time.Duration) {
	if m == nil {
		return
	}
	result := "succeeded"
	if failed {
		result = "failed"
	}
	m.gc.sweeps.WithLabelValues(result).Inc()
	m.gc.sweepTook.Observe(took.Seconds())
	if res != nil && !res.DryRun {
		m.gc.freedBytes.Add(float64(res.FreedBytes))
		m.gc.freedBlobs.Add(float64(res.DeletedBlobs))
	}
}
