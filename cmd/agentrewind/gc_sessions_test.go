package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller"
)

// gcTestSession is one AgentSession of the report's population and the ResumePlan verdict written
// for it (none when verdict is empty), evaluated that long ago.
type gcTestSession struct {
	name      string
	verdict   v1alpha1.ResumeVerdict
	evaluated time.Duration
	mutate    func(*v1alpha1.AgentSession)
}

// createGCPopulation creates each session with a verified status, and its ResumePlan with the
// verdict, as the controllers would have written them.
func createGCPopulation(t *testing.T, c client.Client, ns string, pop []gcTestSession) {
	t.Helper()
	ctx := context.Background()
	for _, p := range pop {
		s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns}, Spec: v1alpha1.AgentSessionSpec{SessionID: p.name}}
		if p.mutate != nil {
			p.mutate(s)
		}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		hash := fmt.Sprintf("%064x", len(p.name))
		n := new(int64(3))
		s.Status.Recording = v1alpha1.SessionRecording{EventsHash: hash, LogState: v1alpha1.LogClosed, Events: n, Steps: n, ModelCalls: n, ToolCalls: n, Blobs: n, Bytes: n,
			Usage: v1alpha1.Usage{InputTokens: n, OutputTokens: n, CacheCreationInputTokens: n, CacheReadInputTokens: n, TotalTokens: n, CostMicroUSD: n}}
		if err := c.Status().Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		if p.verdict == "" {
			continue
		}
		rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns},
			Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: p.name}}}
		if err := c.Create(ctx, rp); err != nil {
			t.Fatal(err)
		}
		state, reason := v1alpha1.Reachable, "ResumableRetained"
		if p.verdict == v1alpha1.VerdictComplete {
			state, reason = v1alpha1.Collectible, "CompleteCollectible"
		}
		at := metav1.NewTime(time.Now().Add(-p.evaluated))
		rp.Status = v1alpha1.ResumePlanStatus{ObservedGeneration: rp.Generation, Verdict: p.verdict, Reason: "ResidualRemains", Message: "judged by the test",
			Reachability: v1alpha1.ReachabilityStatus{State: state, Reason: reason, Message: string(p.verdict) + " by the test"},
			Evidence:     v1alpha1.PlanEvidence{EventsHash: hash, Plan: v1alpha1.PlanDeclared}, EvaluatedAt: &at,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonVerdictComputed,
				Message: "computed", ObservedGeneration: rp.Generation, LastTransitionTime: at}}}
		if err := c.Status().Update(ctx, rp); err != nil {
			t.Fatal(err)
		}
	}
}

