package resume

import (
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

func TestReach(t *testing.T) {
	cases := []struct {
		name      string
		verdict   Verdict
		suspended bool
		want      Reachability
		reason    ReachabilityReason
	}{
		{"a resumable run is retained regardless of age", Resumable, false, Reachable, ReasonResumableRetained},
		{"a parked resumable run is scavenge-immune", Resumable, true, Reachable, ReasonSuspendedRetained},
		{"a diverged run needs a human, not a reaper", Diverged, false, Reachable, ReasonDivergedRetained},
		{"a parked diverged run is still retained", Diverged, true, Reachable, ReasonDivergedRetained},
		{"a complete run is collectible", Complete, false, Collectible, ReasonCompleteCollectible},
		{"an unresumable run is collectible", Unresumable, false, Collectible, ReasonUnresumableCollectible},
		{"an unknown verdict fails closed to reachable", Verdict("MAYBE"), false, Reachable, ReasonUnknownVerdictRetained},
		{"an empty verdict fails closed to reachable", Verdict(""), false, Reachable, ReasonUnknownVerdictRetained},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			state := ledger.State{RunID: "from-ledger", Suspended: tc.suspended}
			r := Reach(state, Plan{Verdict: tc.verdict})
			if r.Reachability != tc.want || r.Reason != tc.reason {
				t.Fatalf("Reach = %s/%s, want %s/%s", r.Reachability, r.Reason, tc.want, tc.reason)
			}
			if r.Collectible() != (tc.want == Collectible) || r.Suspended != tc.suspended || r.ResumeVerdict != tc.verdict {
				t.Fatalf("verdict fields = %+v", r)
			}
			if r.RunID != "from-ledger" || r.Message == "" {
				t.Fatalf("run id %q message %q", r.RunID, r.Message)
			}
		})
	}
}

func TestAnUnjudgeableLedgerKeepsItsRunReachable(t *testing.T) {
	cases := []struct {
		name   string
		state  ledger.State
		policy Policy
		want   ReachabilityReason
	}{
		{"a record from a newer schema", ledger.State{RunID: "r", HasIntent: true, UnreadableNewer: 1}, Policy{}, ReasonUnreadableRetained},
		{"an unsound fold", ledger.State{RunID: "r", HasIntent: true, Corrupt: 1}, Policy{TreatUntaggedAsCorrupt: true}, ReasonUnsoundRetained},
		{"an untagged record under the strict policy", ledger.State{RunID: "r", HasIntent: true, Untagged: 3}, Policy{TreatUntaggedAsCorrupt: true}, ReasonUnsoundRetained},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := Decide(tc.state, AncestryFacts{}, nil, tc.policy)
			if plan.Verdict != Unresumable {
				t.Fatalf("verdict = %s, want UNRESUMABLE", plan.Verdict)
			}
			r := Reach(tc.state, plan)
			if r.Reachability != Reachable || r.Reason != tc.want || r.Collectible() {
				t.Fatalf("Reach = %s/%s, want REACHABLE/%s", r.Reachability, r.Reason, tc.want)
			}
		})
	}
	// The one UNRESUMABLE that stays collectible: a run that declared no goal at all.
	noIntent := ledger.State{RunID: "r"}
	if r := Reach(noIntent, Decide(noIntent, AncestryFacts{}, nil, Policy{})); !r.Collectible() {
		t.Fatalf("a run without intent: %s/%s, want COLLECTIBLE", r.Reachability, r.Reason)
	}
}

func TestReachPrefersThePlansRunID(t *testing.T) {
	r := Reach(ledger.State{RunID: "ledger"}, Plan{Verdict: Complete, RunID: "plan"})
	if r.RunID != "plan" {
		t.Fatalf("run id = %q", r.RunID)
	}
}

func TestVerdictKnown(t *testing.T) {
	for _, v := range []Verdict{Resumable, Complete, Diverged, Unresumable} {
		if !v.Known() {
			t.Errorf("%s is a verdict", v)
		}
	}
	if Verdict("RESUMABLE ").Known() || Verdict("").Known() {
		t.Error("only the four spellings are verdicts")
	}
}
