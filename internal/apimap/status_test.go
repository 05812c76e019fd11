package apimap

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/coherence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

func TestSessionRecordingKeepsTheCacheSplitAndTheLogState(t *testing.T) {
	v := &task.VerifyResult{EventsHash: strings.Repeat("c", 64), Intact: true, Ended: false, Events: 12, Steps: 10, ModelCalls: 5, ToolCalls: 4,
		Usage: task.Usage{InputTokens: 900, OutputTokens: 120, CacheCreationInputTokens: 100, CacheReadInputTokens: 500, CostMicroUSD: 4100}, Blobs: 3, Bytes: 81234,
		AddedBytes: 1234, SchemaVersion: 2, Redactions: []task.PatternCount{}}
	want := v1alpha1.SessionRecording{EventsHash: v.EventsHash, LogState: v1alpha1.LogOpen, Events: new(int64(12)), Steps: new(int64(10)),
		ModelCalls: new(int64(5)), ToolCalls: new(int64(4)), Blobs: new(int64(3)), Bytes: new(int64(81234)),
		AddedBytes: new(int64(1234)), Usage: v1alpha1.Usage{InputTokens: new(int64(900)), OutputTokens: new(int64(120)), CacheCreationInputTokens: new(int64(100)),
			CacheReadInputTokens: new(int64(500)), TotalTokens: new(int64(1020)), CostMicroUSD: new(int64(4100))},
		SchemaVersion: 2, RedactedSecrets: new(int64(0)), RedactedPatterns: new(int32(0)), Vault: v1alpha1.VaultAbsent}
	if d := cmp.Diff(want, SessionRecording(v, price.Default())); d != "" {
		t.Errorf("recording (-want +got):\n%s", d)
	}
	v.AddedBytes = 0 // a Job of a version before addedBytes: unknown, not nothing
	if got := SessionRecording(v, price.Default()).AddedBytes; got != nil {
		t.Errorf("a result without addedBytes maps to %d, want none", *got)
	}
	v.Ended = true
	if got := SessionRecording(v, price.Default()).LogState; got != v1alpha1.LogClosed {
		t.Errorf("an ended log is %s, want Closed", got)
	}
}

func TestSessionRecordingCountsRedactionsByPatternNameAndSaysWhetherThereIsAVault(t *testing.T) {
	v := &task.VerifyResult{SchemaVersion: 1, Vault: true, Redactions: []task.PatternCount{{Pattern: "env-secret", Count: 2}, {Pattern: "anthropic-api-key", Count: 3}}}
	got := SessionRecording(v, price.Default())
	want := []v1alpha1.RedactionCount{{Pattern: "anthropic-api-key", Count: new(int64(3))}, {Pattern: "env-secret", Count: new(int64(2))}}
	if d := cmp.Diff(want, got.Redactions); d != "" {
		t.Errorf("redactions (-want +got):\n%s", d)
	}
	if got.Vault != v1alpha1.VaultPresent || got.SchemaVersion != 1 || *got.RedactedSecrets != 5 || *got.RedactedPatterns != 2 {
		t.Errorf("vault %s, schema %d, redacted %d secrets by %d patterns; want Present, 1, 5 by 2", got.Vault, got.SchemaVersion, *got.RedactedSecrets, *got.RedactedPatterns)
	}
}

func TestSessionRecordingKeepsTheMostRedactingPatternsWithinTheBoundAndCountsThemAll(t *testing.T) {
	var counts []task.PatternCount
	for i := range maxRedactions + 8 {
		counts = append(counts, task.PatternCount{Pattern: fmt.Sprintf("p-%02d", i), Count: int64(i + 1)})
	}
	// A name the CRD refuses (meta.json is data: a push from anywhere may carry one) is counted, not listed.
	counts = append(counts, task.PatternCount{Pattern: "not a name", Count: 1000}, task.PatternCount{Pattern: strings.Repeat("x", maxPatternName+1), Count: 1000})
	got := SessionRecording(&task.VerifyResult{Redactions: counts}, price.Default())
	if len(got.Redactions) != maxRedactions {
		t.Fatalf("%d redactions listed, want the bound %d", len(got.Redactions), maxRedactions)
	}
	if first, last := got.Redactions[0], got.Redactions[maxRedactions-1]; first.Pattern != "p-08" || *first.Count != 9 || last.Pattern != "p-39" {
		t.Errorf("listed %s (%d) to %s: want the %d that redacted the most, p-08 to p-39, by name", first.Pattern, *first.Count, last.Pattern, maxRedactions)
	}
	var sum int64
	for i := range maxRedactions + 8 {
		sum += int64(i + 1)
	}
	if *got.RedactedPatterns != maxRedactions+10 || *got.RedactedSecrets != sum+2000 {
		t.Errorf("redactedPatterns %d, redactedSecrets %d; want every pattern (%d) and every secret (%d)", *got.RedactedPatterns, *got.RedactedSecrets, maxRedactions+10, sum+2000)
	}
}

