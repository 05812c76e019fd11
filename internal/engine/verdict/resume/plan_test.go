package resume

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

const (
	shaStart = "1111111111111111111111111111111111111111"
	shaA     = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	shaB     = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	shaC     = "cccccccccccccccccccccccccccccccccccccccc"
	shaOther = "dddddddddddddddddddddddddddddddddddddddd"
)

// threeSteps is a run that declared s1, s2, s3 from shaStart.
func threeSteps() ledger.State {
	return ledger.State{
		RunID: "run-1", HasIntent: true, Goal: "port the store", StartSHA: shaStart,
		Steps: []ledger.Step{{ID: "s1"}, {ID: "s2"}, {ID: "s3"}},
	}
}

// verify records STEP_VERIFIED for the steps, on the file-path rung.
func verify(s ledger.State, steps map[string]string) ledger.State {
	s.Verified = map[string]ledger.Verification{}
	for id, sha := range steps {
		s.Verified[id] = ledger.Verification{SHA: sha, Via: ViaFilePath}
	}
	return s
}

func ancestry(verified map[string]string, shas ...string) AncestryFacts {
	return AncestryFacts{SHAsInAncestry: shas, VerifiedAtRead: verified, HeadSHA: shas[len(shas)-1]}
}

func ids(steps []Step) []string {
	out := []string{}
	for _, s := range steps {
		out = append(out, s.ID)
	}
	return out
}

