package resume

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

func TestAdjudicate(t *testing.T) {
	full := strings.Repeat("ab", 20)
	found := func(changed ...string) CommitFacts {
		return CommitFacts{Lookup: LookupFound, Commit: full, Changed: changed}
	}
	store := ledger.Step{ID: "s", Text: "write lib/store.go"}
	claim := ledger.Verification{SHA: full[:10], Via: ViaFilePath}
	cases := []struct {
		name    string
		facts   ClaimFacts
		want    CheckReason
		touched []string
	}{
		{"a commit touching the named file verifies the step", ClaimFacts{Step: store, Claim: claim, StartAnchored: true, Commit: found("lib/store.go", "README.md")},
			CheckVerified, []string{"lib/store.go"}},
		{"a file inside a named directory counts", ClaimFacts{Step: ledger.Step{ID: "s", Paths: []string{"lib"}}, Claim: claim, StartAnchored: true, Commit: found("lib/x/y.go")},
			CheckVerified, []string{"lib/x/y.go"}},
		{"without a start anchor nothing verifies, whatever the commit shows", ClaimFacts{Step: store, Claim: claim, Commit: found("lib/store.go")},
			CheckNoStartAnchor, nil},
		{"no SHA", ClaimFacts{Step: store, Claim: ledger.Verification{}, StartAnchored: true}, CheckNoSHA, nil},
		{"not hex", ClaimFacts{Step: store, Claim: ledger.Verification{SHA: "HEAD~1"}, StartAnchored: true}, CheckNotASHA, nil},
		{"two characters never match a commit", ClaimFacts{Step: store, Claim: ledger.Verification{SHA: "ab"}, StartAnchored: true, Commit: found("lib/store.go")},
			CheckSHATooShort, nil},
		{"an ambiguous abbreviation", ClaimFacts{Step: store, Claim: claim, StartAnchored: true, Commit: CommitFacts{Lookup: LookupAmbiguous}}, CheckAmbiguousSHA, nil},
		{"a commit on another branch", ClaimFacts{Step: store, Claim: claim, StartAnchored: true, Commit: CommitFacts{Lookup: LookupElsewhere}}, CheckNotInAncestry, nil},
		{"a commit that never existed", ClaimFacts{Step: store, Claim: claim, StartAnchored: true, Commit: CommitFacts{Lookup: LookupMissing}}, CheckCommitMissing, nil},
		{"facts that were never gathered fail closed", ClaimFacts{Step: store, Claim: claim, StartAnchored: true}, CheckCommitMissing, nil},
		{"the run's start commit or older is work it found", ClaimFacts{Step: store, Claim: claim, StartAnchored: true,
			Commit: CommitFacts{Lookup: LookupFound, Commit: full, PredatesRun: true, Changed: []string{"lib/store.go"}}}, CheckPredatesRun, nil},
		{"an --allow-empty commit proves nothing moved", ClaimFacts{Step: store, Claim: claim, StartAnchored: true, Commit: found()}, CheckEmptyCommit, nil},
		{"a step naming no path cannot be tied to a commit", ClaimFacts{Step: ledger.Step{ID: "s", Text: "make it better"}, Claim: claim, StartAnchored: true,
			Commit: found("lib/store.go")}, CheckStepNamesNoPath, nil},
		{"a forged record at an unrelated commit", ClaimFacts{Step: store, Claim: claim, StartAnchored: true, Commit: found("docs/notes.md")},
			CheckFootprintMismatch, nil},
		{"a bare name does not match the same name elsewhere", ClaimFacts{Step: ledger.Step{ID: "s", Text: "write store.go"}, Claim: claim, StartAnchored: true,
			Commit: found("lib/store.go")}, CheckFootprintMismatch, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Adjudicate(tc.facts)
			if got.Reason != tc.want || got.Verified != (tc.want == CheckVerified) || !cmp.Equal(got.Touched, tc.touched) {
				t.Fatalf("Adjudicate = %+v, want %s touching %v", got, tc.want, tc.touched)
			}
			if got.Step != "s" || got.ClaimedSHA != tc.facts.Claim.SHA {
				t.Fatalf("the check names its step and claim: %+v", got)
			}
		})
	}
}

func TestJudgeLane(t *testing.T) {
	point := strings.Repeat("1", 40)
	past := func(cs ...PastCommit) LaneFacts {
		return LaneFacts{ResumePoint: point, PointInAncestry: true, Past: cs}
	}
	many := make([]PastCommit, 12)
	for i := range many {
		many[i] = PastCommit{SHA: strings.Repeat(string(rune('a'+i)), 40)}
	}
	cases := []struct {
		name     string
		facts    LaneFacts
		advanced bool
		reason   LaneReason
		foreign  int
		listed   int
	}{
		{"no resume point is not advanced", LaneFacts{}, false, LaneNoResumePoint, 0, 0},
		{"a resume point rewritten out of history is advanced", LaneFacts{ResumePoint: point}, true, LaneResumePointRewritten, 0, 0},
		{"nothing past the point", past(), false, LaneAtResumePoint, 0, 0},
		{"the run's own named commits", past(PastCommit{SHA: "a", NamedByRun: true}), false, LaneOnlyRunsOwnWork, 0, 0},
		{"commits before the minted suspend", past(PastCommit{SHA: "a", BeforeSuspend: true}), false, LaneOnlyRunsOwnWork, 0, 0},
		{"an unrecorded commit advances the lane", past(PastCommit{SHA: "a", NamedByRun: true}, PastCommit{SHA: "b"}), true, LaneForeignWork, 1, 1},
		{"the count stays exact past the listing bound", past(many...), true, LaneForeignWork, 12, MaxForeignListed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lc := JudgeLane(tc.facts)
			if lc.Advanced != tc.advanced || lc.Reason != tc.reason || lc.ForeignCount != tc.foreign || len(lc.Foreign) != tc.listed {
				t.Fatalf("JudgeLane = %+v", lc)
			}
		})
	}
}
