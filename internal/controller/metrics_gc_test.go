package controller

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentrewind/agentrewind/internal/engine/gc"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

func TestGCMetricsReportPassesAndSweeps(t *testing.T) {
	m := NewMetrics(nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.gc.collectors()...)

	m.GCPass(gc.Plan{Reachable: 7, Collectible: 3, Deleted: 2}, 2, false, time.Second)
	m.GCPass(gc.Plan{Reachable: 6, Collectible: 4, Deleted: 1}, 0, true, time.Second) // a dry run deletes nothing
	m.CheckpointsPruned(5, false)
	m.GCSweepFinished(&task.GCSweepResult{DeletedBlobs: 9, FreedBytes: 4096}, false, time.Minute)
	m.GCSweepFinished(&task.GCSweepResult{DryRun: true, DeletedBlobs: 100, FreedBytes: 1 << 30}, false, time.Minute)
	m.GCSweepFinished(nil, true, time.Second)

	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			name := f.GetName()
			for _, l := range metric.GetLabel() {
				name += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case metric.Gauge != nil:
				got[name] = metric.GetGauge().GetValue()
			case metric.Counter != nil:
				got[name] = metric.GetCounter().GetValue()
			case metric.Histogram != nil:
				got[name] = float64(metric.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		// the gauges hold the latest pass
		"agentrewind_gc_sessions,reachability=Reachable": 6, "agentrewind_gc_sessions,reachability=Collectible": 4,
		"agentrewind_gc_sessions_deleted_total,dry_run=false": 2, "agentrewind_gc_sessions_deleted_total,dry_run=true": 1,
		"agentrewind_gc_checkpoints_pruned_total,dry_run=false": 5,
		"agentrewind_gc_pass_duration_seconds":                  2,
		"agentrewind_gc_sweeps_total,result=succeeded":          2, "agentrewind_gc_sweeps_total,result=failed": 1,
		// a dry-run sweep reclaims nothing
		"agentrewind_gc_sweep_reclaimed_bytes_total": 4096, "agentrewind_gc_sweep_deleted_blobs_total": 9,
		"agentrewind_gc_sweep_duration_seconds": 3,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