func TestDecide(t *testing.T) {
	all := map[string]string{"s1": shaA, "s2": shaB, "s3": shaC}
	type want struct {
		verdict   Verdict
		reason    Reason
		resumeSHA string
		verified  []string
		residual  []string
		message   string
	}
	cases := []struct {
		name   string
		state  ledger.State
		facts  AncestryFacts
		policy *Policy // nil is DefaultPolicy
		want   want
	}{
		{
			name:  "a too-new record makes the run unresumable even with an intent",
			state: func() ledger.State { s := threeSteps(); s.UnreadableNewer = 1; return s }(),
			facts: ancestry(nil, shaStart),
			want:  want{verdict: Unresumable, reason: ReasonUnreadableNewer, verified: []string{}, residual: []string{}},
		},
		{
			name:   "a corrupt record is an unsound fold when the policy says so",
			state:  func() ledger.State { s := threeSteps(); s.Corrupt = 1; return s }(),
			facts:  ancestry(nil, shaStart),
			policy: &Policy{TreatUntaggedAsCorrupt: true},
			want:   want{verdict: Unresumable, reason: ReasonUnsoundFold, verified: []string{}, residual: []string{}},
		},
		{
			name:   "an untagged record is an unsound fold when the policy says so",
			state:  func() ledger.State { s := threeSteps(); s.Untagged = 2; return s }(),
			facts:  ancestry(nil, shaStart),
			policy: &Policy{TreatUntaggedAsCorrupt: true},
			want:   want{verdict: Unresumable, reason: ReasonUnsoundFold, verified: []string{}, residual: []string{}},
		},
		{
			name:  "a corrupt record is skipped under the default policy",
			state: func() ledger.State { s := threeSteps(); s.Corrupt = 1; s.Untagged = 1; return s }(),
			facts: ancestry(nil, shaStart),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaStart,
				verified: []string{}, residual: []string{"s1", "s2", "s3"}},
		},
		{
			name:  "no intent is the honest floor",
			state: ledger.State{RunID: "r", Verified: map[string]ledger.Verification{"s1": {SHA: shaA, Via: ViaFilePath}}},
			facts: ancestry(all, shaA),
			want:  want{verdict: Unresumable, reason: ReasonNoIntent, verified: []string{}, residual: []string{}},
		},
		{
			name:  "a free-form goal re-enters from the start SHA with the goal as the residual",
			state: ledger.State{HasIntent: true, Goal: "make it faster", StartSHA: shaStart},
			facts: ancestry(nil, shaStart, shaOther),
			want: want{verdict: Resumable, reason: ReasonFreeFormResumable, resumeSHA: shaStart,
				verified: []string{}, residual: []string{"make it faster"}},
		},
		{
			name:  "a free-form goal whose start SHA is not in ancestry re-derives from HEAD",
			state: ledger.State{HasIntent: true, Goal: "make it faster", StartSHA: shaOther},
			facts: ancestry(nil, shaStart),
			want: want{verdict: Resumable, reason: ReasonFreeFormResumable, verified: []string{},
				residual: []string{"make it faster"}, message: "re-derive the re-entry point from HEAD"},
		},
		{
			name:  "a diverged free-form goal is refused, not redone over fresh work",
			state: ledger.State{HasIntent: true, Goal: "make it faster", StartSHA: shaStart},
			facts: func() AncestryFacts {
				f := ancestry(nil, shaStart, shaOther)
				f.LaneAdvancedPastResume = true
				return f
			}(),
			want: want{verdict: Diverged, reason: ReasonFreeFormDiverged, resumeSHA: shaStart,
				verified: []string{}, residual: []string{"make it faster"}},
		},
		{
			name:  "an intent with neither goal nor steps still has a residual unit",
			state: ledger.State{HasIntent: true},
			facts: ancestry(nil, shaStart),
			want: want{verdict: Resumable, reason: ReasonFreeFormResumable, verified: []string{},
				residual: []string{"(declared goal)"}},
		},
		{
			name:  "every step re-verified is complete",
			state: verify(threeSteps(), all),
			facts: ancestry(all, shaStart, shaA, shaB, shaC),
			want: want{verdict: Complete, reason: ReasonAllStepsVerified, resumeSHA: shaC,
				verified: []string{"s1", "s2", "s3"}, residual: []string{}},
		},
		{
			name:  "a finished run whose lane moved is complete, not diverged",
			state: verify(threeSteps(), all),
			facts: func() AncestryFacts {
				f := ancestry(all, shaStart, shaA, shaB, shaC, shaOther)
				f.LaneAdvancedPastResume = true
				return f
			}(),
			want: want{verdict: Complete, reason: ReasonAllStepsVerified, resumeSHA: shaC,
				verified: []string{"s1", "s2", "s3"}, residual: []string{}},
		},
		{
			name:  "a residual over a lane that moved is diverged",
			state: verify(threeSteps(), map[string]string{"s1": shaA}),
			facts: func() AncestryFacts {
				f := ancestry(map[string]string{"s1": shaA}, shaStart, shaA, shaOther)
				f.LaneAdvancedPastResume = true
				return f
			}(),
			want: want{verdict: Diverged, reason: ReasonLaneAdvanced, resumeSHA: shaA,
				verified: []string{"s1"}, residual: []string{"s2", "s3"}},
		},
		{
			name:  "a verified prefix resumes from the commit behind its last step",
			state: verify(threeSteps(), map[string]string{"s1": shaA, "s2": shaB}),
			facts: ancestry(map[string]string{"s1": shaA, "s2": shaB}, shaStart, shaA, shaB),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaB,
				verified: []string{"s1", "s2"}, residual: []string{"s3"}},
		},
		{
			name:  "a hole at the first step keeps every later verified step in the residual",
			state: verify(threeSteps(), map[string]string{"s2": shaB, "s3": shaC}),
			facts: ancestry(map[string]string{"s2": shaB, "s3": shaC}, shaStart, shaB, shaC),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaStart,
				verified: []string{}, residual: []string{"s1", "s2", "s3"}},
		},
		{
			name:  "a hole in the middle stops the prefix and keeps the verified step after it",
			state: verify(threeSteps(), map[string]string{"s1": shaA, "s3": shaC}),
			facts: ancestry(map[string]string{"s1": shaA, "s3": shaC}, shaStart, shaA, shaC),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaA,
				verified: []string{"s1"}, residual: []string{"s2", "s3"}},
		},
		{
			name: "a forged STEP_VERIFIED at a real but unrelated commit is redone",
			// The ledger claims s1 at shaOther with the non-forgeable via; the commit is in ancestry, but
			// the boundary's footprint check failed, so s1 is absent from VerifiedAtRead.
			state: verify(threeSteps(), map[string]string{"s1": shaOther}),
			facts: ancestry(map[string]string{}, shaStart, shaOther),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaStart,
				verified: []string{}, residual: []string{"s1", "s2", "s3"}},
		},
		{
			name:  "a stored STEP_VERIFIED without any re-adjudication never counts",
			state: verify(threeSteps(), all),
			facts: AncestryFacts{SHAsInAncestry: []string{shaStart, shaA, shaB, shaC}},
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaStart,
				verified: []string{}, residual: []string{"s1", "s2", "s3"}},
		},
		{
			name:  "a step re-adjudicated at a different commit than the ledger records does not count",
			state: verify(threeSteps(), map[string]string{"s1": shaA}),
			facts: ancestry(map[string]string{"s1": shaB}, shaStart, shaA, shaB),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaStart,
				verified: []string{}, residual: []string{"s1", "s2", "s3"}},
		},
		{
			name:  "a re-adjudicated commit later rewritten out of history does not count",
			state: verify(threeSteps(), map[string]string{"s1": shaA}),
			facts: ancestry(map[string]string{"s1": shaA}, shaStart),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaStart,
				verified: []string{}, residual: []string{"s1", "s2", "s3"}},
		},
		{
			name: "a forgeable via is refused by the default policy",
			state: func() ledger.State {
				s := threeSteps()
				s.Verified = map[string]ledger.Verification{"s1": {SHA: shaA, Via: "subject-grep"}}
				return s
			}(),
			facts: ancestry(map[string]string{"s1": shaA}, shaStart, shaA),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaStart,
				verified: []string{}, residual: []string{"s1", "s2", "s3"}},
		},
		{
			name: "an empty via is treated as forgeable",
			state: func() ledger.State {
				s := threeSteps()
				s.Verified = map[string]ledger.Verification{"s1": {SHA: shaA}}
				return s
			}(),
			facts: ancestry(map[string]string{"s1": shaA}, shaStart, shaA),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaStart,
				verified: []string{}, residual: []string{"s1", "s2", "s3"}},
		},
		{
			name: "the via belt can be loosened by policy, the re-adjudication cannot",
			state: func() ledger.State {
				s := threeSteps()
				s.Verified = map[string]ledger.Verification{"s1": {SHA: shaA, Via: "subject-grep"}}
				return s
			}(),
			facts:  ancestry(map[string]string{"s1": shaA}, shaStart, shaA),
			policy: &Policy{AllowForgeableRung: true},
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaA,
				verified: []string{"s1"}, residual: []string{"s2", "s3"}},
		},
		{
			name: "a registry via is a non-forgeable rung",
			state: func() ledger.State {
				s := threeSteps()
				s.Verified = map[string]ledger.Verification{"s1": {SHA: shaA, Via: ViaRegistry}}
				return s
			}(),
			facts: ancestry(map[string]string{"s1": shaA}, shaStart, shaA),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaA,
				verified: []string{"s1"}, residual: []string{"s2", "s3"}},
		},
		{
			name: "one- and two-character SHA tokens never match an unrelated commit",
			state: func() ledger.State {
				s := verify(threeSteps(), map[string]string{"s1": "a", "s2": "bb"})
				s.StartSHA = "11"
				return s
			}(),
			facts: ancestry(map[string]string{"s1": "a", "s2": "bb"}, shaStart, shaA, shaB),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, verified: []string{},
				residual: []string{"s1", "s2", "s3"}},
		},
		{
			name:  "a seven-character short SHA matches its full commit",
			state: verify(threeSteps(), map[string]string{"s1": shaA[:7]}),
			facts: ancestry(map[string]string{"s1": shaA}, shaStart[:7], shaA),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaA,
				verified: []string{"s1"}, residual: []string{"s2", "s3"}},
		},
		{
			name: "claimed but unverified steps are redone and the reason says so",
			state: func() ledger.State {
				s := verify(threeSteps(), map[string]string{"s1": shaA})
				s.Claimed = map[string]ledger.Claim{"s2": {SHA: shaB}, "s3": {}}
				return s
			}(),
			facts: ancestry(map[string]string{"s1": shaA}, shaStart, shaA, shaB),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, resumeSHA: shaA,
				verified: []string{"s1"}, residual: []string{"s2", "s3"}, message: "2 were claimed but not verified"},
		},
		{
			name:  "a start SHA outside ancestry is never echoed as the re-entry point",
			state: func() ledger.State { s := threeSteps(); s.StartSHA = shaOther; return s }(),
			facts: ancestry(nil, shaStart),
			want: want{verdict: Resumable, reason: ReasonResidualRemains, verified: []string{},
				residual: []string{"s1", "s2", "s3"}, message: "re-derive from HEAD"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			policy := DefaultPolicy()
			if tc.policy != nil {
				policy = *tc.policy
			}
			p := Decide(tc.state, tc.facts, nil, policy)
			if p.Verdict != tc.want.verdict || p.Reason != tc.want.reason {
				t.Fatalf("verdict = %s/%s, want %s/%s (%s)", p.Verdict, p.Reason, tc.want.verdict, tc.want.reason, p.Message)
			}
			if p.ResumeSHA != tc.want.resumeSHA {
				t.Errorf("resume SHA = %q, want %q", p.ResumeSHA, tc.want.resumeSHA)
			}
			if got := ids(p.Verified); !reflect.DeepEqual(got, tc.want.verified) {
				t.Errorf("verified = %v, want %v", got, tc.want.verified)
			}
			if !reflect.DeepEqual(p.Residual, tc.want.residual) {
				t.Errorf("residual = %v, want %v", p.Residual, tc.want.residual)
			}
			if tc.want.message != "" && !strings.Contains(p.Message, tc.want.message) {
				t.Errorf("message %q lacks %q", p.Message, tc.want.message)
			}
			if p.Message == "" {
				t.Error("every verdict explains itself")
			}
			if p.Verdict != Unresumable {
				if got := Point(tc.state, tc.facts, nil, policy); got != p.ResumeSHA {
					t.Errorf("Point = %q, Decide minted %q", got, p.ResumeSHA)
				}
			}
		})
	}
}