func TestResumePlanVerdictsCutEveryListToItsBoundAndSaySo(t *testing.T) {
	rep, err := task.NewReport(verdict.Evaluate(verdict.Facts{}, verdict.DefaultPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("step-%d-%s", i, strings.Repeat("x", 150))
		}
		return out
	}
	rep.Resume.Residual = ids(300)
	for i := range 260 {
		rep.Resume.Verified = append(rep.Resume.Verified, resume.Step{ID: fmt.Sprint("v", i), SHA: strings.Repeat("a", 40)})
	}
	rep.Rewind.Note.Lines = append(ids(40), "")
	rep.Reconciliation.Claimed = ids(257)
	rep.Drift.Evidence = &coherence.DriftEvidence{}
	for i := range 70 {
		rep.Drift.Evidence.Unattributed = append(rep.Drift.Evidence.Unattributed, coherence.PathAt{Path: fmt.Sprintf("f%d.go", i)}, coherence.PathAt{Path: fmt.Sprintf("f%d.go", i)})
	}
	rep.Resume.Message = strings.Repeat("日本", 400)
	got, err := ResumePlanVerdicts(&task.ResumePlanResult{Evidence: task.Evidence{EventsHash: strings.Repeat("e", 64)}, Report: rep})
	if err != nil {
		t.Fatal(err)
	}
	wantCuts := []v1alpha1.ListTruncation{{Field: "residual", Total: 300}, {Field: "verified", Total: 260}, {Field: "noGoodNote", Total: 40},
		{Field: "unattributedFiles", Total: 70}, {Field: "claimedWithoutEvidence", Total: 257}}
	if d := cmp.Diff(wantCuts, got.Truncated); d != "" {
		t.Errorf("truncated (-want +got):\n%s", d)
	}
	if len(got.Residual) != 256 || *got.ResidualSteps != 300 || len(got.Residual[0].ID) > 128 || len(got.Verified) != 256 ||
		len(got.Rewind.NoGoodNote) != 32 || len(got.Drift.UnattributedFiles) != 64 || len(got.Reconciliation.ClaimedWithoutEvidence) != 256 {
		t.Errorf("lists not cut to their bounds: residual %d (%d), verified %d, note %d, unattributed %d, claimed %d", len(got.Residual), *got.ResidualSteps,
			len(got.Verified), len(got.Rewind.NoGoodNote), len(got.Drift.UnattributedFiles), len(got.Reconciliation.ClaimedWithoutEvidence))
	}
	if len(got.Message) > 1024 || !utf8.ValidString(got.Message) || !strings.HasSuffix(got.Message, "…") {
		t.Errorf("message of %d bytes (valid UTF-8 %v)", len(got.Message), utf8.ValidString(got.Message))
	}
	if got.Verdict != v1alpha1.VerdictUnresumable || got.Evidence.Plan != v1alpha1.PlanAbsent || got.Stop != v1alpha1.RunInterrupted {
		t.Errorf("verdict %s, plan %s, stop %s", got.Verdict, got.Evidence.Plan, got.Stop)
	}
}

