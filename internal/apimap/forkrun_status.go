package apimap

import (
	"fmt"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
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
// the controller stalls on it rather than writing a guess.
func ForkRunResult(r *task.Result) (v1alpha1.ForkRunStatus, error) {
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
		out.Usage = v1alpha1.ForkUsage{Live: usage(task.Usage{}), Replayed: usage(rp.Replayed)}
		out.Provenance = provenance(rp.Provenance)
	case r.Fork != nil:
		f := r.Fork
		stopped, tolerated, toleratedN = f.Divergence, f.FirstDrifts, f.ToleratedDrifts
		out.Usage = v1alpha1.ForkUsage{Live: usage(f.TokensSpent), Replayed: usage(f.Replayed)}
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

// usage is an engine usage in the API's terms, every field set (the CRD requires them all).
func usage(u task.Usage) v1alpha1.Usage {
	return v1alpha1.Usage{
		InputTokens:              new(u.InputTokens),
		OutputTokens:             new(u.OutputTokens),
		CacheCreationInputTokens: new(u.CacheCreationInputTokens),
		CacheReadInputTokens:     new(u.CacheReadInputTokens),
		TotalTokens:              new(u.InputTokens + u.OutputTokens),
		CostMicroUSD:             new(u.CostMicroUSD),
	}
}

func provenance(p task.Provenance) v1alpha1.Provenance {
	return v1alpha1.Provenance{Recorded: new(p.Recorded), Live: new(p.Live), Stub: new(p.Stub)}
}