// gc report --sessions decides over a real API server exactly as a GC pass does: a collectible session
// past its grace (the flag's, or its own spec.retention) is deleted now, a younger one after its grace,
// a reachable one never however old (a resumable verdict, a pin, no verdict yet); -n limits the
// namespaces; and the report changes nothing in the cluster.
func TestGCReportSessionsSaysWhatTheGCWouldDeleteAndWhy(t *testing.T) {
	c, kubeconfig := apiServerWithKubeconfig(t, "gc-reporter")
	ctx := context.Background()
	var namespaces []string
	for range 2 {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-report-"}}
		if err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		namespaces = append(namespaces, ns.Name)
	}
	day := 24 * time.Hour
	createGCPopulation(t, c, namespaces[0], []gcTestSession{
		{name: "done-old", verdict: v1alpha1.VerdictComplete, evaluated: 10 * day},
		{name: "done-young", verdict: v1alpha1.VerdictComplete, evaluated: time.Hour},
		{name: "short-grace", verdict: v1alpha1.VerdictComplete, evaluated: 2 * time.Hour,
			mutate: func(s *v1alpha1.AgentSession) { s.Spec.Retention.GracePeriodSeconds = new(int64(60)) }},
		{name: "resumable-ancient", verdict: v1alpha1.VerdictResumable, evaluated: 400 * day},
		{name: "pinned-done", verdict: v1alpha1.VerdictComplete, evaluated: 10 * day,
			mutate: func(s *v1alpha1.AgentSession) { s.Labels = map[string]string{controller.LabelKeep: "true"} }},
		{name: "no-verdict"},
	})
	createGCPopulation(t, c, namespaces[1], []gcTestSession{{name: "elsewhere", verdict: v1alpha1.VerdictComplete, evaluated: 10 * day}})
	var before v1alpha1.AgentSessionList
	if err := c.List(ctx, &before); err != nil {
		t.Fatal(err)
	}

	out, err := runCLI(t, "gc", "report", "--sessions", "--kubeconfig", kubeconfig, "--grace", "24h", "-n", namespaces[0])
	if err != nil {
		t.Fatalf("gc report --sessions: %v\n%s", err, out)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 5 && strings.Contains(f[0], "/") {
			rows[strings.TrimPrefix(f[0], namespaces[0]+"/")] = strings.Join(f[1:5], " ")
		}
	}
	want := map[string]string{
		"done-old":          "Collectible CompleteCollectible delete now",
		"short-grace":       "Collectible CompleteCollectible delete now",
		"done-young":        "Collectible CompleteCollectible keep after",
		"resumable-ancient": "Reachable ResumableRetained keep never",
		"pinned-done":       "Reachable Pinned keep never",
		"no-verdict":        "Reachable VerdictPending keep never",
	}
	if d := cmp.Diff(want, rows); d != "" {
		t.Errorf("the report's rows (-want +got):\n%s\n%s", d, out)
	}
	if !strings.Contains(out, "6 session(s): 3 reachable (kept however old), 3 collectible, 2 would be deleted now (grace 24h0m0s).") {
		t.Errorf("the summary line is missing or wrong:\n%s", out)
	}

	out, err = runCLI(t, "gc", "report", "--sessions", "--kubeconfig", kubeconfig, "--grace", "24h", "-o", "json")
	if err != nil {
		t.Fatalf("gc report --sessions -o json: %v\n%s", err, out)
	}
	var rep struct {
		Grace     string `json:"grace"`
		Decisions []struct {
			Session      string `json:"session"`
			Reachability string `json:"reachability"`
			Delete       bool   `json:"delete"`
		} `json:"decisions"`
		Deleted int `json:"deleted"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	var deleted []string
	for _, d := range rep.Decisions {
		if d.Delete {
			deleted = append(deleted, d.Session)
		}
		if d.Reachability != string(v1alpha1.Reachable) && d.Reachability != string(v1alpha1.Collectible) {
			t.Errorf("%s: reachability %q is not spelt as in the AgentSession's status", d.Session, d.Reachability)
		}
	}
	// Decisions come in namespace then name order; the namespaces' generated names set theirs.
	wantDeleted := []string{namespaces[0] + "/done-old", namespaces[0] + "/short-grace", namespaces[1] + "/elsewhere"}
	slices.Sort(wantDeleted)
	if len(rep.Decisions) != 7 || rep.Deleted != 3 || rep.Grace != "24h0m0s" || !cmp.Equal(deleted, wantDeleted) {
		t.Errorf("all namespaces: %d decisions, %d deleted %v, grace %s; want 7, %v, 24h0m0s", len(rep.Decisions), rep.Deleted, deleted, rep.Grace, wantDeleted)
	}

	var after v1alpha1.AgentSessionList
	if err := c.List(ctx, &after); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before.Items, after.Items); d != "" {
		t.Errorf("the report changed the cluster's AgentSessions (-before +after):\n%s", d)
	}

	if _, err := runCLI(t, "gc", "report", "--sessions", "--kubeconfig", kubeconfig, "--store", "s3://b/p"); err == nil || !strings.Contains(err.Error(), "--store is for the blob report") {
		t.Errorf("--sessions with --store: error %v, want one saying --store is for the blob report", err)
	}
}
