package proxy

import (
	"errors"

	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// ReplayResult is a replay's outcome as the Job contract states it. A drift is a finding (Passed is
// false), not a failure of the task; ok is false when the run failed for another reason.
func ReplayResult(sessionID string, res *replay.ReplayResult, runErr error) (out *task.ReplayResult, ok bool) {
	out = &task.ReplayResult{SessionID: sessionID, Passed: runErr == nil}
	var drift *replay.DriftError
	if errors.As(runErr, &drift) {
		out.Divergence = Divergence(drift)
	} else if runErr != nil {
		return out, false
	}
	if res != nil {
		out.ToleratedDrifts, out.FirstDrifts = int64(len(res.Drifts)), firstDrifts(res.Drifts)
		out.LiveCalls, out.Reorders = int64(res.LiveCalls), int64(len(res.Reorders))
		out.Replayed = task.UsageOfEvents(res.Events, served)
		out.Provenance = task.Provenance{Recorded: int64(res.Served), Live: int64(res.LiveCalls)}
	}
	return out, true
}

// ForkResult is a fork's outcome as the Job contract states it.
func ForkResult(parentID string, atStep int64, res *replay.ForkResult) *task.ForkResult {
	out := &task.ForkResult{ParentSessionID: parentID, AtStep: atStep}
	if res == nil {
		return out
	}
	out.ChildSessionID, out.ReachedGoal, out.DivergedAtStep = res.Meta.ID, res.ReachedGoal, res.DivergedAtStep
	if res.Divergence != nil {
		out.Divergence = Divergence(res.Divergence)
	}
	// The totals are the engine's own; the split by model, which the operator prices, is read off the
	// child's calls.
	out.TokensSpent, out.Replayed = task.UsageOf(res.TokensSpent), task.UsageOf(res.Replayed)
	out.TokensSpent.Models, out.Replayed.Models = price.Lines(res.Trace, live), price.Lines(res.Trace, served)
	out.Provenance = task.Provenance{Recorded: int64(res.Provenance.Recorded), Live: int64(res.Provenance.Live), Stub: int64(res.Provenance.Stub)}
	return out
}

// live and served tell the model calls that went live from those served from the recording, as
// replay.ServedUsage does.
func live(ev *session.Event) bool   { return ev.Provenance == session.ProvenanceLive }
func served(ev *session.Event) bool { return ev.Provenance != session.ProvenanceLive }

// Divergence is a drift as a result reports it: where, from which call site, and what was expected.
func Divergence(d *replay.DriftError) *task.Divergence {
	out := &task.Divergence{Step: d.Step, Kind: string(d.Kind), Reason: string(d.Code), Lane: d.Lane, CallSite: d.CallSite,
		ActualFingerprint: d.Fingerprint, ExpectedFingerprint: d.ExpectedFingerprint(), Message: d.Error()}
	switch {
	case d.Nearest != nil:
		out.ExpectedCallSite = d.Nearest.CallSite
	case d.Expected != nil:
		out.ExpectedCallSite = d.Expected.CallSite
	}
	return out
}

func firstDrifts(ds []*replay.DriftError) []task.Divergence {
	var out []task.Divergence
	for i, d := range ds {
		if i == task.MaxReportedDrifts {
			break
		}
		out = append(out, *Divergence(d))
	}
	return out
}
