package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// sessionWithBytes creates an AgentSession whose verified recording reports n bytes.
func (e *env) sessionWithBytes(name string, n int64) {
	e.t.Helper()
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Spec: v1alpha1.AgentSessionSpec{SessionID: name}}
	e.create(s)
	one := new(int64(1))
	s.Status.Recording = v1alpha1.SessionRecording{EventsHash: fakeHash(name), LogState: v1alpha1.LogClosed, Events: one, Steps: one, ModelCalls: one, ToolCalls: one, Blobs: one, Bytes: new(n),
		Usage: v1alpha1.Usage{InputTokens: one, OutputTokens: one, CacheCreationInputTokens: one, CacheReadInputTokens: one, TotalTokens: one, CostMicroUSD: one}}
	if err := e.c.Status().Update(e.ctx, s); err != nil {
		e.t.Fatal(err)
	}
}

// checkpointWithBytes creates a Checkpoint whose snapshot added n bytes to the store.
func (e *env) checkpointWithBytes(name string, n int64) {
	e.t.Helper()
	ck := &v1alpha1.Checkpoint{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: v1alpha1.CheckpointSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "run"}, Step: new(int64(1)), TurnIndex: new(int32(1)), TranscriptDigest: fakeHash(name)}}
	e.create(ck)
	ck.Status = v1alpha1.CheckpointStatus{Snapshot: v1alpha1.WorkspaceSnapshot{ManifestDigest: fakeHash(name), Files: new(int64(1)), TotalBytes: new(10 * n), IncrementalBytes: new(n)}}
	if err := e.c.Status().Update(e.ctx, ck); err != nil {
		e.t.Fatal(err)
	}
}

// TestAStorageBudgetReportsItsNamespacesUsageAndSaysWhenItIsOver: the budget's status follows the
// sessions and checkpoints of its namespace only, OverBudget turns True with a Warning event when a
// kind passes its limit and False again when it fits, and the gauges say the same.
func TestAStorageBudgetReportsItsNamespacesUsageAndSaysWhenItIsOver(t *testing.T) {
	e := newEnv(t)
	other := newEnv(t) // its objects must not count
	var reader client.Reader
	e.runManager(nil, cache.Options{}, func(mgr ctrl.Manager, deps *Deps, n int64) []setupper {
		r := &StorageBudgetReconciler{Deps: *deps}
		r.Recorder = mgr.GetEventRecorder(fmt.Sprintf("storagebudget-test-%d", n))
		reader = mgr.GetCache()
		return []setupper{r}
	})
	e.sessionWithBytes("run", 600)
	e.checkpointWithBytes("run-step-1", 40)
	other.sessionWithBytes("elsewhere", 1<<40)
	limit := func(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
	b := &v1alpha1.StorageBudget{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: v1alpha1.StorageBudgetSpec{Sessions: limit("1k"), Checkpoints: limit("100")}}
	e.create(b)

	status := func(want string, used, objects [2]int64, over metav1.ConditionStatus, reason string) {
		t.Helper()
		e.eventually(want, func() (bool, string) {
			var got v1alpha1.StorageBudget
			if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(b), &got); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionOverBudget)
			s, k := got.Status.Sessions, got.Status.Checkpoints
			ok := c != nil && c.Status == over && c.Reason == reason && c.ObservedGeneration == got.Generation &&
				s.UsedBytes != nil && *s.UsedBytes == used[0] && *s.Objects == objects[0] && *s.LimitBytes == 1000 &&
				k.UsedBytes != nil && *k.UsedBytes == used[1] && *k.Objects == objects[1] && *k.LimitBytes == 100 &&
				meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady)
			return ok, fmt.Sprintf("%+v", got.Status)
		})
	}
	status("the usage within budget", [2]int64{600, 40}, [2]int64{1, 1}, metav1.ConditionFalse, v1alpha1.ReasonWithinBudget)

	e.sessionWithBytes("fork", 500)
	status("the sessions over budget", [2]int64{1100, 40}, [2]int64{2, 1}, metav1.ConditionTrue, v1alpha1.ReasonSessionsOverBudget)
	e.eventually("a Warning event", func() (bool, string) {
		var list eventsv1.EventList
		if err := e.c.List(e.ctx, &list, client.InNamespace(e.ns)); err != nil {
			return false, err.Error()
		}
		for _, ev := range list.Items {
			if ev.Regarding.Name == "team" && ev.Type == "Warning" && ev.Reason == v1alpha1.ReasonSessionsOverBudget &&
				strings.Contains(ev.Note, "sessions keep 1100 bytes, over their limit of 1000") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
	wantGauges := map[string]float64{
		"agentrewind_storage_bytes{kind=checkpoints,namespace=" + e.ns + "}":        40,
		"agentrewind_storage_bytes{kind=sessions,namespace=" + e.ns + "}":           1100,
		"agentrewind_storage_budget_bytes{kind=checkpoints,namespace=" + e.ns + "}": 100,
		"agentrewind_storage_budget_bytes{kind=sessions,namespace=" + e.ns + "}":    1000,
	}
	e.eventually("the gauges", func() (bool, string) {
		got := gatherGauges(t, reader, e.ns)
		d := cmp.Diff(wantGauges, got)
		return d == "", d
	})

	if err := e.c.Delete(e.ctx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "fork", Namespace: e.ns}}); err != nil {
		t.Fatal(err)
	}
	status("back within budget", [2]int64{600, 40}, [2]int64{1, 1}, metav1.ConditionFalse, v1alpha1.ReasonWithinBudget)

	e.checkpointWithBytes("run-step-2", 61)
	status("the checkpoints over budget", [2]int64{600, 101}, [2]int64{1, 2}, metav1.ConditionTrue, v1alpha1.ReasonCheckpointsOverBudget)
}

// gatherGauges scrapes the storage collector over reader, as the metrics endpoint would, into
// "name{label=value,...}" → value, keeping the series of namespace ns.
func gatherGauges(t *testing.T, reader client.Reader, ns string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := RegisterStorageCollector(reg, reader); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("scraping: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if slices.Contains(labels, "namespace="+ns) {
				out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}