func TestVerifiedAndResidualCoverTheDeclaredSteps(t *testing.T) {
	declared := []string{"s1", "s2", "s3"}
	shas := map[string]string{"s1": shaA, "s2": shaB, "s3": shaC}
	// Every subset of verified steps: the coverage invariant verified ∪ residual == declared holds.
	for mask := range 8 {
		verified := map[string]string{}
		for i, id := range declared {
			if mask&(1<<i) != 0 {
				verified[id] = shas[id]
			}
		}
		p := Decide(verify(threeSteps(), verified), ancestry(verified, shaStart, shaA, shaB, shaC), nil, DefaultPolicy())
		got := append(ids(p.Verified), p.Residual...)
		if !slices.Equal(got, declared) {
			t.Errorf("mask %03b: verified %v + residual %v != declared", mask, ids(p.Verified), p.Residual)
		}
	}
}

func TestDecideEchoesTheProposalAndPredecessor(t *testing.T) {
	s := threeSteps()
	s.ResumeProposed, s.PredecessorRunID = true, "run-0"
	p := Decide(s, ancestry(nil, shaStart), nil, DefaultPolicy())
	if !p.AlreadyProposed || p.PredecessorRunID != "run-0" || p.RunID != "run-1" {
		t.Fatalf("plan = %+v", p)
	}
}

