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
	ready := []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonSucceeded, Message: "ok",
		LastTransitionTime: now, ObservedGeneration: 1}}

	session := validSession("roundtrip-session")
	session.Spec.ParentRef = v1.LocalObjectReference{Name: "parent"}
	session.Spec.ForkedAtStep = ptr.To[int64](7)
	session.Spec.Storage = tenantStorage()
	session.Spec.Storage.Prefix = "team-a"
	session.Spec.Storage.Credentials.SessionToken = v1.SecretKeyReference{Name: "s3", Key: "token"}
	session.Spec.Retention = v1.RetentionSpec{Policy: v1.RetentionRetain, GracePeriodSeconds: ptr.To[int64](3600)}
	// Zeros are written as zeros: a real 0 must read back as 0, not as unset.
	usage := v1.Usage{InputTokens: ptr.To[int64](900), OutputTokens: ptr.To[int64](100), CacheCreationInputTokens: ptr.To[int64](0),
		CacheReadInputTokens: ptr.To[int64](0), TotalTokens: ptr.To[int64](1000), CostMicroUSD: ptr.To[int64](0)}
	sessionStatus := v1.AgentSessionStatus{Conditions: ready, ObservedGeneration: 1,
		Recording: v1.SessionRecording{EventsHash: testDigest, LogState: v1.LogOpen, Events: ptr.To[int64](40), Steps: ptr.To[int64](31),
			ModelCalls: ptr.To[int64](12), ToolCalls: ptr.To[int64](0), Blobs: ptr.To[int64](3), Bytes: ptr.To[int64](123456), Usage: usage},
		ResumeVerdict: v1.VerdictResumable,
		Reachability:  v1.ReachabilityStatus{State: v1.Reachable, Reason: "ResumableRetained", Message: "run can still make progress"}}

	checkpoint := validCheckpoint("roundtrip-checkpoint")
	checkpoint.Spec.Workspace = v1.WorkspaceSnapshotSpec{Volume: v1.WorkspaceVolume{ClaimName: "ws", SubPath: "repo"}, Excludes: []string{"*.log"}}
	checkpointStatus := v1.CheckpointStatus{Conditions: ready, ObservedGeneration: 1, Snapshot: v1.WorkspaceSnapshot{ManifestDigest: testDigest,
		Files: ptr.To[int64](10), TotalBytes: ptr.To[int64](2048), IncrementalBytes: ptr.To[int64](0),
		PreviousRef: v1.LocalObjectReference{Name: "roundtrip-checkpoint-0"}}}

	fork := validFork("roundtrip-fork")
	fork.Spec.Fork.Overrides = v1.ForkOverrides{System: "be careful", Model: "m", Params: rawJSON(`{"temperature":0}`),
		RequestPatches: []v1.JSONPatchOperation{{Op: "replace", Path: "/max_tokens", Value: rawJSON(`64`)}, {Op: "remove", Path: "/tools/0"}}}
	fork.Spec.Fork.Tools = v1.ToolPolicy{OnMatch: v1.ToolServeRecorded, OnMiss: v1.ToolMissStub}
	fork.Spec.Fork.DriftPolicy = v1.DriftWarn
	fork.Spec.Fork.ProviderKeys = v1.ProviderKeys{Anthropic: v1.SecretKeyReference{Name: "keys", Key: "anthropic"}}
	fork.Spec.Goal = v1.Goal{Tool: "add_label", ArgsMatch: rawJSON(`{"label":"bug"}`)}
	fork.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
	stalled := []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonDiverged, Message: "drift at step 5",
		LastTransitionTime: now, ObservedGeneration: 1}, {Type: v1.ConditionStalled, Status: metav1.ConditionTrue, Reason: v1.ReasonDiverged,
		Message: "drift at step 5", LastTransitionTime: now, ObservedGeneration: 1}}
	forkStatus := v1.ForkRunStatus{Conditions: stalled, ObservedGeneration: 1, Outcome: v1.OutcomeDiverged,
		ChildSessionRef: v1.LocalObjectReference{Name: "child"}, JobRef: v1.LocalObjectReference{Name: "roundtrip-fork-x"},
		Divergences: ptr.To[int64](0), FirstDivergence: v1.Divergence{Step: ptr.To[int64](5), Kind: v1.CallModel, Lane: "0", Reason: "NoRecordedCall",
			ExpectedCallSite: "agent.go:42", ActualCallSite: "agent.go:44", ExpectedFingerprint: testDigest, ActualFingerprint: testDigest,
			Message: "system prompt differs"},
		Usage:      v1.ForkUsage{Live: usage, Replayed: usage},
		Provenance: v1.Provenance{Recorded: ptr.To[int64](4), Live: ptr.To[int64](2), Stub: ptr.To[int64](0)},
		StartTime:  &now, CompletionTime: &now}

	plan := validPlan("roundtrip-plan")
	plan.Spec.Git = v1.GitEvidence{URL: "https://example.com/r.git", Ref: "main",
		Auth: v1.GitAuth{Username: "bot", PasswordSecretRef: v1.SecretKeyReference{Name: "git", Key: "token"}}}
	commit := strings.Repeat("ab", 20)
	planStatus := v1.ResumePlanStatus{Conditions: ready, ObservedGeneration: 1, Verdict: v1.VerdictResumable, Reason: "ResidualRemains",
		Message: "step s3 is not verified", ResumeSHA: commit, ResidualSteps: ptr.To[int32](300), Residual: []v1.PlanStep{{ID: "s3"}},
		Verified: []v1.PlanStep{{ID: "s1", SHA: commit}}, Truncated: []v1.ListTruncation{{Field: "residual", Total: 300}},
		Stop: v1.RunSuspended,
		Rewind: v1.RewindPlan{Decision: v1.DecisionRewind, Reason: "RewindToMintedCheckpoint", Message: "rewound", RewindToTurn: ptr.To[int32](0),
			TranscriptDigest: testDigest, DroppedTurns: ptr.To[int32](2), NoGoodNote: []string{"RESUME DIVERGED at step s2"}},
		Reachability: v1.ReachabilityStatus{State: v1.Reachable, Reason: "ResumableRetained", Message: "resumable"},
		Convergence: v1.Convergence{Verdict: v1.ConvergenceThrashing, Reason: "ResidualReachedNewLow", Message: "m",
			Window: ptr.To[int32](6), Observations: ptr.To[int32](9), Changes: ptr.To[int32](0)},
		Drift: v1.PlanDrift{Verdict: v1.DriftDrifting, UnattributedFiles: []string{"x.go", "y.go", "z.go"}, Suggestion: "back to s3"},
		Reconciliation: v1.Reconciliation{Promised: ptr.To[int32](3), MarkedDone: ptr.To[int32](2), Evidenced: ptr.To[int32](0),
			ClaimedWithoutEvidence: []string{"s2"}, UnpromisedFiles: []string{"x.go"}},
		Evidence:    v1.PlanEvidence{EventsHash: testDigest, ResolvedCommit: commit, Plan: v1.PlanDeclared},
		EvaluatedAt: &now}

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
