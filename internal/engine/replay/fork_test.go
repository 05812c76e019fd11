package replay

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Steps of the triage recording: 0 session_start, 1 uuid, 2 clock, 3 plan, 4 search_issues,
// 5 decide, 6 add_label, 7 session_end.
const decideStep = 5

func forkTriage(t *testing.T, parent *session.Session, opts ForkOptions, system string) *ForkResult {
	t.Helper()
	opts.Parent = parent
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "child")
	}
	if opts.Config.Now == nil {
		opts.Config = liveEntropy()
	}
	res, err := Fork(context.Background(), opts, triageAgent(system))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestForkWhoseTailCoincidesWithTheRecordingReachesTheGoal(t *testing.T) {
	parent, _ := recordTriage(t, liveEntropy())
	model := triageModel()
	dir := filepath.Join(t.TempDir(), "child")
	res := forkTriage(t, parent, ForkOptions{Dir: dir, AtStep: decideStep, Model: model, OnMiss: OnMissError,
		Goal: &Goal{Tool: "add_label", ArgsMatch: json.RawMessage(`{"label":"bug"}`)}}, triageSystem)
	if res.ReachedGoal == nil || !*res.ReachedGoal {
		t.Fatalf("goal not reached; trace %s", kinds(res.Trace))
	}
	if res.DivergedAtStep != nil || res.HarnessErr != nil {
		t.Fatalf("diverged at %v, harness error %v", res.DivergedAtStep, res.HarnessErr)
	}
	if model.calls.Load() != 1 {
		t.Fatalf("live model calls %d: only the tail's one model call should go live", model.calls.Load())
	}
	// Provenance: uuid, clock, plan and search served; decide live; add_label served (it matched).
	if res.Provenance != (ProvenanceCounts{Recorded: 3, Live: 1}) {
		t.Fatalf("provenance %+v", res.Provenance)
	}
	tags := map[int64]session.Provenance{}
	for _, ev := range res.Trace {
		tags[ev.Step] = ev.Provenance
	}
	if tags[3] != session.ProvenanceRecorded || tags[5] != session.ProvenanceLive || tags[6] != session.ProvenanceRecorded {
		t.Fatalf("provenance tags by step: %v", tags)
	}
	child, err := session.Open(dir)
	if err != nil {
		t.Fatalf("the child session is not committed: %v", err)
	}
	if child.Meta.Parent != "triage" || len(child.Events) != len(res.Trace) || child.Events[5].Provenance != session.ProvenanceLive {
		t.Fatalf("child session on disk: meta %+v, %d events", child.Meta, len(child.Events))
	}
}

func TestForkHaltsAtAnUnrecordedToolCall(t *testing.T) {
	parent, _ := recordTriage(t, liveEntropy())
	fix := "You are a triage bot. Always check CODEOWNERS before labelling."
	res := forkTriage(t, parent, ForkOptions{AtStep: decideStep, Model: triageModel(), OnMiss: OnMissError,
		Goal: &Goal{Tool: "add_label", ArgsMatch: json.RawMessage(`{"label":"needs-owner-review"}`)}},
		triageSystem)
	// Without an override the tail matches; with the prompt fix applied as an override it must not.
	if res.DivergedAtStep != nil {
		t.Fatalf("unexpected divergence at %d", *res.DivergedAtStep)
	}
	res = forkTriage(t, parent, ForkOptions{AtStep: decideStep, Model: triageModel(), OnMiss: OnMissError,
		Overrides: Overrides{System: &fix},
		Goal:      &Goal{Tool: "add_label", ArgsMatch: json.RawMessage(`{"label":"needs-owner-review"}`)}}, triageSystem)
	if res.DivergedAtStep == nil || *res.DivergedAtStep != 6 {
		t.Fatalf("diverged at %v, want step 6 (the unrecorded add_label call)", res.DivergedAtStep)
	}
	if res.ReachedGoal == nil || *res.ReachedGoal {
		t.Fatal("a halted call cannot reach the goal")
	}
	if res.HarnessErr != nil {
		t.Fatalf("the fork's own halt leaked as a harness error: %v", res.HarnessErr)
	}
	var d *DriftError
	if !errors.As(res.Divergence, &d) || d.Kind != session.KindToolCall {
		t.Fatalf("divergence %v", res.Divergence)
	}
}

