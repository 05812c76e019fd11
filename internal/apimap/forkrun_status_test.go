package apimap

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

func apiUsage(in, out, create, read, cost int64) v1alpha1.Usage {
	return v1alpha1.Usage{InputTokens: new(in), OutputTokens: new(out), CacheCreationInputTokens: new(create),
		CacheReadInputTokens: new(read), TotalTokens: new(in + out), CostMicroUSD: new(cost)}
}

func unpriced(u v1alpha1.Usage, models ...string) v1alpha1.Usage {
	u.CostMicroUSD, u.UnpricedModels = nil, models
	return u
}

func TestForkRunResultMapsEveryStatusField(t *testing.T) {
	stop := task.Divergence{Step: 7, Kind: "model_call", Reason: "NoRecordedCall", Lane: "0", CallSite: "anthropic.messages",
		ExpectedCallSite: "anthropic.messages", ActualFingerprint: strings.Repeat("a", 64), ExpectedFingerprint: strings.Repeat("b", 64),
		Message: "drift at step 7: " + strings.Repeat("x", 5000)}
	early := task.Divergence{Step: 3, Kind: "tool_call", Reason: "RecordedFromOtherCallSite", CallSite: "tool.fetch", ExpectedCallSite: "tool.grep"}
	zero := apiUsage(0, 0, 0, 0, 0)
	noProvenance := v1alpha1.Provenance{Recorded: new(int64(0)), Live: new(int64(0)), Stub: new(int64(0))}
	cases := []struct {
		name   string
		result task.Result
		want   v1alpha1.ForkRunStatus
	}{
		{"a replay that passed spent nothing live, counts no divergence and says every answer was recorded",
			task.Result{Task: task.Replay, Outcome: task.Succeeded, Replay: &task.ReplayResult{Passed: true,
				Replayed:   task.Usage{InputTokens: 900, OutputTokens: 120, CacheCreationInputTokens: 100, CacheReadInputTokens: 500, CostMicroUSD: 4100},
				Provenance: task.Provenance{Recorded: 11}}},
			v1alpha1.ForkRunStatus{Outcome: v1alpha1.OutcomePassed, Divergences: new(int64(0)),
				Usage:      v1alpha1.ForkUsage{Live: zero, Replayed: apiUsage(900, 120, 100, 500, 4100)},
				Provenance: v1alpha1.Provenance{Recorded: new(int64(11)), Live: new(int64(0)), Stub: new(int64(0))}}},
		{"a replay that diverged counts the stop and the tolerated drifts, and names the stop",
			task.Result{Task: task.Replay, Outcome: task.Succeeded, Replay: &task.ReplayResult{Divergence: &stop, ToleratedDrifts: 2}},
			v1alpha1.ForkRunStatus{Outcome: v1alpha1.OutcomeDiverged, Divergences: new(int64(3)),
				FirstDivergence: v1alpha1.Divergence{Step: new(int64(7)), Kind: v1alpha1.CallModel, Lane: "0", Reason: "NoRecordedCall",
					ExpectedCallSite: "anthropic.messages", ActualCallSite: "anthropic.messages",
					ExpectedFingerprint: strings.Repeat("b", 64), ActualFingerprint: strings.Repeat("a", 64),
					Message: stop.Message[:4096-len("…")] + "…"},
				Usage: v1alpha1.ForkUsage{Live: zero, Replayed: zero}, Provenance: noProvenance}},
		{"a tolerated drift before the stop is the first divergence",
			task.Result{Task: task.Replay, Outcome: task.Succeeded, Replay: &task.ReplayResult{Divergence: &stop, ToleratedDrifts: 1, FirstDrifts: []task.Divergence{early}}},
			v1alpha1.ForkRunStatus{Outcome: v1alpha1.OutcomeDiverged, Divergences: new(int64(2)),
				FirstDivergence: v1alpha1.Divergence{Step: new(int64(3)), Kind: v1alpha1.CallTool, Reason: "RecordedFromOtherCallSite",
					ExpectedCallSite: "tool.grep", ActualCallSite: "tool.fetch"},
				Usage: v1alpha1.ForkUsage{Live: zero, Replayed: zero}, Provenance: noProvenance}},
		{"a fork that reached its goal splits live from replayed usage and counts provenance",
			task.Result{Task: task.Fork, Outcome: task.Succeeded, Fork: &task.ForkResult{ChildSessionID: "c", AtStep: 2, ReachedGoal: new(true),
				TokensSpent: task.Usage{InputTokens: 100, OutputTokens: 52, Models: []price.Line{{Provider: "openai", Model: "gpt-4o", Calls: 1, Usage: session.Usage{InputTokens: 100, OutputTokens: 52}}}},
				Replayed:    task.Usage{InputTokens: 900, OutputTokens: 120, Models: []price.Line{{Provider: "anthropic", Model: "fake-1", Calls: 3, Usage: session.Usage{InputTokens: 900, OutputTokens: 120}}}},
				Provenance:  task.Provenance{Recorded: 4, Live: 2, Stub: 1}}},
			v1alpha1.ForkRunStatus{Outcome: v1alpha1.OutcomeGoalReached, Divergences: new(int64(0)),
				// 100 tokens in at $2.50 and 52 out at $10 a million; the replayed model has no price.
				Usage:      v1alpha1.ForkUsage{Live: apiUsage(100, 52, 0, 0, 770), Replayed: unpriced(apiUsage(900, 120, 0, 0, 0), "anthropic/fake-1")},
				Provenance: v1alpha1.Provenance{Recorded: new(int64(4)), Live: new(int64(2)), Stub: new(int64(1))}}},
		{"a failed task reports only its outcome",
			task.Result{Task: task.Fork, Outcome: task.Failed, Failure: &task.Failure{Reason: task.ReasonStorageUnavailable, Message: "no store"}},
			v1alpha1.ForkRunStatus{Outcome: v1alpha1.OutcomeFailed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ForkRunResult(&tc.result, price.Default())
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("status (-want +got):\n%s", d)
			}
		})
	}
}

