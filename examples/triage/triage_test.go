package triage

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestPromptFixForkReachesTheGoal is the sample-agent scenario: record the agent, step to its bad
// decision, fork there with the one-line prompt fix, and reach the goal it missed — paying only for
// the live tail.
func TestPromptFixForkReachesTheGoal(t *testing.T) {
	ctx := context.Background()
	var applied []string
	model := &Model{}
	dir := filepath.Join(t.TempDir(), "recorded")
	if _, err := replay.Record(ctx, replay.RecordOptions{Dir: dir, ID: "triage-1", Model: model, Tools: Tools(&applied)}, Agent(SystemPrompt)); err != nil {
		t.Fatal(err)
	}
	if len(applied) != 1 || applied[0] != "bug" {
		t.Fatalf("recorded run applied %v; the scenario needs the bad label", applied)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if replay.Trace(s.Events).Reached(Goal) {
		t.Fatal("the recording already reaches the goal")
	}
	step, ok := DecisionStep(s.Events)
	if !ok {
		t.Fatal("no decision step in the recording")
	}
	fix := PromptFix
	live := &Model{}
	res, err := replay.Fork(ctx, replay.ForkOptions{Parent: s, Dir: filepath.Join(t.TempDir(), "fork"), AtStep: step, Model: live,
		Overrides: replay.Overrides{System: &fix}, OnMiss: replay.OnMissStub, Goal: &Goal}, Agent(SystemPrompt))
	if err != nil {
		t.Fatal(err)
	}
	if res.ReachedGoal == nil || !*res.ReachedGoal || res.HarnessErr != nil {
		t.Fatalf("goal reached %v, harness error %v", res.ReachedGoal, res.HarnessErr)
	}
	if live.Calls.Load() != 1 || res.TokensSpent.Total() == 0 || res.TokensSpent.Total() >= replay.Trace(res.Trace).Usage().Total() {
		t.Fatalf("live calls %d, tokens spent %+v of %+v", live.Calls.Load(), res.TokensSpent, replay.Trace(res.Trace).Usage())
	}
	if d := replay.Compare(s.Events, res.Trace); d == nil || d.Step != step {
		t.Fatalf("the fork should part from the recording at step %d: %v", step, d)
	}
}
