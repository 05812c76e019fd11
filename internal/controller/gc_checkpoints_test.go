package controller

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// checkpointFixture creates a Checkpoint of session at step whose snapshot is manifest, stored in the
// namespace's store.
func (h *gcHarness) checkpointFixture(name, session string, step int64, manifest string, labels map[string]string) {
	h.t.Helper()
	ck := &v1alpha1.Checkpoint{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns, Labels: labels},
		Spec: v1alpha1.CheckpointSpec{SessionRef: v1alpha1.LocalObjectReference{Name: session}, Step: new(step), TurnIndex: new(int32(step)),
			TranscriptDigest: fakeHash(name)}}
	h.create(ck)
	n := new(int64(100))
	ck.Status = v1alpha1.CheckpointStatus{Snapshot: v1alpha1.WorkspaceSnapshot{ManifestDigest: fakeHash(manifest), Files: n, TotalBytes: n, IncrementalBytes: n}}
	if err := h.c.Status().Update(h.ctx, ck); err != nil {
		h.t.Fatal(err)
	}
	key := h.storeKey("checkpoints", fakeHash(manifest), "manifest.json")
	if err := openStore(h.t, "").Objects().Put(h.ctx, key, bytes.NewReader([]byte(manifest)), int64(len(manifest))); err != nil {
		h.t.Fatal(err)
	}
}

func (h *gcHarness) checkpoints() (live, deleting []string) {
	h.t.Helper()
	var list v1alpha1.CheckpointList
	if err := h.c.List(h.ctx, &list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	for _, ck := range list.Items {
		if ck.DeletionTimestamp.IsZero() {
			live = append(live, ck.Name)
		} else {
			deleting = append(deleting, ck.Name)
		}
	}
	slices.Sort(live)
	return live, deleting
}

func (h *gcHarness) manifests() []string {
	var out []string
	for _, k := range keys(h.t, h.storeKey("checkpoints")+"/") {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(k, h.storeKey("checkpoints")+"/"), "/manifest.json"))
	}
	slices.Sort(out)
	return out
}

// The prune plan keeps the newest Checkpoint of a session and those kept for their own sake; the
// Checkpoints of a deleted session go with it; a manifest goes with the last Checkpoint holding it.
// The grace runs on the injected clock, and a session's own gracePeriodSeconds overrides --gc-grace.
func TestGCPrunesCheckpointsAndRunsTheGraceOnItsClock(t *testing.T) {
	h := newGCHarness(t, GCOptions{Interval: time.Minute, Grace: 7 * 24 * time.Hour, CheckpointKeep: 1, SweepLeaseDuration: time.Minute})
	h.populate([]gcSession{
		{name: "live-run", verdict: v1alpha1.VerdictResumable, evaluated: 30 * 24 * time.Hour},
		{name: "old-run", verdict: v1alpha1.VerdictComplete, evaluated: 10 * 24 * time.Hour},
		{name: "fresh-run", verdict: v1alpha1.VerdictComplete, evaluated: time.Hour},
		// complete two hours ago, its own grace an hour
		{name: "short-grace", verdict: v1alpha1.VerdictComplete, evaluated: 2 * time.Hour},
	})
	var s v1alpha1.AgentSession
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "short-grace"}, &s); err != nil {
		t.Fatal(err)
	}
	s.Spec.Retention = v1alpha1.RetentionSpec{GracePeriodSeconds: new(int64(3600))}
	if err := h.c.Update(h.ctx, &s); err != nil {
		t.Fatal(err)
	}
	h.checkpointFixture("live-1", "live-run", 1, "manifest of live-1", nil)
	h.checkpointFixture("live-2", "live-run", 2, "manifest of live-2 and live-3", nil)
	h.checkpointFixture("live-3", "live-run", 3, "manifest of live-2 and live-3", nil) // deduplicated against live-2
	h.checkpointFixture("live-0-kept", "live-run", 0, "manifest of live-0", map[string]string{LabelKeep: "true"})
	h.checkpointFixture("old-1", "old-run", 1, "manifest of old-1", nil)
	h.eventually("the cache to hold the Checkpoints and the grace", func() (bool, string) {
		var list v1alpha1.CheckpointList
		var s v1alpha1.AgentSession
		if err := h.gc.List(h.ctx, &list, client.InNamespace(h.ns)); err != nil {
			return false, err.Error()
		}
		if err := h.gc.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "short-grace"}, &s); err != nil {
			return false, err.Error()
		}
		n := 0
		for _, ck := range list.Items {
			if ck.Status.Snapshot.ManifestDigest != "" {
				n++
			}
		}
		return n == 5 && s.Spec.Retention.GracePeriodSeconds != nil, fmt.Sprintf("%d Checkpoints with a snapshot", n)
	})

	rep, err := h.gc.Pass(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{h.ns + "/old-run", h.ns + "/short-grace"}, rep.Deleted); d != "" {
		t.Errorf("deleted (-want +got):\n%s", d)
	}
	live, _ := h.checkpoints()
	if d := cmp.Diff([]string{"live-0-kept", "live-3"}, live); d != "" {
		t.Errorf("Checkpoints left (-want +got):\n%s", d)
	}
	want := []string{fakeHash("manifest of live-0"), fakeHash("manifest of live-2 and live-3")}
	slices.Sort(want)
	if d := cmp.Diff(want, h.manifests()); d != "" {
		t.Errorf("manifests left (-want +got):\n%s", d)
	}

	// A week later fresh-run's grace is over; live-run, resumable, stays however old.
	h.clock.Step(7 * 24 * time.Hour)
	if rep, err = h.gc.Pass(h.ctx); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{h.ns + "/fresh-run"}, rep.Deleted); d != "" {
		t.Errorf("deleted a week later (-want +got):\n%s", d)
	}
	var left v1alpha1.AgentSession
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "live-run"}, &left); err != nil || !left.DeletionTimestamp.IsZero() {
		t.Errorf("live-run: %v, deleting %v", err, left.DeletionTimestamp)
	}
}
