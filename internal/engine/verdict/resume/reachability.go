package resume

import (
	"fmt"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// Reachability says whether the garbage collector must keep a run.
type Reachability string

const (
	// Reachable runs can still make progress (or need a human) and are kept regardless of age.
	Reachable Reachability = "REACHABLE"
	// Collectible runs hold no resumable residual; a reaper may delete them after its grace period.
	Collectible Reachability = "COLLECTIBLE"
)

// ReachabilityReason is the machine-readable cause of a reachability verdict.
type ReachabilityReason string

const (
	ReasonResumableRetained      ReachabilityReason = "ResumableRetained"
	ReasonSuspendedRetained      ReachabilityReason = "SuspendedResumableRetained"
	ReasonDivergedRetained       ReachabilityReason = "DivergedRetained"
	ReasonCompleteCollectible    ReachabilityReason = "CompleteCollectible"
	ReasonUnresumableCollectible ReachabilityReason = "UnresumableCollectible"
	ReasonUnknownVerdictRetained ReachabilityReason = "UnknownVerdictRetained"
	ReasonUnreadableRetained     ReachabilityReason = "UnreadableLedgerRetained"
	ReasonUnsoundRetained        ReachabilityReason = "UnsoundLedgerRetained"
)

// ReachabilityVerdict is the GC verdict with the resume verdict it rests on.
type ReachabilityVerdict struct {
	Reachability  Reachability       `json:"reachability"`
	Reason        ReachabilityReason `json:"reason"`
	Message       string             `json:"message"`
	RunID         string             `json:"runId,omitempty"`
	ResumeVerdict Verdict            `json:"resumeVerdict"`
	// Suspended is true when the run stopped without finishing, by the recorder's word (see
	// ledger.State.Suspended); Stop says how: paused, failed, killed or out of time.
	Suspended bool              `json:"suspended"`
	Stop      ledger.StopReason `json:"stop,omitempty"`
}

// Collectible reports whether the run may be garbage-collected.
func (r ReachabilityVerdict) Collectible() bool { return r.Reachability == Collectible }

// Reach is the reachability rule: a run is garbage only if its resume verdict is COMPLETE or
// UNRESUMABLE. Reachability is adjudicated, never counted: a crashed run's ledger holds a residual no
// live reference points at, and a parked run released everything yet is not garbage. A refcount or
// a TTL would collect both. Age is absent on purpose (see the package doc).
func Reach(state ledger.State, plan Plan) ReachabilityVerdict {
	v := ReachabilityVerdict{RunID: plan.RunID, ResumeVerdict: plan.Verdict, Suspended: state.Suspended, Stop: state.Stop}
	if v.RunID == "" {
		v.RunID = state.RunID
	}
	switch plan.Verdict {
	case Resumable:
		v.Reachability, v.Reason = Reachable, ReasonResumableRetained
		door := "RESUMABLE"
		if state.Suspended {
			v.Reason, door = ReasonSuspendedRetained, "SUSPENDED-RESUMABLE ("+stopWords(state.Stop)+")"
		}
		v.Message = door + ": a residual a successor can still make progress on; retained regardless of age"
	case Diverged:
		v.Reachability, v.Reason = Reachable, ReasonDivergedRetained
		v.Message = "DIVERGED: needs a human decision, not a reaper; retained so the conflict is surfaced, never " +
			"silently collected"
	case Complete:
		v.Reachability, v.Reason = Collectible, ReasonCompleteCollectible
		v.Message = "COMPLETE: every declared step verified, the run finished; it holds no resumable residual"
	case Unresumable:
		if reason, msg, retained := unresumableButRetained(plan.Reason); retained {
			v.Reachability, v.Reason, v.Message = Reachable, reason, msg
			break
		}
		v.Reachability, v.Reason = Collectible, ReasonUnresumableCollectible
		v.Message = "UNRESUMABLE: no recoverable work to resume; it holds no resumable residual"
	default:
		// Fail closed: a verdict this build does not know must never make a run deletable.
		v.Reachability, v.Reason = Reachable, ReasonUnknownVerdictRetained
		v.Message = fmt.Sprintf("resume verdict %q is not one this build knows; retained until it is adjudicated", plan.Verdict)
	}
	return v
}

// stopWords says how a suspended run stopped, for a human.
func stopWords(stop ledger.StopReason) string {
	switch stop {
	case ledger.StopSuspended:
		return "paused at the agent's request"
	case ledger.StopFailed:
		return "the agent failed before finishing"
	case ledger.StopKilled:
		return "the agent was killed before finishing"
	case ledger.StopDeadline:
		return "the recording ran out of time"
	}
	return "stopped before finishing"
}

// unresumableButRetained keeps the UNRESUMABLE runs whose ledger this build could not judge: a record
// written by a newer schema, or a fold the policy calls unsound. The seed makes both collectible, but
// every ledger record is agent-written, so one forged or future record would make a run deletable; a
// deletion must never hang on a record an agent could forge or a version we cannot read (DESIGN,
// decided: fail closed).
func unresumableButRetained(reason Reason) (ReachabilityReason, string, bool) {
	switch reason {
	case ReasonUnreadableNewer:
		return ReasonUnreadableRetained, "UNRESUMABLE by a ledger record this build cannot read (a newer schema); " +
			"retained until a build that reads it re-evaluates the run", true
	case ReasonUnsoundFold:
		return ReasonUnsoundRetained, "UNRESUMABLE by an unsound ledger fold (corrupt or untagged records); " +
			"retained, because records the agent wrote must never be what makes a run deletable", true
	}
	return "", "", false
}