func TestAReasonTheCRDWouldRefuseIsAnUnknownValue(t *testing.T) {
	rep, err := task.NewReport(verdict.Evaluate(verdict.Facts{}, verdict.DefaultPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	rep.Resume.Reason = "no_intent"
	if _, err := ResumePlanVerdicts(&task.ResumePlanResult{Report: rep}); err == nil || !strings.Contains(err.Error(), "no_intent") {
		t.Fatalf("err = %v, want an UnknownValueError naming the reason", err)
	}
}

func TestVerifyProblemReason(t *testing.T) {
	for kind, want := range map[task.ProblemKind]string{
		task.ProblemDigestMismatch: v1alpha1.ReasonDigestMismatch,
		task.ProblemSessionCorrupt: v1alpha1.ReasonSessionCorrupt,
		"":                         v1alpha1.ReasonSessionCorrupt,
	} {
		if got := VerifyProblemReason(&task.VerifyResult{Problem: "p", ProblemKind: kind}); got != want {
			t.Errorf("VerifyProblemReason(%q) = %s, want %s", kind, got, want)
		}
	}
}

// TestTheAPISaysHowTheRunStopped: the API's Suspended is a pause the agent asked for; a run that
// failed, was killed, ran out of time or finished says so; one whose recording cannot tell, or whose
// stop this build does not name, is Interrupted.
func TestTheAPISaysHowTheRunStopped(t *testing.T) {
	for stop, want := range map[ledger.StopReason]v1alpha1.RunStop{
		ledger.StopSuspended:   v1alpha1.RunSuspended,
		ledger.StopKilled:      v1alpha1.RunKilled,
		ledger.StopFailed:      v1alpha1.RunFailed,
		ledger.StopDeadline:    v1alpha1.RunDeadlineExceeded,
		ledger.StopFinished:    v1alpha1.RunFinished,
		ledger.StopStopped:     v1alpha1.RunInterrupted,
		ledger.StopUnrecorded:  v1alpha1.RunInterrupted,
		ledger.StopReason("Z"): v1alpha1.RunInterrupted,
	} {
		rep, err := task.NewReport(verdict.Evaluate(verdict.Facts{}, verdict.DefaultPolicy()))
		if err != nil {
			t.Fatal(err)
		}
		rep.Reachability.Stop, rep.Reachability.Suspended = stop, stop != ledger.StopFinished && stop != ledger.StopUnrecorded
		got, err := ResumePlanVerdicts(&task.ResumePlanResult{Report: rep})
		if err != nil || got.Stop != want {
			t.Errorf("stop %q: %s (%v), want %s", stop, got.Stop, err, want)
		}
	}
}

// The agent's end the kubelet reported reads as the engine's, exit code and signal kept; a status
// that holds none, or an end the engine does not know, is no end.
func TestAnAgentsEndReadsAsTheEnginesRunEnd(t *testing.T) {
	for _, tc := range []struct {
		in   v1alpha1.AgentEnd
		want string
		ok   bool
	}{
		{v1alpha1.AgentEnd{How: v1alpha1.AgentFinished, ExitCode: new(int32(0))}, "Finished:0", true},
		{v1alpha1.AgentEnd{How: v1alpha1.AgentKilled, ExitCode: new(int32(137)), Signal: "SIGKILL"}, "Killed:137:SIGKILL", true},
		{v1alpha1.AgentEnd{How: v1alpha1.AgentDeadlineExceeded}, "DeadlineExceeded", true},
		{v1alpha1.AgentEnd{}, "", false},
		{v1alpha1.AgentEnd{How: "Stopped"}, "", false},
		{v1alpha1.AgentEnd{How: "Exploded"}, "", false},
	} {
		got, ok := RunEnd(tc.in)
		if ok != tc.ok || (ok && got.String() != tc.want) {
			t.Errorf("RunEnd(%+v) = %s, %v; want %s, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// The re-entry point in the recording reaches the status, where kubectl shows it beside the commit:
// for a run judged without a repository it is the only re-entry point there is.
func TestTheReEntryStepReachesTheStatus(t *testing.T) {
	rep, err := task.NewReport(verdict.Evaluate(verdict.Facts{}, verdict.DefaultPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   *int64
		want *int64
	}{{nil, nil}, {new(int64(5)), new(int64(5))}, {new(int64(-1)), nil}} {
		rep.Resume.ResumeAfterStep = tc.in
		got, err := ResumePlanVerdicts(&task.ResumePlanResult{Report: rep})
		if err != nil || !reflect.DeepEqual(got.ResumeAfterStep, tc.want) {
			t.Errorf("resumeAfterStep %v: status %v (%v), want %v", tc.in, got.ResumeAfterStep, err, tc.want)
		}
	}
}
