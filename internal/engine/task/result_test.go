package task

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/coherence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/rewind"
)

func ptr[T any](v T) *T { return &v }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// examples holds one succeeded result of every task, with every field set that a controller reads.
func examples() map[Name]*Result {
	env := func(n Name) *Result {
		return &Result{APIVersion: APIVersion, Task: n, JobUID: "6f1c0d2e-uid", Outcome: Succeeded, StartedAt: t0, FinishedAt: t0.Add(3 * time.Second)}
	}
	div := Divergence{Step: 7, Kind: "model_call", Lane: "main", CallSite: "triage.go:41", ExpectedCallSite: "triage.go:40",
		ActualFingerprint: strings.Repeat("a", 64), ExpectedFingerprint: strings.Repeat("b", 64), Message: "system prompt differs"}
	out := map[Name]*Result{}
	r := env(Verify)
	r.Verify = &VerifyResult{SessionID: "run-42", SchemaVersion: 2, EventsHash: strings.Repeat("c", 64), Intact: true, Ended: true,
		Events: 12, Steps: 12, ModelCalls: 5, ToolCalls: 4, Usage: Usage{InputTokens: 900, OutputTokens: 120, CostMicroUSD: 4100},
		Blobs: 3, Bytes: 81234, Redactions: []PatternCount{{Pattern: "anthropic-api-key", Count: 2}}, Vault: true}
	out[Verify] = r
	r = env(ResumePlan)
	rep, err := NewReport(verdict.Evaluate(verdict.Facts{}, verdict.DefaultPolicy()))
	if err != nil {
		panic(err)
	}
	r.ResumePlan = &ResumePlanResult{SessionID: "run-42", Evidence: Evidence{EventsHash: strings.Repeat("c", 64), Workspace: true,
		ResolvedCommit: strings.Repeat("d", 40), PlanPresent: false}, Report: rep}
	out[ResumePlan] = r
	r = env(Replay)
	r.Replay = &ReplayResult{SessionID: "run-42", Passed: false, Divergence: &div, ToleratedDrifts: 2, FirstDrifts: []Divergence{div, div}, Reorders: 1}
	out[Replay] = r
	r = env(Fork)
	r.Fork = &ForkResult{ParentSessionID: "run-42", ChildSessionID: "run-42-fork-5", AtStep: 5, ReachedGoal: ptr(true),
		TokensSpent: Usage{InputTokens: 100, OutputTokens: 52}, Provenance: Provenance{Recorded: 4, Live: 2, Stub: 1}}
	out[Fork] = r
	r = env(Checkpoint)
	r.Checkpoint = &CheckpointResult{CheckpointID: "run-42-t3", SessionID: "run-42", ManifestHash: strings.Repeat("e", 64), Files: 20, Bytes: 4096, IncrementalBytes: 512}
	out[Checkpoint] = r
	r = env(GCSweep)
	r.GCSweep = &GCSweepResult{DryRun: true, RetainedSessions: 3, RetainedCheckpoints: 1, MarkedBlobs: 40, Candidates: 9, Young: 2, DeletedBlobs: 0, FreedBytes: 0}
	out[GCSweep] = r
	return out
}

func TestEveryTaskHasAnExample(t *testing.T) {
	ex := examples()
	for _, n := range Names {
		if ex[n] == nil {
			t.Errorf("no example result for task %s", n)
		}
	}
}

// TestAControllerDecodesEveryResult encodes each task's result as the engine does and decodes it as a
// controller does: strictly, to the same value.
func TestAControllerDecodesEveryResult(t *testing.T) {
	for name, want := range examples() {
		t.Run(string(name), func(t *testing.T) {
			data, err := Encode(want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("decoded result (-want +got):\n%s", diff)
			}
			s, err := DecodeSummary(TerminationMessage(got))
			if err != nil || s.Task != name || s.Outcome != Succeeded || s.Headline == "" || s.JobUID != want.JobUID {
				t.Fatalf("summary %+v, %v", s, err)
			}
		})
	}
}