func TestForkRunResultRefusesWhatTheAPICannotSpell(t *testing.T) {
	cases := []struct {
		name    string
		result  task.Result
		unknown bool // an UnknownValueError, not a malformed result
	}{
		{"an unknown call kind", task.Result{Task: task.Replay, Outcome: task.Succeeded,
			Replay: &task.ReplayResult{Divergence: &task.Divergence{Kind: "ledger", Reason: "NoRecordedCall"}}}, true},
		{"a reason that is not a code", task.Result{Task: task.Replay, Outcome: task.Succeeded,
			Replay: &task.ReplayResult{Divergence: &task.Divergence{Kind: "model_call", Reason: "no recorded call"}}}, true},
		{"a fork that diverged without saying how", task.Result{Task: task.Fork, Outcome: task.Succeeded,
			Fork: &task.ForkResult{DivergedAtStep: new(int64(4))}}, false},
		{"a verify result", task.Result{Task: task.Verify, Outcome: task.Succeeded, Verify: &task.VerifyResult{}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ForkRunResult(&tc.result, price.Default())
			var unknown *UnknownValueError
			if err == nil || errors.As(err, &unknown) != tc.unknown {
				t.Fatalf("error %v (unknown value: %v), want an error (unknown value: %v)", err, errors.As(err, &unknown), tc.unknown)
			}
		})
	}
}

// TestUsagePricesWithTheOperatorsTable: the cost is the result's calls at the table's prices, an
// override changes it, and a call the table cannot price leaves it out and names the model, never $0.
func TestUsagePricesWithTheOperatorsTable(t *testing.T) {
	line := func(provider, model string, in, out int64) price.Line {
		return price.Line{Provider: provider, Model: model, Calls: 1, Usage: session.Usage{InputTokens: in, OutputTokens: out}}
	}
	long := strings.Repeat("m", 400)
	cheap := price.Default().With(map[price.Key]price.Price{{Provider: "openai", Model: "gpt-4o"}: {Input: 1_000_000, Output: 2_000_000, CacheWrite: 1_000_000, CacheRead: price.None}})
	for _, tc := range []struct {
		name   string
		u      task.Usage
		prices *price.Table
		want   v1alpha1.Usage
	}{
		{"priced at list prices", task.Usage{InputTokens: 2_000_000, OutputTokens: 1_000_000,
			Models: []price.Line{line("openai", "gpt-4o", 1_000_000, 0), line("anthropic", "claude-sonnet-4-5", 1_000_000, 1_000_000)}},
			price.Default(), apiUsage(2_000_000, 1_000_000, 0, 0, 2_500_000+3_000_000+15_000_000)},
		{"an override changes the cost", task.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000, Models: []price.Line{line("openai", "gpt-4o", 1_000_000, 1_000_000)}},
			cheap, apiUsage(1_000_000, 1_000_000, 0, 0, 3_000_000)},
		{"one unpriced model makes the whole cost unknown", task.Usage{InputTokens: 20, OutputTokens: 2,
			Models: []price.Line{line("openai", "gpt-4o", 10, 1), line("openai", "gpt-9", 10, 1)}},
			price.Default(), unpriced(apiUsage(20, 2, 0, 0, 0), "openai/gpt-9")},
		{"a nil table prices nothing", task.Usage{InputTokens: 10, OutputTokens: 1, Models: []price.Line{line("openai", "gpt-4o", 10, 1)}},
			nil, unpriced(apiUsage(10, 1, 0, 0, 0), "openai/gpt-4o")},
		{"long names are cut to the CRD's bound, once each", task.Usage{InputTokens: 20, OutputTokens: 2,
			Models: []price.Line{line("openai", long+"a", 10, 1), line("openai", long+"b", 10, 1)}},
			price.Default(), unpriced(apiUsage(20, 2, 0, 0, 0), "openai/"+strings.Repeat("m", 310)+"…")},
		{"a result from before the split, with tokens and no stated cost", task.Usage{InputTokens: 10, OutputTokens: 1},
			price.Default(), unpriced(apiUsage(10, 1, 0, 0, 0), "(models not in the result)")},
		{"a result from before the split that stated its cost", task.Usage{InputTokens: 10, OutputTokens: 1, CostMicroUSD: 42},
			price.Default(), apiUsage(10, 1, 0, 0, 42)},
		{"no tokens cost nothing", task.Usage{}, price.Default(), apiUsage(0, 0, 0, 0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Usage(tc.u, tc.prices)); d != "" {
				t.Errorf("usage (-want +got):\n%s", d)
			}
		})
	}
}
