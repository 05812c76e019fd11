package coherence

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func intp(v int) *int { return &v }

func TestReanchorDecision(t *testing.T) {
	open := plan(Step{ID: "s1", Text: "write lib/a.go", Done: true}, Step{ID: "s2", Text: "write lib/b.go"})
	open.Task = "split the parser"
	done := plan(Step{ID: "s1", Text: "write lib/a.go", Done: true})
	drifting := &Drift{Verdict: DriftDrifting, Drifting: true}
	cases := []struct {
		name   string
		in     AnchorInput
		fire   bool
		reason ReanchorReason
		next   AnchorState
	}{
		{"no plan, no anchor", AnchorInput{Round: intp(20)}, false, "", AnchorState{}},
		{"every step done, nothing to restate", AnchorInput{Plan: done, Round: intp(20)}, false, "", AnchorState{}},
		{"no round index, nothing can be judged", AnchorInput{Plan: open}, false, "", AnchorState{}},
		{"early rounds are left alone", AnchorInput{Plan: open, Round: intp(5)}, false, "", AnchorState{}},
		{"the first interval anchor fires at the first eligible round", AnchorInput{Plan: open, Round: intp(6)}, true, ReanchorInterval,
			AnchorState{LastAnchorRound: intp(6), Count: 1}},
		{"inside the minimum gap nothing fires, even on drift",
			AnchorInput{Plan: open, Round: intp(13), State: AnchorState{LastAnchorRound: intp(6), Count: 1}, Drift: drifting}, false, "",
			AnchorState{LastAnchorRound: intp(6), Count: 1}},
		{"drift past the gap fires a drift anchor",
			AnchorInput{Plan: open, Round: intp(14), State: AnchorState{LastAnchorRound: intp(6), Count: 1}, Drift: drifting}, true, ReanchorDrift,
			AnchorState{LastAnchorRound: intp(14), Count: 2}},
		{"the cap holds", AnchorInput{Plan: open, Round: intp(40), State: AnchorState{LastAnchorRound: intp(20), Count: 3}}, false, "",
			AnchorState{LastAnchorRound: intp(20), Count: 3}},
		{"a compaction lifts the floor, the cap and the gap",
			AnchorInput{Plan: open, Round: intp(3), State: AnchorState{LastAnchorRound: intp(2), Count: 3}, CompactedSinceAnchor: true}, true, ReanchorCompaction,
			AnchorState{LastAnchorRound: intp(3), Count: 4}},
		{"the final anchor ignores the cap and the gap",
			AnchorInput{Plan: open, Round: intp(28), MaxRounds: intp(30), State: AnchorState{LastAnchorRound: intp(27), Count: 3}}, true, ReanchorFinal,
			AnchorState{LastAnchorRound: intp(28), Count: 4, FinalDone: true}},
		{"the final anchor fires once",
			AnchorInput{Plan: open, Round: intp(29), MaxRounds: intp(30), State: AnchorState{LastAnchorRound: intp(28), Count: 4, FinalDone: true}}, false, "",
			AnchorState{LastAnchorRound: intp(28), Count: 4, FinalDone: true}},
		{"past the wall there is no final anchor", AnchorInput{Plan: open, Round: intp(31), MaxRounds: intp(30), State: AnchorState{Count: 3}}, false, "",
			AnchorState{Count: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := ReanchorDecision(tc.in)
			if d.Reanchor != tc.fire || d.Reason != tc.reason || d.Placement != ReanchorPlacement || d.Why == "" {
				t.Fatalf("decision = %+v, want fire=%v reason=%q", d, tc.fire, tc.reason)
			}
			if diff := cmp.Diff(tc.next, d.State); diff != "" {
				t.Fatalf("next state (-want +got):\n%s", diff)
			}
			if tc.fire != (d.Text != "") || tc.fire != (d.ApproxTokens > 0) {
				t.Fatalf("a firing anchor carries text and a token estimate, a quiet one neither: %+v", d)
			}
		})
	}
}

func TestAnchorTextRestatesTheTaskAndOnlyTheOutstandingSteps(t *testing.T) {
	p := plan(Step{ID: "s1", Text: "write lib/a.go", Done: true}, Step{ID: "s2", Text: "write lib/b.go"}, Step{ID: "s3", Text: "run the tests"})
	p.Task = "split the parser"
	want := "[plan anchor — automatic, not from the user] Re-stating the goal because the round budget is nearly spent (round 28 of 30).\n" +
		"TASK: split the parser\n" +
		"STILL OUTSTANDING (2 of 3):\n" +
		"  s2 [todo] write lib/b.go\n" +
		"  s3 [todo] run the tests\n" +
		"Finish the outstanding items that can still be finished, smallest-risk first, and if one cannot be finished mark it " +
		"blocked with a note rather than leaving it silent."
	if diff := cmp.Diff(want, AnchorText(p, ReanchorFinal, intp(28), intp(30))); diff != "" {
		t.Fatalf("anchor text (-want +got):\n%s", diff)
	}
	if got := AnchorText(p, ReanchorInterval, nil, nil); strings.Contains(got, "round") || !strings.Contains(got, "a while since") {
		t.Fatalf("an interval anchor without a budget names no round: %q", got)
	}
}

func TestAppendOnly(t *testing.T) {
	msgs := func(s ...string) []json.RawMessage {
		out := make([]json.RawMessage, len(s))
		for i, m := range s {
			out[i] = json.RawMessage(m)
		}
		return out
	}
	before := msgs(`{"role":"user","content":"fix it"}`, `{"role":"assistant","content":[{"type":"text","text":"ok"}]}`)
	cases := []struct {
		name  string
		after []json.RawMessage
		want  bool
	}{
		{"appending keeps the prefix", append(msgs(string(before[0]), string(before[1])), json.RawMessage(`{"role":"user","content":"anchor"}`)), true},
		{"re-serialising an equal message is not a change", msgs(`{ "role": "user", "content": "fix it" }`, `{"role":"assistant","content":[{"type":"text","text":"ok"}],"id":"x"}`), true},
		{"one changed character breaks it", msgs(`{"role":"user","content":"fix it!"}`, string(before[1])), false},
		{"an insertion before the end breaks it", msgs(string(before[0]), `{"role":"user","content":"anchor"}`, string(before[1])), false},
		{"truncation breaks it", msgs(string(before[0])), false},
		{"an emptied transcript breaks it", nil, false},
		{"a changed role breaks it", msgs(`{"role":"system","content":"fix it"}`, string(before[1])), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AppendOnly(before, tc.after); got != tc.want {
				t.Fatalf("AppendOnly = %v, want %v", got, tc.want)
			}
		})
	}
	if !AppendOnly(nil, nil) {
		t.Fatal("nothing before is trivially kept")
	}
}
