package apimap

import (
	"fmt"
	"slices"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// The CRD's bounds on a Divergence (api/v1alpha1 forkrun_types.go).
const (
	maxLane              = 256
	maxCallSite          = 512
	maxFingerprint       = 128
	maxDivergenceMessage = 4096
)

// ForkRunResult is a replay or fork result in the API's terms: the outcome, how many requests left
// the recording, the first of them, the usage split into live and replayed, and the provenance counts.
// Conditions, the Job and child references and the times are left to the controller. A result that
// carries a value the API cannot spell (an unknown call kind, a reason that is not a code) is an error:
// the controller stalls on it rather than writing a guess. Costs are priced with prices.
func ForkRunResult(r *task.Result, prices *price.Table) (v1alpha1.ForkRunStatus, error) {
	var out v1alpha1.ForkRunStatus
	outcome, err := ForkOutcome(r)
	if err != nil {
		return out, err
	}
	out.Outcome = outcome
	if outcome == v1alpha1.OutcomeFailed {
		return out, nil
	}
	var stopped *task.Divergence
	var tolerated []task.Divergence
	var toleratedN int64
	switch {
	case r.Replay != nil:
		rp := r.Replay
		stopped, tolerated, toleratedN = rp.Divergence, rp.FirstDrifts, rp.ToleratedDrifts
		out.Usage = v1alpha1.ForkUsage{Live: Usage(task.Usage{}, prices), Replayed: Usage(rp.Replayed, prices)}
		out.Provenance = provenance(rp.Provenance)
	case r.Fork != nil:
		f := r.Fork
		stopped, tolerated, toleratedN = f.Divergence, f.FirstDrifts, f.ToleratedDrifts
		out.Usage = v1alpha1.ForkUsage{Live: Usage(f.TokensSpent, prices), Replayed: Usage(f.Replayed, prices)}
		out.Provenance = provenance(f.Provenance)
		if f.DivergedAtStep != nil && stopped == nil {
			return out, fmt.Errorf("the fork result says it diverged at step %d but not how", *f.DivergedAtStep)
		}
	}
	if outcome == v1alpha1.OutcomeDiverged && stopped == nil {
		return out, fmt.Errorf("the %s result says the run diverged but not where", r.Task)
	}
	n := toleratedN
	if stopped != nil {
		n++
	}
	out.Divergences = new(n)
	first := firstDivergence(stopped, tolerated)
	if first != nil {
		if out.FirstDivergence, err = Divergence(first); err != nil {
			return out, err
		}
	}
	return out, nil
}

// firstDivergence is the earliest request that left the recording: the one that stopped the run, or
// a tolerated drift at an earlier step. On a tie the one that stopped the run wins.
func firstDivergence(stopped *task.Divergence, tolerated []task.Divergence) *task.Divergence {
	first := stopped
	for i := range tolerated {
		if first == nil || tolerated[i].Step < first.Step {
			first = &tolerated[i]
		}
	}
	return first
}

// Divergence is a drift as the API reports it, its strings cut to the CRD's bounds.
func Divergence(d *task.Divergence) (v1alpha1.Divergence, error) {
	kind, err := CallKind(session.Kind(d.Kind))
	if err != nil {
		return v1alpha1.Divergence{}, err
	}
	reason, err := reasonCode("drift reason", d.Reason)
	if err != nil {
		return v1alpha1.Divergence{}, err
	}
	if d.Step < 0 {
		return v1alpha1.Divergence{}, fmt.Errorf("a divergence at step %d", d.Step)
	}
	return v1alpha1.Divergence{
		Step:                new(d.Step),
		Kind:                kind,
		Lane:                cutString(d.Lane, maxLane),
		Reason:              string(reason),
		ExpectedCallSite:    cutString(d.ExpectedCallSite, maxCallSite),
		ActualCallSite:      cutString(d.CallSite, maxCallSite),
		ExpectedFingerprint: cutString(d.ExpectedFingerprint, maxFingerprint),
		ActualFingerprint:   cutString(d.ActualFingerprint, maxFingerprint),
		Message:             cutString(d.Message, maxDivergenceMessage),
	}, nil
}

// maxUnpricedModel is the CRD's bound on a name in Usage.unpricedModels.
const maxUnpricedModel = 320

// Usage is an engine usage in the API's terms, every token count set (the CRD requires them all). The
// cost is the result's calls priced with prices: absent, with the models that lack a price named,
// when any could not be priced, never a $0 that only means "no price". A result from before the split
// by model is priced only when it used no tokens or stated its cost.
func Usage(u task.Usage, prices *price.Table) v1alpha1.Usage {
	out := v1alpha1.Usage{
		InputTokens:              new(u.InputTokens),
		OutputTokens:             new(u.OutputTokens),
		CacheCreationInputTokens: new(u.CacheCreationInputTokens),
		CacheReadInputTokens:     new(u.CacheReadInputTokens),
		TotalTokens:              new(u.InputTokens + u.OutputTokens),
	}
	var cost price.Cost
	switch {
	case len(u.Models) > 0:
		cost = prices.Lines(u.Models)
	case u.CostMicroUSD > 0 || u.InputTokens+u.OutputTokens == 0:
		cost = price.Stated(u.CostMicroUSD)
	default:
		cost = price.Missing("(models not in the result)", "a result from before results split usage by model")
	}
	if micro, ok := cost.MicroUSD(); ok {
		out.CostMicroUSD = new(micro)
		return out
	}
	for _, m := range cost.Unpriced() {
		m = cutString(m, maxUnpricedModel)
		if !slices.Contains(out.UnpricedModels, m) {
			out.UnpricedModels = append(out.UnpricedModels, m)
		}
	}
	if len(out.UnpricedModels) == 0 { // an overflow: no model to name
		out.UnpricedModels = []string{"(the total overflows)"}
	}
	return out
}

func provenance(p task.Provenance) v1alpha1.Provenance {
	return v1alpha1.Provenance{Recorded: new(p.Recorded), Live: new(p.Live), Stub: new(p.Stub)}
}
