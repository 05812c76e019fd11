package replay

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

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
	if diff := cmp.Diff(ProvenanceCounts{Recorded: 3, Live: 1}, res.Provenance); diff != "" {
		t.Fatalf("provenance counts (-want +got):\n%s", diff)
	}
	tags := map[int64]session.Provenance{}
	for _, ev := range res.Trace {
		if ev.Provenance != "" {
			tags[ev.Step] = ev.Provenance
		}
	}
	wantTags := map[int64]session.Provenance{1: session.ProvenanceRecorded, 2: session.ProvenanceRecorded, 3: session.ProvenanceRecorded,
		4: session.ProvenanceRecorded, 5: session.ProvenanceLive, 6: session.ProvenanceRecorded}
	if diff := cmp.Diff(wantTags, tags); diff != "" {
		t.Fatalf("provenance tags by step (-want +got):\n%s", diff)
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
	// The prefix's plan and search are served, the decision goes live, the changed add_label is stubbed.
	if diff := cmp.Diff(ProvenanceCounts{Recorded: 2, Live: 1, Stub: 1}, res.Provenance); diff != "" {
		t.Fatalf("provenance counts (-want +got):\n%s", diff)
	}
	// tokensSpent counts the tail only: the one live call's usage, not the served prefix.
	live := res.Trace[decideStep]
	if live.Usage == nil {
		t.Fatal("the live call has no usage")
	}
	if diff := cmp.Diff(*live.Usage, res.TokensSpent); diff != "" {
		t.Fatalf("tokens spent against the live call's usage (-live call +spent):\n%s", diff)
	}
	if res.TokensSpent.Total() >= Trace(res.Trace).Usage().Total() {
		t.Fatalf("tokens spent %d, the whole trace %d: the served prefix was counted", res.TokensSpent.Total(), Trace(res.Trace).Usage().Total())
	}
	// What the prefix would have cost is the parent's recorded usage of the served model calls.
	var served session.Usage
	for _, ev := range events[:decideStep] {
		if ev.Kind == session.KindModelCall {
			served.Add(ev.Usage)
		}
	}
	if served.Total() == 0 {
		t.Fatal("the parent's prefix recorded no usage; the replayed-usage check is void")
	}
	if diff := cmp.Diff(served, res.Replayed); diff != "" {
		t.Fatalf("replayed usage against the parent's served calls (-parent +replayed):\n%s", diff)
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
	want := session.Request{Model: "big-model", System: "new system",
		Messages: []session.Message{userMessage("hi"), {Role: "user", Content: json.RawMessage(`"and be brief"`)}},
		Params:   map[string]json.RawMessage{"max_tokens": json.RawMessage("2048"), "step": json.RawMessage("9"), "temperature": json.RawMessage("0")}}
	if diff := cmp.Diff(want, got, cmp.Transformer("json", func(r json.RawMessage) string { return string(r) })); diff != "" {
		t.Fatalf("request after the overrides (-want +got):\n%s", diff)
	}
	if req.Params["top_p"] == nil || req.System != "old" {
		t.Fatal("Apply modified the caller's request")
	}
	bad := Overrides{RequestPatches: []PatchOperation{{Op: "remove", Path: "/nope"}}}
	if _, err := bad.Apply(req, 0); err == nil || err.Error() != `request patch 0 (remove /nope): remove: "nope" does not exist (the object there has messages, model, params, system)` {
		t.Fatalf("got %v", err)
	}
}

// TestRequestPatchesFollowRFC6902 applies requestPatches through Overrides.Apply. The cases the
// json-patch library alone would get wrong — test by value, strict indexes, test of a missing member —
// are held to the RFC.
func TestRequestPatchesFollowRFC6902(t *testing.T) {
	req := session.Request{Model: "m", Messages: []session.Message{userMessage("hi")}, Params: map[string]json.RawMessage{
		"n": json.RawMessage("1"), "obj": json.RawMessage(`{"a":1,"b":[1,2]}`), "list": json.RawMessage("[10,20,30]")}}
	const params = `{"n":1,"obj":{"a":1,"b":[1,2]},"list":[10,20,30]}`
	cases := []struct {
		name string
		ops  []PatchOperation
		want string // the resulting params, or "" when Apply must fail
		err  string // what the error says
	}{
		{"test compares numbers by value", []PatchOperation{{Op: "test", Path: "/params/n", Value: json.RawMessage("1.0")}}, params, ""},
		{"test ignores member order", []PatchOperation{{Op: "test", Path: "/params/obj", Value: json.RawMessage(`{"b":[1,2],"a":1e0}`)}}, params, ""},
		{"test fails on a different value", []PatchOperation{{Op: "test", Path: "/params/n", Value: json.RawMessage("2")}}, "",
			"request patch 0 (test /params/n): test failed: /params/n is 1"},
		{"test of a missing member fails even against null", []PatchOperation{{Op: "test", Path: "/params/nope", Value: json.RawMessage("null")}}, "",
			`request patch 0 (test /params/nope): test: "nope" does not exist (the object there has list, n, obj)`},
		{"remove ignores a value member", []PatchOperation{{Op: "remove", Path: "/params/n", Value: json.RawMessage("1")}}, `{"obj":{"a":1,"b":[1,2]},"list":[10,20,30]}`, ""},
		{"add inserts into an array", []PatchOperation{{Op: "add", Path: "/params/list/1", Value: json.RawMessage("15")}}, `{"n":1,"obj":{"a":1,"b":[1,2]},"list":[10,15,20,30]}`, ""},
		{"add appends with -", []PatchOperation{{Op: "add", Path: "/params/list/-", Value: json.RawMessage("40")}}, `{"n":1,"obj":{"a":1,"b":[1,2]},"list":[10,20,30,40]}`, ""},
		{"an index with a leading zero is refused", []PatchOperation{{Op: "replace", Path: "/params/list/01", Value: json.RawMessage("0")}}, "",
			`request patch 0 (replace /params/list/01): "01" is not an array index`},
		{"a signed index is refused", []PatchOperation{{Op: "replace", Path: "/params/list/+1", Value: json.RawMessage("0")}}, "",
			`request patch 0 (replace /params/list/+1): "+1" is not an array index`},
		{"a negative index is refused", []PatchOperation{{Op: "remove", Path: "/params/list/-1"}}, "",
			`request patch 0 (remove /params/list/-1): "-1" is not an array index`},
		{"an index past the end is refused", []PatchOperation{{Op: "add", Path: "/params/list/4", Value: json.RawMessage("0")}}, "",
			"request patch 0 (add /params/list/4): index 4 is past the end (3 elements)"},
		{"replace of a missing member fails", []PatchOperation{{Op: "replace", Path: "/params/nope", Value: json.RawMessage("0")}}, "",
			`request patch 0 (replace /params/nope): replace: "nope" does not exist (the object there has list, n, obj)`},
		{"escaped pointer tokens", []PatchOperation{{Op: "add", Path: "/params/a~1b~0c", Value: json.RawMessage("true")}}, `{"a/b~c":true,"n":1,"obj":{"a":1,"b":[1,2]},"list":[10,20,30]}`, ""},
		{"an unsupported op is refused", []PatchOperation{{Op: "move", Path: "/params/m", Value: json.RawMessage(`"/params/n"`)}}, "",
			`request patch 0 (move /params/m): unsupported op "move" (use add, remove, replace or test)`},
		{"add needs a value", []PatchOperation{{Op: "add", Path: "/params/x"}}, "", "request patch 0 (add /params/x): add needs a value"},
		{"the error names the failing operation", []PatchOperation{{Op: "replace", Path: "/params/n", Value: json.RawMessage("2")},
			{Op: "test", Path: "/params/n", Value: json.RawMessage("1")}}, "", "request patch 1 (test /params/n): test failed: /params/n is 2"},
		{"operations apply in order", []PatchOperation{{Op: "replace", Path: "/params/n", Value: json.RawMessage("2")},
			{Op: "test", Path: "/params/n", Value: json.RawMessage("2.0")}, {Op: "remove", Path: "/params/obj/b/0"}},
			`{"n":2,"obj":{"a":1,"b":[2]},"list":[10,20,30]}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Overrides{RequestPatches: tc.ops}.Apply(req, 0)
			if tc.want == "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("got error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotParams, _ := json.Marshal(got.Params)
			var g, w any
			if err := json.Unmarshal(gotParams, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(w, g); diff != "" {
				t.Fatalf("params after the patches (-want +got):\n%s", diff)
			}
			if got.Model != "m" || len(got.Messages) != 1 {
				t.Fatalf("the patches changed more than the params: %+v", got)
			}
		})
	}
}

func TestForkWithLiveToolsRunsTheTailsToolCallsForReal(t *testing.T) {
	parent, _ := recordTriage(t, liveEntropy())
	var ran []string
	live := map[string]Tool{"add_label": func(_ context.Context, args json.RawMessage) (any, error) {
		ran = append(ran, string(args))
		return map[string]bool{"labelled": true}, nil
	}}
	res := forkTriage(t, parent, ForkOptions{AtStep: decideStep, Model: triageModel(), LiveTools: live}, triageSystem)
	if len(ran) != 1 {
		t.Fatalf("the tail's add_label ran %d times, want once, live", len(ran))
	}
	// plan and search served (the entropy draws are not counted); decide and add_label live.
	if diff := cmp.Diff(ProvenanceCounts{Recorded: 2, Live: 2}, res.Provenance); diff != "" {
		t.Fatalf("provenance counts (-want +got):\n%s", diff)
	}
	for _, ev := range res.Trace {
		if ev.Name == "add_label" && (ev.Provenance != session.ProvenanceLive || string(ev.Result) != `{"labelled":true}`) {
			t.Errorf("add_label in the tail: provenance %s, result %s; want the live answer", ev.Provenance, ev.Result)
		}
	}
}