// TestSampleAgentForkWithAPromptFixReachesTheGoal is the M5 scenario: record the triage agent, step to
// its bad decision, fork there with a one-line prompt fix, and reach the goal it missed.
func TestSampleAgentForkWithAPromptFixReachesTheGoal(t *testing.T) {
	parent, _ := recordTriage(t, liveEntropy())
	// Step to the bad decision: the recorded decide call labelled the issue "bug".
	events := parent.Events
	if events[decideStep].CallSite != "decide" {
		t.Fatalf("step %d is %s", decideStep, events[decideStep].CallSite)
	}
	if got := textOf(events[decideStep].Response); got != "label: bug" {
		t.Fatalf("recorded decision %q", got)
	}
	goal := &Goal{Tool: "add_label", ArgsMatch: json.RawMessage(`{"label":"needs-owner-review"}`)}
	if Trace(events).Reached(*goal) {
		t.Fatal("the recording already reaches the goal; the scenario is void")
	}
	fix := triageSystem + " Always check CODEOWNERS before labelling."
	model := triageModel()
	res := forkTriage(t, parent, ForkOptions{AtStep: decideStep, Model: model, OnMiss: OnMissStub,
		Overrides: Overrides{System: &fix}, Goal: goal}, triageSystem)
	if res.ReachedGoal == nil || !*res.ReachedGoal {
		t.Fatalf("the prompt fix did not reach the goal; trace %s", kinds(res.Trace))
	}
	if res.Provenance.Stub != 1 || res.Provenance.Live != 1 {
		t.Fatalf("provenance %+v: want the live decision and a stubbed add_label", res.Provenance)
	}
	// tokensSpent counts the tail only: the one live call's usage, not the served prefix.
	live := res.Trace[decideStep]
	if live.Usage == nil || res.TokensSpent != *live.Usage || res.TokensSpent.Total() >= Trace(res.Trace).Usage().Total() {
		t.Fatalf("tokens spent %+v; live call usage %+v; whole trace %+v", res.TokensSpent, live.Usage, Trace(res.Trace).Usage())
	}
	if live.Request.System != fix {
		t.Fatalf("the override was not applied to the live request: %q", live.Request.System)
	}
	if res.Meta.Parent != "triage" || res.Meta.ForkedAtStep == nil || *res.Meta.ForkedAtStep != decideStep {
		t.Fatalf("child meta %+v", res.Meta)
	}
}

func TestForkWithoutALiveModelFailsWhenTheTailNeedsOne(t *testing.T) {
	parent, _ := recordTriage(t, liveEntropy())
	res := forkTriage(t, parent, ForkOptions{AtStep: decideStep}, triageSystem)
	if !errors.Is(res.HarnessErr, ErrLiveModelRequired) {
		t.Fatalf("harness error %v, want ErrLiveModelRequired", res.HarnessErr)
	}
}

func TestOverridesApplyInOrder(t *testing.T) {
	sys, model := "new system", "big-model"
	o := Overrides{System: &sys, Model: &model,
		Params: map[string]json.RawMessage{"temperature": json.RawMessage("0"), "top_p": json.RawMessage("null")},
		RequestPatches: []PatchOperation{
			{Op: "replace", Path: "/params/max_tokens", Value: json.RawMessage("2048")},
			{Op: "add", Path: "/messages/-", Value: json.RawMessage(`{"role":"user","content":"and be brief"}`)},
			{Op: "test", Path: "/model", Value: json.RawMessage(`"big-model"`)},
		},
		Transform: func(req session.Request, step int64) (session.Request, error) {
			req.Params["step"] = json.RawMessage(itoa(step))
			return req, nil
		}}
	req := session.Request{Model: "small", System: "old", Messages: []session.Message{userMessage("hi")},
		Params: map[string]json.RawMessage{"max_tokens": json.RawMessage("256"), "top_p": json.RawMessage("0.9")}}
	got, err := o.Apply(req, 9)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(got)
	want := `{"model":"big-model","system":"new system","messages":[{"role":"user","content":"hi"},{"role":"user","content":"and be brief"}],"params":{"max_tokens":2048,"step":9,"temperature":0}}`
	if string(doc) != want {
		t.Fatalf("got  %s\nwant %s", doc, want)
	}
	if req.Params["top_p"] == nil || req.System != "old" {
		t.Fatal("Apply modified the caller's request")
	}
	bad := Overrides{RequestPatches: []PatchOperation{{Op: "remove", Path: "/nope"}}}
	if _, err := bad.Apply(req, 0); err == nil || err.Error() != `request patch 0 (remove /nope): remove: "nope" does not exist` {
		t.Fatalf("got %v", err)
	}
}
