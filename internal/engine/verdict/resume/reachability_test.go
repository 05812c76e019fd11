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
