package ledger

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

func ev(author session.Author, raw string) session.Event {
	return session.Event{Kind: session.KindLedger, Author: author, Ledger: json.RawMessage(raw)}
}

func rec(author session.Author, r Record) session.Event {
	return session.Event{Kind: session.KindLedger, Author: author, Ledger: r.JSON()}
}

func TestDecodeClassifiesEveryRecordShape(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want Damage
	}{
		{"a tagged intent is current", `{"schema":"agentrewind.io/ledger/v1","op":"INTENT","goal":"g"}`, DamageNone},
		{"an untagged record is legacy, folded permissively", `{"op":"STEP_CLAIMED","step":"s1"}`, DamageUntagged},
		{"a newer schema is refused, not guessed at", `{"schema":"agentrewind.io/ledger/v2","op":"INTENT"}`, DamageTooNew},
		{"a foreign schema is corrupt", `{"schema":"dos/intent/v1","op":"INTENT"}`, DamageForeignSchema},
		{"a version that is not a number is corrupt", `{"schema":"agentrewind.io/ledger/vX","op":"INTENT"}`, DamageBadVersion},
		{"version zero is corrupt", `{"schema":"agentrewind.io/ledger/v0","op":"INTENT"}`, DamageBadVersion},
		{"a tag without a v is corrupt", `{"schema":"agentrewind.io/ledger/1","op":"INTENT"}`, DamageBadVersion},
		{"an array is not a record", `["INTENT"]`, DamageNotJSON},
		{"broken JSON is not a record", `{"op":`, DamageNotJSON},
		{"an empty record is not a record", ``, DamageNotJSON},
		{"an unknown op is corrupt", `{"schema":"agentrewind.io/ledger/v1","op":"STEP_DONE"}`, DamageUnknownOp},
		{"a claim without a step is corrupt", `{"schema":"agentrewind.io/ledger/v1","op":"STEP_CLAIMED","step":" "}`, DamageMissingStep},
		{"a verification without a step is corrupt", `{"schema":"agentrewind.io/ledger/v1","op":"STEP_VERIFIED","sha":"abc"}`, DamageMissingStep},
		{"a step without an id makes the plan ambiguous", `{"schema":"agentrewind.io/ledger/v1","op":"INTENT","steps":[{"id":""}]}`, DamageBadSteps},
		{"a repeated step id makes the plan ambiguous", `{"schema":"agentrewind.io/ledger/v1","op":"INTENT","steps":[{"id":"a"},{"id":"a"}]}`, DamageBadSteps},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := Decode([]byte(tc.raw)); got != tc.want {
				t.Fatalf("Decode(%s) damage = %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
}

func TestFoldBuildsTheIntentClaimsAndVerifications(t *testing.T) {
	events := []session.Event{
		{Kind: session.KindModelCall},
		rec(session.AuthorAgent, Intent("run-1", "port the store", "aaaaaaa", Step{ID: "s1", Text: "write lib/store.go"}, Step{ID: "s2"})),
		rec(session.AuthorAgent, Claimed("s1", "bbbbbbb")),
		rec(session.AuthorAgent, Verified("s1", "bbbbbbb", "file-path")),
		rec(session.AuthorAgent, Verified("s1", "ccccccc", "file-path")),
		rec(session.AuthorAgent, ResumeProposed("run-0")),
	}
	s := Fold(events)
	if !s.HasIntent || s.RunID != "run-1" || s.Goal != "port the store" || s.StartSHA != "aaaaaaa" {
		t.Fatalf("intent not folded: %+v", s)
	}
	if got := s.StepIDs(); !reflect.DeepEqual(got, []string{"s1", "s2"}) {
		t.Fatalf("StepIDs = %v", got)
	}
	if s.Claimed["s1"].SHA != "bbbbbbb" {
		t.Fatalf("claim not folded: %+v", s.Claimed)
	}
	if v := s.Verified["s1"]; v.SHA != "ccccccc" || v.Via != "file-path" {
		t.Fatalf("the latest verification must win, got %+v", v)
	}
	if !s.ResumeProposed || s.PredecessorRunID != "run-0" {
		t.Fatalf("resume proposal not folded: %+v", s)
	}
	if s.Records != 5 || s.Corrupt != 0 {
		t.Fatalf("Records=%d Corrupt=%d, want 5 and 0", s.Records, s.Corrupt)
	}
	if got := s.RecordedSHAs(); !reflect.DeepEqual(got, []string{"aaaaaaa", "bbbbbbb", "ccccccc"}) {
		t.Fatalf("RecordedSHAs = %v", got)
	}
}

func TestFoldCountsDamageInsteadOfFailing(t *testing.T) {
	events := []session.Event{
		ev(session.AuthorAgent, `not json`),
		ev(session.AuthorAgent, `{"schema":"agentrewind.io/ledger/v9","op":"INTENT"}`),
		ev(session.AuthorAgent, `{"op":"INTENT","goal":"legacy"}`),
		ev(session.AuthorAgent, `{"schema":"agentrewind.io/ledger/v1","op":"NOPE"}`),
	}
	s := Fold(events)
	if s.Corrupt != 2 || s.UnreadableNewer != 1 || s.Untagged != 1 || s.Records != 4 {
		t.Fatalf("counts = corrupt %d newer %d untagged %d records %d", s.Corrupt, s.UnreadableNewer, s.Untagged, s.Records)
	}
	if !s.HasIntent || s.Goal != "legacy" {
		t.Fatalf("the untagged legacy intent must still be folded: %+v", s)
	}
	if len(s.Problems) != 3 || s.Problems[0].Damage != DamageNotJSON {
		t.Fatalf("problems = %+v", s.Problems)
	}
}

func TestOnlyARecorderMintedSuspendIsTrusted(t *testing.T) {
	cases := []struct {
		name          string
		events        []session.Event
		wantSuspended bool
		wantAnchor    bool
		wantUnminted  int
		wantSHA       string
	}{
		{
			name:          "a recorder-minted stamp is the anchor",
			events:        []session.Event{rec(session.AuthorRecorder, Suspend(3, "d1", "abcdef1"))},
			wantSuspended: true, wantAnchor: true, wantSHA: "abcdef1",
		},
		{
			name:         "an agent-authored stamp is treated as absent",
			events:       []session.Event{rec(session.AuthorAgent, Suspend(3, "d1", "abcdef1"))},
			wantUnminted: 1,
		},
		{
			name:         "a third-party stamp is not the recorder's either",
			events:       []session.Event{rec(session.AuthorThirdParty, Suspend(3, "d1", "abcdef1"))},
			wantUnminted: 1,
		},
		{
			name:          "a minted suspend without a digest parks the run but anchors nothing",
			events:        []session.Event{rec(session.AuthorRecorder, Record{Schema: SchemaV1, Op: OpSuspend})},
			wantSuspended: true,
		},
		{
			name: "a later stampless suspend does not fall back to an older stamp",
			events: []session.Event{
				rec(session.AuthorRecorder, Suspend(1, "d1", "")),
				rec(session.AuthorRecorder, Record{Schema: SchemaV1, Op: OpSuspend}),
			},
			wantSuspended: true,
		},
		{
			name:          "a negative turn index is no anchor",
			events:        []session.Event{rec(session.AuthorRecorder, Suspend(-1, "d1", ""))},
			wantSuspended: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Fold(tc.events)
			if s.Suspended != tc.wantSuspended || s.Checkpoint.Present != tc.wantAnchor ||
				s.UnmintedSuspends != tc.wantUnminted || s.SuspendSHA != tc.wantSHA {
				t.Fatalf("got suspended=%v anchor=%+v unminted=%d sha=%q", s.Suspended, s.Checkpoint, s.UnmintedSuspends, s.SuspendSHA)
			}
		})
	}
}

func TestTwoStampsOfOneTurnMustAgree(t *testing.T) {
	cases := []struct {
		name      string
		events    []session.Event
		anchor    bool
		turn      int
		conflicts int
	}{
		{"the same digest twice is one anchor", []session.Event{
			rec(session.AuthorRecorder, Suspend(2, "d1", "")), rec(session.AuthorRecorder, Suspend(2, "D1", ""))}, true, 2, 0},
		{"two digests for one turn are no anchor", []session.Event{
			rec(session.AuthorRecorder, Suspend(2, "d1", "")), rec(session.AuthorRecorder, Suspend(2, "d2", ""))}, false, 0, 1},
		{"a third stamp agreeing with the first does not heal the conflict", []session.Event{
			rec(session.AuthorRecorder, Suspend(2, "d1", "")), rec(session.AuthorRecorder, Suspend(2, "d2", "")),
			rec(session.AuthorRecorder, Suspend(2, "d1", ""))}, false, 0, 2},
		{"a later stamp of another turn anchors", []session.Event{
			rec(session.AuthorRecorder, Suspend(2, "d1", "")), rec(session.AuthorRecorder, Suspend(2, "d2", "")),
			rec(session.AuthorRecorder, Suspend(4, "d4", ""))}, true, 4, 1},
		{"an agent's stamp cannot create the conflict", []session.Event{
			rec(session.AuthorRecorder, Suspend(2, "d1", "")), rec(session.AuthorAgent, Suspend(2, "d2", ""))}, true, 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Fold(tc.events)
			if s.Checkpoint.Present != tc.anchor || s.Checkpoint.TurnIndex != tc.turn || s.ConflictingStamps != tc.conflicts {
				t.Fatalf("checkpoint %+v, conflicts %d", s.Checkpoint, s.ConflictingStamps)
			}
		})
	}
}