func TestSameCommit(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{shaA, shaA, true},
		{shaA[:7], shaA, true},
		{shaA, shaA[:7], true},
		{" " + strings.ToUpper(shaA[:9]) + " ", shaA, true},
		{shaA[:6], shaA, false},
		{"a", shaA, false},
		{"aa", shaA, false},
		{"ab", "ab", true},
		{"", "", false},
		{"", shaA, false},
		{shaA[:8], shaB, false},
	}
	for _, tc := range cases {
		if got := SameCommit(tc.a, tc.b); got != tc.want {
			t.Errorf("SameCommit(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestTheZeroPolicyIsTheSafeDefault(t *testing.T) {
	if DefaultPolicy() != (Policy{}) {
		t.Fatalf("DefaultPolicy() = %+v, want the zero value", DefaultPolicy())
	}
	s := threeSteps()
	s.Verified = map[string]ledger.Verification{"s1": {SHA: shaA, Via: "subject-grep"}}
	facts := ancestry(map[string]string{"s1": shaA}, shaStart, shaA)
	if p := Decide(s, facts, nil, Policy{}); len(p.Verified) != 0 {
		t.Fatalf("the zero policy verified %v on a forgeable rung", p.Verified)
	}
	if p := Decide(s, facts, nil, Policy{AllowForgeableRung: true}); len(p.Verified) != 1 {
		t.Fatalf("AllowForgeableRung verified %v, want s1", p.Verified)
	}
}
