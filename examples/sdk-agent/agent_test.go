package sdkagent

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/pkg/rewind"
	"github.com/agentrewind/agentrewind/pkg/rewind/rewindtest"
)

// noLiveCalls fails the test if a replay ever reaches a live model.
type noLiveCalls struct{ t *testing.T }

func (m noLiveCalls) Create(context.Context, rewind.Request) (*rewind.Response, error) {
	m.t.Error("the replay called the live model")
	return nil, errors.New("no live calls")
}

func TestRecordReplayAndForkFromAnotherModule(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	live := &Model{}
	if _, err := rewind.Record(context.Background(), rewind.RecordOptions{Dir: dir, Model: live, Tools: Tools()}, Agent("be terse")); err != nil {
		t.Fatal(err)
	}
	if live.Calls != 1 {
		t.Fatalf("the recording made %d model calls, want 1", live.Calls)
	}

	// The recording is a regression test: zero live calls, and the same greeting is sent.
	res := rewindtest.FromSession(t, dir, Agent("be terse"), rewind.Config{})
	var sent string
	for _, ev := range res.Events {
		if ev.Name == "send" {
			sent = string(ev.Args)
		}
	}
	if sent != `{"text":"Hello"}` {
		t.Fatalf("the replay sent %s, want the recorded greeting", sent)
	}
	s, err := rewind.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rewind.Replay(context.Background(), rewind.ReplayOptions{Session: s, Model: noLiveCalls{t}}, Agent("be warm")); err == nil {
		t.Fatal("a changed system prompt replayed without a drift")
	} else if !errors.As(err, new(*rewind.DriftError)) {
		t.Fatalf("err = %v, want a *rewind.DriftError", err)
	}

	// A fork from the model call goes live with a warmer prompt and sends a different greeting.
	warm := "be warm"
	fork, err := rewind.Fork(context.Background(), rewind.ForkOptions{Parent: s, Dir: filepath.Join(t.TempDir(), "fork"), AtStep: modelStep(t, s),
		Model: live, Overrides: rewind.Overrides{System: &warm}, OnMiss: rewind.OnMissStub,
		Goal: &rewind.Goal{Tool: "send", ArgsMatch: json.RawMessage(`{"text":"Welcome back, friend"}`)}}, Agent("be terse"))
	if err != nil {
		t.Fatal(err)
	}
	if fork.ReachedGoal == nil || !*fork.ReachedGoal || fork.TokensSpent.OutputTokens != 3 {
		t.Fatalf("fork: goal %v, tokens %+v", fork.ReachedGoal, fork.TokensSpent)
	}
}

func modelStep(t *testing.T, s *rewind.Session) int64 {
	for _, ev := range s.Events {
		if ev.Kind == "model_call" {
			return ev.Step
		}
	}
	t.Fatal("no model call in the recording")
	return 0
}