func TestOnlyTheRecordersStartOutranksTheIntent(t *testing.T) {
	intent := Intent("r", "goal", "agentsha1", Step{ID: "s1"})
	cases := []struct {
		name     string
		events   []session.Event
		sha      string
		minted   bool
		unminted int
	}{
		{"without a minted start the intent's is used", []session.Event{rec(session.AuthorAgent, intent)}, "agentsha1", false, 0},
		{"the recorder's start wins, before the intent", []session.Event{
			rec(session.AuthorRecorder, Start("headsha1")), rec(session.AuthorAgent, intent)}, "headsha1", true, 0},
		{"the recorder's start wins, after the intent", []session.Event{
			rec(session.AuthorAgent, intent), rec(session.AuthorRecorder, Start("headsha1"))}, "headsha1", true, 0},
		{"a re-plan cannot move a minted start", []session.Event{
			rec(session.AuthorRecorder, Start("headsha1")), rec(session.AuthorAgent, intent),
			rec(session.AuthorAgent, Intent("r", "goal", "othersha", Step{ID: "s1"}))}, "headsha1", true, 0},
		{"an agent's start is ignored and counted", []session.Event{
			rec(session.AuthorAgent, intent), rec(session.AuthorAgent, Start("forged"))}, "agentsha1", false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Fold(tc.events)
			if s.StartSHA != tc.sha || s.StartMinted != tc.minted || s.UnmintedStarts != tc.unminted {
				t.Fatalf("start %q minted=%v unminted=%d", s.StartSHA, s.StartMinted, s.UnmintedStarts)
			}
		})
	}
}

