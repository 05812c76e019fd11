package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

// TestKindsRoundTrip writes a fully populated object of each kind, spec and status, and reads back
// exactly what was written: no field is pruned, renamed or defaulted away.
func TestKindsRoundTrip(t *testing.T) {
	ctx := context.Background()
	now := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	ready := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Verified", Message: "ok",
		LastTransitionTime: now, ObservedGeneration: 1}}

	session := validSession("roundtrip-session")
	session.Spec.ParentRef = &v1.LocalObjectReference{Name: "parent"}
	session.Spec.ForkedAtStep = ptr.To[int64](7)
	session.Spec.Retention = &v1.RetentionSpec{Pin: true, GracePeriod: &metav1.Duration{Duration: time.Hour}}
	sessionStatus := v1.AgentSessionStatus{ObservedGeneration: 1, Phase: v1.SessionVerified, EventsHash: testDigest,
		Events: 40, Steps: 31, ModelCalls: 12, ToolCalls: 15, Usage: &v1.Usage{InputTokens: 900, OutputTokens: 100, TotalTokens: 1000, CostMicroUSD: 4200},
		Blobs: 3, Bytes: 123456, ResumeVerdict: v1.VerdictResumable, Reachability: v1.Reachable,
		ReachabilityReason: "run can still make progress", Conditions: ready}

	checkpoint := validCheckpoint("roundtrip-checkpoint")
	checkpoint.Spec.Workspace = &v1.WorkspaceSnapshotSpec{Volume: v1.WorkspaceVolume{ClaimName: "ws", SubPath: "repo"}, Excludes: []string{"*.log"}}
	checkpointStatus := v1.CheckpointStatus{ObservedGeneration: 1, Phase: v1.CheckpointReady, ManifestDigest: testDigest,
		Files: 10, TotalBytes: 2048, IncrementalBytes: 512, Previous: "roundtrip-checkpoint-0", Conditions: ready}

	fork := validFork("roundtrip-fork")
	fork.Spec.Overrides = &v1.ForkOverrides{System: ptr.To("be careful"), Model: ptr.To("m"), Params: rawJSON(`{"temperature":0}`),
		RequestPatches: []v1.JSONPatchOperation{{Op: "replace", Path: "/max_tokens", Value: rawJSON(`64`)}, {Op: "remove", Path: "/tools/0"}}}
	fork.Spec.Tools = &v1.ToolPolicy{OnMatch: v1.ToolServeRecorded, OnMiss: v1.ToolMissStub}
	fork.Spec.DriftPolicy = v1.DriftWarn
	fork.Spec.Mode = v1.ModeFork
	fork.Spec.Goal = &v1.Goal{Tool: "add_label", ArgsMatch: rawJSON(`{"label":"bug"}`)}
	fork.Spec.ProviderSecretRef = &v1.LocalObjectReference{Name: "keys"}
	fork.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
	forkStatus := v1.ForkRunStatus{ObservedGeneration: 1, Phase: v1.ForkDiverged, ChildSession: "child", ReachedGoal: ptr.To(false),
		DivergedAtStep: ptr.To[int64](5), FirstDivergence: &v1.Divergence{Step: 5, Kind: "model_call", CallSite: "agent.go:42",
			ExpectedFingerprint: testDigest, ActualFingerprint: testDigest, Message: "system prompt differs"},
		TokensSpent: 77, Provenance: &v1.Provenance{Recorded: 4, Live: 2, Stub: 1}, JobName: "roundtrip-fork-x",
		StartTime: &now, CompletionTime: &now, Conditions: ready}

	plan := validPlan("roundtrip-plan")
	plan.Spec.Git = &v1.GitEvidence{URL: "https://example.com/r.git", Ref: "main", CredentialsSecretRef: &v1.LocalObjectReference{Name: "git"}}
	planStatus := v1.ResumePlanStatus{ObservedGeneration: 1, Verdict: v1.VerdictResumable, Reason: "step 3 unverified",
		ResumeSHA: "abc1234", ResidualSteps: 1, Residual: []v1.PlanStep{{ID: "s3"}}, Verified: []v1.PlanStep{{ID: "s1", SHA: "abc1234"}},
		Suspended: true, Rewind: &v1.RewindPlan{Decision: v1.DecisionRewind, Reason: "diverged", RewindToTurn: ptr.To[int32](4),
			DroppedTurns: 2, NoGoodNote: []string{"RESUME DIVERGED at step s2"}},
		Reachability: v1.Reachable, ReachabilityReason: "resumable",
		Reconciliation: &v1.Reconciliation{Promised: 3, MarkedDone: 2, Evidenced: 1, ClaimedWithoutEvidence: []string{"s2"}, UnpromisedFiles: []string{"x.go"}},
		EvaluatedAt:    &now, Conditions: ready}

	cases := []struct {
		name       string
		obj, fresh client.Object
		setStatus  func(client.Object)
		spec       func(client.Object) any
		status     func(client.Object) any
	}{
		{"AgentSession", session, &v1.AgentSession{},
			func(o client.Object) { o.(*v1.AgentSession).Status = sessionStatus },
			func(o client.Object) any { return o.(*v1.AgentSession).Spec },
			func(o client.Object) any { return o.(*v1.AgentSession).Status }},
		{"Checkpoint", checkpoint, &v1.Checkpoint{},
			func(o client.Object) { o.(*v1.Checkpoint).Status = checkpointStatus },
			func(o client.Object) any { return o.(*v1.Checkpoint).Spec },
			func(o client.Object) any { return o.(*v1.Checkpoint).Status }},
		{"ForkRun", fork, &v1.ForkRun{},
			func(o client.Object) { o.(*v1.ForkRun).Status = forkStatus },
			func(o client.Object) any { return o.(*v1.ForkRun).Spec },
			func(o client.Object) any { return o.(*v1.ForkRun).Status }},
		{"ResumePlan", plan, &v1.ResumePlan{},
			func(o client.Object) { o.(*v1.ResumePlan).Status = planStatus },
			func(o client.Object) any { return o.(*v1.ResumePlan).Spec },
			func(o client.Object) any { return o.(*v1.ResumePlan).Status }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantSpec := tc.spec(tc.obj)
			if err := apiServer.Client.Create(ctx, tc.obj); err != nil {
				t.Fatalf("create: %v", err)
			}
			tc.setStatus(tc.obj)
			wantStatus := tc.status(tc.obj)
			if err := apiServer.Client.Status().Update(ctx, tc.obj); err != nil {
				t.Fatalf("status update: %v", err)
			}
			if err := apiServer.Client.Get(ctx, client.ObjectKeyFromObject(tc.obj), tc.fresh); err != nil {
				t.Fatalf("get: %v", err)
			}
			if !equality.Semantic.DeepEqual(wantSpec, tc.spec(tc.fresh)) {
				t.Errorf("spec changed on the way through the API server:\nwrote %+v\nread  %+v", wantSpec, tc.spec(tc.fresh))
			}
			if !equality.Semantic.DeepEqual(wantStatus, tc.status(tc.fresh)) {
				t.Errorf("status changed on the way through the API server:\nwrote %+v\nread  %+v", wantStatus, tc.status(tc.fresh))
			}
		})
	}
}

// TestSamplesAreAccepted applies every object in config/samples, as `kubectl apply -k config/samples`
// would, and expects the API server to accept each one.
func TestSamplesAreAccepted(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "agentrewind_*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("want at least one sample per kind in config/samples, found %v (%v)", files, err)
	}
	kinds := map[string]bool{}
	ns := "samples"
	if err := apiServer.Client.Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}); err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096).Decode(&obj.Object); err != nil {
				t.Fatalf("decoding %s: %v", file, err)
			}
			obj.SetNamespace(ns)
			if err := apiServer.Client.Create(context.Background(), obj); err != nil {
				t.Fatalf("the API server rejected %s: %v", filepath.Base(file), err)
			}
			kinds[obj.GetKind()] = true
		})
	}
	for _, kind := range []string{"AgentSession", "Checkpoint", "ForkRun", "ResumePlan"} {
		if !kinds[kind] {
			t.Errorf("no accepted sample of kind %s", kind)
		}
	}
}
