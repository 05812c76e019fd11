package replay

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestForkHaltsWhereItsOverridesDoNotApply forks the triage run at its decision with request patches
// that cannot apply to the live request (a path it does not have, a failed test, an index past the
// end, a later patch after one that applied): the fork sends nothing live, halts there, and its result
// names the patch, why it failed, and the live request (step, lane, call site, model). Every later call
// of the agent gets the same error, not the halt of an unrecorded tool call.
func TestForkHaltsWhereItsOverridesDoNotApply(t *testing.T) {
	parent, _ := recordTriage(t, liveEntropy())
	cases := []struct {
		name    string
		patches []PatchOperation
		index   int
		says    string
	}{
		{"a path the request does not have", []PatchOperation{{Op: "replace", Path: "/no/such/path", Value: json.RawMessage(`1`)}}, 0,
			`request patch 0 (replace /no/such/path): replace: "no" does not exist (the object there has messages, model, params, system)`},
		{"a failed test", []PatchOperation{{Op: "test", Path: "/model", Value: json.RawMessage(`"other"`)}}, 0,
			`request patch 0 (test /model): test failed: /model is "fake-1"`},
		{"an index past the end", []PatchOperation{{Op: "remove", Path: "/messages/9"}}, 0,
			"request patch 0 (remove /messages/9): index 9 is past the end (3 elements)"},
		{"the second of two patches", []PatchOperation{{Op: "add", Path: "/params/temperature", Value: json.RawMessage(`0`)},
			{Op: "remove", Path: "/params/top_k"}}, 1,
			`request patch 1 (remove /params/top_k): remove: "top_k" does not exist (the object there has max_tokens, temperature)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model := triageModel()
			var errs []error
			agent := triageAgent(triageSystem)
			harness := func(ctx context.Context, ac AgentContext) error {
				err := agent(ctx, ac)
				errs = append(errs, err)
				// An agent that carries on after the error is told the same again.
				_, err = ac.Model(ctx, session.Request{Model: "fake-1", Messages: []session.Message{userMessage("again")}}, Site("retry"))
				errs = append(errs, err)
				_, err = ac.Tool(ctx, "add_label", map[string]string{"label": "bug"})
				errs = append(errs, err)
				return errs[0]
			}
			res, err := Fork(context.Background(), ForkOptions{Config: liveEntropy(), Parent: parent, Dir: filepath.Join(t.TempDir(), "child"),
				AtStep: decideStep, Model: model, Overrides: Overrides{RequestPatches: tc.patches},
				Goal: &Goal{Tool: "add_label"}}, harness)
			if err != nil {
				t.Fatal(err)
			}
			oe := res.Overrides
			if oe == nil {
				t.Fatalf("the result does not say the overrides failed: divergence %v, harness error %v", res.Divergence, res.HarnessErr)
			}
			if oe.Step != decideStep || oe.Lane != "0" || oe.CallSite != "decide" || oe.Model != "fake-1" {
				t.Errorf("the failed request is step %d lane %q call site %q model %q, want step %d lane 0 call site decide model fake-1",
					oe.Step, oe.Lane, oe.CallSite, oe.Model, decideStep)
			}
			var pe *PatchError
			if !errors.As(oe, &pe) || pe.Index != tc.index || pe.Op.Path != tc.patches[tc.index].Path {
				t.Errorf("the patch error %+v, want patch %d", pe, tc.index)
			}
			want := "the fork's overrides do not apply to the live request at step 5 (lane 0, call site decide, model fake-1): " + tc.says
			if oe.Error() != want {
				t.Errorf("message\n got %s\nwant %s", oe.Error(), want)
			}
			if n := model.calls.Load(); n != 0 {
				t.Errorf("%d live model calls, want none: the request must not go out unpatched", n)
			}
			if res.HarnessErr != nil || res.Divergence != nil || res.DivergedAtStep != nil {
				t.Errorf("harness error %v, divergence %v at %v: the halt is the overrides'", res.HarnessErr, res.Divergence, res.DivergedAtStep)
			}
			if res.ReachedGoal == nil || *res.ReachedGoal {
				t.Errorf("reached goal %v, want false", res.ReachedGoal)
			}
			for i, err := range errs {
				var got *OverridesError
				if !errors.As(err, &got) || got != oe || !errors.Is(err, ErrForkHalted) {
					t.Errorf("call %d after the failure returned %v, want the overrides error (a fork halt)", i, err)
				}
			}
			for _, ev := range res.Trace {
				// The recorder's END and session_end frame the run; they come after any halt.
				if ev.Step >= decideStep && ev.Kind != session.KindSessionEnd && ev.CallSite != "recorder" {
					t.Errorf("step %d (%s %s) was recorded after the halt", ev.Step, ev.Kind, ev.CallSite)
				}
			}
		})
	}
}
