package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

func TestCheckpointNamesAreDeterministicAndFitWithoutColliding(t *testing.T) {
	if got := CheckpointName("run-1", 42); got != "run-1-step-42" {
		t.Errorf("CheckpointName = %q, want run-1-step-42", got)
	}
	long := strings.Repeat("a", 250)
	a, b := CheckpointName(long+"x", 9007199254740991), CheckpointName(long+"y", 9007199254740991)
	if a == b || len(a) > 253 || !strings.HasSuffix(a, "-step-9007199254740991") || len(validation.IsDNS1123Subdomain(a)) != 0 {
		t.Errorf("long names %q and %q", a, b)
	}
	if a != CheckpointName(long+"x", 9007199254740991) {
		t.Error("CheckpointName is not deterministic")
	}
	for _, name := range []string{"run-1", strings.Repeat("b", 63), strings.Repeat("c", 64), strings.Repeat("d.", 120)} {
		if l := sessionLabel(name); len(validation.IsValidLabelValue(l)) != 0 || (len(name) <= 63 && l != name) {
			t.Errorf("sessionLabel(%q) = %q", name, l)
		}
	}
}

// TestOnlyTheAnchorTheRunIsParkedAtSnapshotsTheWorkspace: today's workspace is the workspace of a step
// only while the run stands still at it, so only that anchor's Checkpoint asks for a snapshot.
func TestOnlyTheAnchorTheRunIsParkedAtSnapshotsTheWorkspace(t *testing.T) {
	s := &v1alpha1.AgentSession{Spec: v1alpha1.AgentSessionSpec{Agent: v1alpha1.AgentSpec{Workspace: v1alpha1.WorkspaceVolume{ClaimName: "ws"}}}}
	s.Name, s.Namespace = "run-1", "team"
	anchors := []task.Anchor{{Step: 2, TurnIndex: 0, TranscriptDigest: strings.Repeat("a", 64)}, {Step: 5, TurnIndex: 1, TranscriptDigest: strings.Repeat("b", 64)}}
	snapshots := func(v task.VerifyResult, s *v1alpha1.AgentSession) []string {
		var out []string
		for _, ck := range checkpointsFor(s, &v) {
			if ck.Spec.Workspace.Volume.ClaimName != "" {
				out = append(out, ck.Name)
			}
		}
		return out
	}
	noClaim := s.DeepCopy()
	noClaim.Spec.Agent.Workspace = v1alpha1.WorkspaceVolume{}
	cases := []struct {
		name    string
		v       task.VerifyResult
		session *v1alpha1.AgentSession
		want    []string
	}{
		{"parked at the latest anchor of an open log", task.VerifyResult{Steps: 6, Anchors: anchors}, s, []string{"run-1-step-5"}},
		{"the run went on after it", task.VerifyResult{Steps: 8, Anchors: anchors}, s, nil},
		{"the log is closed", task.VerifyResult{Steps: 6, Ended: true, Anchors: anchors}, s, nil},
		{"the session names no workspace", task.VerifyResult{Steps: 6, Anchors: anchors}, noClaim, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if d := cmp.Diff(c.want, snapshots(c.v, c.session)); d != "" {
				t.Errorf("Checkpoints with a snapshot (-want +got):\n%s", d)
			}
			if n := len(checkpointsFor(c.session, &c.v)); n != 2 {
				t.Errorf("%d Checkpoints for 2 anchors", n)
			}
		})
	}
}