func TestDecodeRefusesWhatItDoesNotUnderstand(t *testing.T) {
	good, err := Encode(examples()[Verify])
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"another version", edit(func(m map[string]any) { m["apiVersion"] = "engine.agentrewind.io/v2" }), "apiVersion"},
		{"an unknown task", edit(func(m map[string]any) { m["task"] = "reticulate" }), "unknown task"},
		{"an unknown field", edit(func(m map[string]any) { m["verdict"] = "RESUMABLE" }), "unknown field"},
		{"a misspelt payload field", edit(func(m map[string]any) { m["verify"].(map[string]any)["intakt"] = true }), "unknown field"},
		{"the payload of another task", edit(func(m map[string]any) { m["fork"] = map[string]any{"atStep": 1} }), "carries a fork payload"},
		{"a success without its payload", edit(func(m map[string]any) { delete(m, "verify") }), "has no verify payload"},
		{"a failure without a reason", edit(func(m map[string]any) { m["outcome"] = "Failed"; delete(m, "verify") }), "says no reason"},
		{"a success with a failure", edit(func(m map[string]any) { m["failure"] = map[string]any{"reason": "Internal"} }), "carries a failure"},
		{"no outcome", edit(func(m map[string]any) { delete(m, "outcome") }), "outcome"},
		{"trailing data", append(append([]byte{}, good...), []byte(` {}`)...), "trailing"},
		{"not JSON", []byte("Error: session not found"), "engine result"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestAFailedTaskDecodesWithItsReason(t *testing.T) {
	r := &Result{APIVersion: APIVersion, Task: ResumePlan, JobUID: "u", Outcome: Failed,
		Failure: &Failure{Reason: ReasonEvidenceUnavailable, Message: "cloning the workspace: connection refused"}}
	data, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil || got.Failure.Reason != ReasonEvidenceUnavailable || !got.Failure.Reason.Retryable() {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if ReasonSessionCorrupt.Retryable() || ReasonInvalidInput.Retryable() {
		t.Fatal("a corrupt session or a bad input does not get better by retrying")
	}
}

// TestTheTerminationMessageFitsWhateverTheFailureSays fills a failure message with the characters
// that grow most under JSON escaping, multi-byte runes and invalid UTF-8.
func TestTheTerminationMessageFitsWhateverTheFailureSays(t *testing.T) {
	fills := map[string]string{
		"ascii":        strings.Repeat("x", 10000),
		"escaped":      strings.Repeat("\"\\\n<>&\x01", 3000),
		"multi-byte":   strings.Repeat("日本語🙂", 2000),
		"invalid utf8": strings.Repeat("a\xff\xfe", 4000),
		"just over":    strings.Repeat("y", MaxTerminationMessage-120),
	}
	for name, msg := range fills {
		t.Run(name, func(t *testing.T) {
			r := &Result{APIVersion: APIVersion, Task: Fork, JobUID: strings.Repeat("u", 36), Outcome: Failed,
				Failure: &Failure{Reason: ReasonInternal, Message: msg}}
			out := TerminationMessage(r)
			if len(out) > MaxTerminationMessage || !utf8.Valid(out) {
				t.Fatalf("termination message is %d bytes (valid UTF-8: %v)", len(out), utf8.Valid(out))
			}
			s, err := DecodeSummary(out)
			if err != nil || s.Reason != ReasonInternal || s.Headline != "failed" {
				t.Fatalf("summary %+v, %v", s, err)
			}
			if fits := len(msg) < 3000 && utf8.ValidString(msg) && !strings.ContainsAny(msg, "\"\\\n<>&\x01"); fits && (s.Truncated || s.Message != msg) {
				t.Fatalf("a message that fits was cut: truncated=%v", s.Truncated)
			}
			if len(msg) > MaxTerminationMessage && (!s.Truncated || !strings.HasSuffix(s.Message, "…")) {
				t.Fatalf("a cut message must say so: truncated=%v, ends %q", s.Truncated, s.Message[max(0, len(s.Message)-8):])
			}
		})
	}
}

func TestHeadlines(t *testing.T) {
	ex := examples()
	ex[Verify].Verify.Ended = false
	want := map[Name]string{Verify: "intact, not ended", ResumePlan: "UNRESUMABLE COLLECTIBLE NO_REWIND", Replay: "diverged",
		Fork: "goal reached", Checkpoint: "captured", GCSweep: "deleted 0 blob(s)"}
	for n, r := range ex {
		if got := headline(r); got != want[n] {
			t.Errorf("%s headline = %q, want %q", n, got, want[n])
		}
	}
}

// TestARewindReportTravelsWhole builds a report with every optional part present (a REWIND with its
// note and excerpt, drift evidence, a reconciliation) and checks the wire form keeps each of them.
func TestARewindReportTravelsWhole(t *testing.T) {
	digest := rewind.DigestTurn([]byte("turn-1"))
	facts := verdict.Facts{
		Ledger: ledger.State{RunID: "r", HasIntent: true, Goal: "fix the parser",
			Steps:      []ledger.Step{{ID: "s1", Text: "write lib/a.go"}, {ID: "s2", Text: "run the tests"}},
			Checkpoint: ledger.Checkpoint{Present: true, TurnIndex: 1, TranscriptDigest: digest}},
		Ancestry: resume.AncestryFacts{LaneAdvancedPastResume: true},
		Turns:    []rewind.Turn{{Index: 0, Digest: rewind.DigestTurn([]byte("turn-0"))}, {Index: 1, Digest: digest}, {Index: 2, Digest: "x"}},
		Env:      rewind.NewEnvExcerpt("FAIL lib/a_test.go:12", session.AuthorThirdParty),
		Rounds: []coherence.Round{{Label: 1, Calls: []coherence.Call{{Name: "write_file", Args: json.RawMessage(`{"path":"lib/a.go"}`)}}},
			{Label: 2, Marks: []string{"s1"}}},
	}
	in := verdict.Evaluate(facts, verdict.DefaultPolicy())
	if in.Rewind.Decision != rewind.Rewind {
		t.Fatalf("fixture: rewind decision %s (%s), want REWIND", in.Rewind.Decision, in.Rewind.Message)
	}
	got, err := NewReport(in)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rewind.Decision != rewind.Rewind || got.Rewind.TranscriptDigest != digest || !cmp.Equal(got.Rewind.DroppedTurns, []int{2}) {
		t.Fatalf("rewind view %+v", got.Rewind)
	}
	if len(got.Rewind.Note.Tokens) == 0 || got.Rewind.Note.Env == nil || got.Rewind.Note.Env.Text != "FAIL lib/a_test.go:12" ||
		!cmp.Equal(got.Rewind.Note.Lines, in.Rewind.Note.Lines()) {
		t.Fatalf("note view %+v", got.Rewind.Note)
	}
	if got.Resume.Verdict != resume.Diverged || got.Reachability.Reachability != resume.Reachable || !got.Reconciliation.OK {
		t.Fatalf("report %+v", got)
	}
	// And through the whole envelope, strictly.
	r := &Result{APIVersion: APIVersion, Task: ResumePlan, JobUID: "u", Outcome: Succeeded,
		ResumePlan: &ResumePlanResult{SessionID: "s", Report: got}}
	data, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, back); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
}