func TestARePlanReplacesTheDeclaredSteps(t *testing.T) {
	s := Fold([]session.Event{
		rec(session.AuthorAgent, Intent("r", "g1", "", Step{ID: "a"}, Step{ID: "b"})),
		rec(session.AuthorAgent, Claimed("a", "")),
		rec(session.AuthorAgent, Intent("", "g2", "f00", Step{ID: "c"})),
	})
	if got := s.StepIDs(); !reflect.DeepEqual(got, []string{"c"}) || s.Goal != "g2" || s.RunID != "r" {
		t.Fatalf("re-plan: steps %v goal %q run %q", got, s.Goal, s.RunID)
	}
	if _, ok := s.Claimed["a"]; !ok {
		t.Fatal("claims are kept by step id across a re-plan")
	}
}

func TestFolderStateIsASnapshot(t *testing.T) {
	var f Folder
	f.Add(rec(session.AuthorAgent, Intent("r", "g", "", Step{ID: "a"})))
	f.Add(rec(session.AuthorAgent, Claimed("a", "1111111")))
	before := f.State()
	f.Add(rec(session.AuthorAgent, Claimed("a", "2222222")))
	if before.Claimed["a"].SHA != "1111111" {
		t.Fatalf("a snapshot changed after a later Add: %+v", before.Claimed)
	}
}

func TestProblemsAreBoundedButCountsStayExact(t *testing.T) {
	var events []session.Event
	for range maxProblems + 10 {
		events = append(events, ev(session.AuthorAgent, `x`))
	}
	s := Fold(events)
	if s.Corrupt != maxProblems+10 || len(s.Problems) != maxProblems {
		t.Fatalf("corrupt %d problems %d", s.Corrupt, len(s.Problems))
	}
}
