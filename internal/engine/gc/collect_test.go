package gc

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func verdict(v resume.Verdict, reason resume.Reason) *resume.ReachabilityVerdict {
	rv := resume.Reach(ledgerState(), resume.Plan{Verdict: v, Reason: reason})
	return &rv
}

var (
	complete    = verdict(resume.Complete, "")
	unresumable = verdict(resume.Unresumable, "")
	resumable   = verdict(resume.Resumable, "")
	diverged    = verdict(resume.Diverged, "")
	newerSchema = verdict(resume.Unresumable, resume.ReasonUnreadableNewer)
)

func dur(d time.Duration) *time.Duration { return &d }

func TestCollectDecidesEachRoot(t *testing.T) {
	old := t0.Add(-365 * 24 * time.Hour) // far past any grace: only a root can keep these
	tests := []struct {
		name    string
		pop     Population
		want    map[string]Reason // session -> reason
		deleted []string
	}{
		{"complete past grace is deleted", Population{Sessions: []Session{{ID: "a", Verdict: complete, CollectibleSince: old}}},
			map[string]Reason{"a": "CompleteCollectible"}, []string{"a"}},
		{"unresumable past grace is deleted", Population{Sessions: []Session{{ID: "a", Verdict: unresumable, CollectibleSince: old}}},
			map[string]Reason{"a": "UnresumableCollectible"}, []string{"a"}},
		{"resumable is kept however old", Population{Sessions: []Session{{ID: "a", Verdict: resumable, CollectibleSince: old}}},
			map[string]Reason{"a": "ResumableRetained"}, nil},
		{"diverged is kept however old", Population{Sessions: []Session{{ID: "a", Verdict: diverged, CollectibleSince: old}}},
			map[string]Reason{"a": "DivergedRetained"}, nil},
		{"a newer ledger schema is kept", Population{Sessions: []Session{{ID: "a", Verdict: newerSchema, CollectibleSince: old}}},
			map[string]Reason{"a": "UnreadableLedgerRetained"}, nil},
		{"no verdict yet is kept", Population{Sessions: []Session{{ID: "a", CollectibleSince: old}}},
			map[string]Reason{"a": ReasonVerdictPending}, nil},
		{"pinned", Population{Sessions: []Session{{ID: "a", Verdict: complete, CollectibleSince: old, Pinned: true}}},
			map[string]Reason{"a": ReasonPinned}, nil},
		{"recording", Population{Sessions: []Session{{ID: "a", Verdict: complete, CollectibleSince: old, Recording: true}}},
			map[string]Reason{"a": ReasonRecording}, nil},
		{"read by an unfinished ForkRun", Population{Sessions: []Session{{ID: "a", Verdict: complete, CollectibleSince: old, UnfinishedForkReaders: 1}}},
			map[string]Reason{"a": ReasonReadByForkRun}, nil},
		{"unreadable ledger", Population{Sessions: []Session{{ID: "a", Verdict: complete, CollectibleSince: old, Ledger: LedgerUnreadable}}},
			map[string]Reason{"a": ReasonLedgerUnreadable}, nil},
		{"unsound ledger", Population{Sessions: []Session{{ID: "a", Verdict: complete, CollectibleSince: old, Ledger: LedgerUnsound}}},
			map[string]Reason{"a": ReasonLedgerUnsound}, nil},
		{"a ledger state this build does not know", Population{Sessions: []Session{{ID: "a", Verdict: complete, CollectibleSince: old, Ledger: "Futuristic"}}},
			map[string]Reason{"a": ReasonLedgerUnreadable}, nil},
		{"anchor of a retained checkpoint", Population{
			Sessions:    []Session{{ID: "a", Verdict: complete, CollectibleSince: old}, {ID: "b", Verdict: complete, CollectibleSince: old}},
			Checkpoints: []Checkpoint{{ID: "c1", Session: "a", Retained: true}, {ID: "c2", Session: "b"}}},
			map[string]Reason{"a": ReasonCheckpointAnchor, "b": "CompleteCollectible"}, []string{"b"}},
		{"a retained fork keeps its whole ancestry", Population{Sessions: []Session{
			{ID: "root", Verdict: complete, CollectibleSince: old},
			{ID: "mid", Parent: "root", Verdict: complete, CollectibleSince: old},
			{ID: "leaf", Parent: "mid", Verdict: resumable},
			{ID: "other", Parent: "root", Verdict: complete, CollectibleSince: old}}},
			map[string]Reason{"root": ReasonParentOfRetainedFork, "mid": ReasonParentOfRetainedFork, "leaf": "ResumableRetained",
				"other": "CompleteCollectible"}, []string{"other"}},
		{"a collectible fork does not keep its parent", Population{Sessions: []Session{
			{ID: "p", Verdict: complete, CollectibleSince: old}, {ID: "f", Parent: "p", Verdict: complete, CollectibleSince: old}}},
			map[string]Reason{"p": "CompleteCollectible", "f": "CompleteCollectible"}, []string{"f", "p"}},
		{"a parent cycle terminates", Population{Sessions: []Session{
			{ID: "x", Parent: "y", Verdict: complete, CollectibleSince: old}, {ID: "y", Parent: "x", Pinned: true, Verdict: complete, CollectibleSince: old}}},
			map[string]Reason{"x": ReasonParentOfRetainedFork, "y": ReasonPinned}, nil},
		{"unknown collectible age is never deleted", Population{Sessions: []Session{{ID: "a", Verdict: complete}}},
			map[string]Reason{"a": "CompleteCollectible"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := Collect(tt.pop, Policy{Grace: 24 * time.Hour}, t0)
			got := map[string]Reason{}
			for _, d := range plan.Decisions {
				got[d.Session] = d.Reason
				if d.Delete && d.Reachability != resume.Collectible {
					t.Errorf("%s is %s yet deleted", d.Session, d.Reachability)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.deleted, plan.DeletedSessions()); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCollectListsEveryRootInPrecedenceOrder(t *testing.T) {
	pop := Population{Sessions: []Session{
		{ID: "p", Verdict: diverged, Pinned: true, Recording: true, UnfinishedForkReaders: 2},
		{ID: "f", Parent: "p", Verdict: resumable},
	}}
	d := Collect(pop, Policy{}, t0).Decisions[0]
	want := []Reason{ReasonPinned, ReasonRecording, ReasonReadByForkRun, "DivergedRetained", ReasonParentOfRetainedFork}
	if diff := cmp.Diff(want, d.Roots); diff != "" {
		t.Errorf("roots (-want +got):\n%s", diff)
	}
	if d.Reason != ReasonPinned || d.Delete {
		t.Errorf("decision = %+v, want reason Pinned and no deletion", d)
	}
}

func TestCollectGraceOnAFakeClock(t *testing.T) {
	since := t0
	tests := []struct {
		name     string
		now      time.Time
		override *time.Duration
		want     bool
	}{
		{"just collectible", since, nil, false},
		{"a second before the grace ends", since.Add(24*time.Hour - time.Second), nil, false},
		{"exactly at the end of the grace", since.Add(24 * time.Hour), nil, true},
		{"long after", since.Add(90 * 24 * time.Hour), nil, true},
		{"a longer per-session grace keeps it", since.Add(25 * time.Hour), dur(48 * time.Hour), false},
		{"a longer per-session grace ends", since.Add(48 * time.Hour), dur(48 * time.Hour), true},
		{"a shorter per-session grace", since.Add(time.Hour), dur(time.Hour), true},
		{"a zero per-session grace deletes at once", since, dur(0), true},
		{"a negative per-session grace is zero", since, dur(-time.Hour), true},
		{"a clock behind the verdict deletes nothing", since.Add(-time.Hour), dur(0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pop := Population{Sessions: []Session{{ID: "a", Verdict: complete, CollectibleSince: since, Grace: tt.override}}}
			d := Collect(pop, Policy{Grace: 24 * time.Hour}, tt.now).Decisions[0]
			if d.Delete != tt.want {
				t.Errorf("Delete = %v, want %v (%s)", d.Delete, tt.want, d.Message)
			}
			grace := 24 * time.Hour
			if tt.override != nil {
				grace = max(*tt.override, 0)
			}
			if !d.DeleteAt.Equal(since.Add(grace)) {
				t.Errorf("DeleteAt = %s, want %s", d.DeleteAt, since.Add(grace))
			}
		})
	}
}
