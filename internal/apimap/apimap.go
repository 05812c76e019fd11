package apimap

import (
	"fmt"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/coherence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/convergence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/rewind"
)

// The engine-to-API tables. Each is total over the engine's values and one-to-one.
var (
	resumeVerdicts = map[resume.Verdict]v1alpha1.ResumeVerdict{
		resume.Resumable:   v1alpha1.VerdictResumable,
		resume.Complete:    v1alpha1.VerdictComplete,
		resume.Diverged:    v1alpha1.VerdictDiverged,
		resume.Unresumable: v1alpha1.VerdictUnresumable,
	}
	reachabilities = map[resume.Reachability]v1alpha1.Reachability{
		resume.Reachable:   v1alpha1.Reachable,
		resume.Collectible: v1alpha1.Collectible,
	}
	rewindDecisions = map[rewind.Decision]v1alpha1.RewindDecision{
		rewind.Rewind:     v1alpha1.DecisionRewind,
		rewind.NoRewind:   v1alpha1.DecisionNoRewind,
		rewind.Unanchored: v1alpha1.DecisionUnanchored,
	}
	convergenceVerdicts = map[convergence.Verdict]v1alpha1.ConvergenceVerdict{
		convergence.Converging:   v1alpha1.ConvergenceConverging,
		convergence.Complete:     v1alpha1.ConvergenceComplete,
		convergence.Thrashing:    v1alpha1.ConvergenceThrashing,
		convergence.Starved:      v1alpha1.ConvergenceStarved,
		convergence.Insufficient: v1alpha1.ConvergenceInsufficient,
	}
	callKinds = map[session.Kind]v1alpha1.CallKind{
		session.KindModelCall: v1alpha1.CallModel,
		session.KindToolCall:  v1alpha1.CallTool,
		session.KindEntropy:   v1alpha1.CallEntropy,
	}
	planDriftVerdicts = map[coherence.DriftVerdict]v1alpha1.PlanDriftVerdict{
		coherence.DriftNoPlan:              v1alpha1.DriftNoPlan,
		coherence.DriftInsufficientHistory: v1alpha1.DriftInsufficientHistory,
		coherence.DriftPlanComplete:        v1alpha1.DriftPlanComplete,
		coherence.DriftExploring:           v1alpha1.DriftExploring,
		coherence.DriftOnPlan:              v1alpha1.DriftOnPlan,
		coherence.DriftDrifting:            v1alpha1.DriftDrifting,
	}
)

// The API-to-engine tables, for the policies a ForkRun's spec hands to the engine.
var (
	driftPolicies = map[v1alpha1.DriftPolicy]replay.DriftPolicy{
		v1alpha1.DriftStrict:      replay.Strict,
		v1alpha1.DriftWarn:        replay.Warn,
		v1alpha1.DriftPassthrough: replay.Passthrough,
	}
	replayDriftPolicies = map[v1alpha1.ReplayDriftPolicy]replay.DriftPolicy{
		v1alpha1.ReplayDriftStrict: replay.Strict,
		v1alpha1.ReplayDriftWarn:   replay.Warn,
	}
	toolOnMisses = map[v1alpha1.ToolOnMiss]replay.OnMiss{
		v1alpha1.ToolMissError: replay.OnMissError,
		v1alpha1.ToolMissStub:  replay.OnMissStub,
	}
)

// UnknownValueError is a value the table does not hold: an engine newer than this mapping, or a spec
// the API server should have refused. A controller stalls on it rather than writing a guess.
type UnknownValueError struct {
	Kind  string
	Value string
}

func (e *UnknownValueError) Error() string {
	return fmt.Sprintf("no API spelling for the engine's %s %q", e.Kind, e.Value)
}

func lookup[K ~string, V any](table map[K]V, kind string, k K) (V, error) {
	v, ok := table[k]
	if !ok {
		var zero V
		return zero, &UnknownValueError{Kind: kind, Value: string(k)}
	}
	return v, nil
}

// ResumeVerdict is the API spelling of a resume verdict.
func ResumeVerdict(v resume.Verdict) (v1alpha1.ResumeVerdict, error) {
	return lookup(resumeVerdicts, "resume verdict", v)
}

// Reachability is the API spelling of a reachability verdict.
func Reachability(r resume.Reachability) (v1alpha1.Reachability, error) {
	return lookup(reachabilities, "reachability", r)
}

// RewindDecision is the API spelling of a rewind decision.
func RewindDecision(d rewind.Decision) (v1alpha1.RewindDecision, error) {
	return lookup(rewindDecisions, "rewind decision", d)
}

// ConvergenceVerdict is the API spelling of a convergence verdict.
func ConvergenceVerdict(v convergence.Verdict) (v1alpha1.ConvergenceVerdict, error) {
	return lookup(convergenceVerdicts, "convergence verdict", v)
}

// PlanDriftVerdict is the API spelling of a plan-drift verdict.
func PlanDriftVerdict(v coherence.DriftVerdict) (v1alpha1.PlanDriftVerdict, error) {
	return lookup(planDriftVerdicts, "plan drift verdict", v)
}

// CallKind is the API spelling of the kind of a call that diverged (only boundary calls diverge).
func CallKind(k session.Kind) (v1alpha1.CallKind, error) {
	return lookup(callKinds, "call kind", k)
}

// DriftPolicy is the engine policy for a fork's drift policy; unset means Strict, like the CRD default.
func DriftPolicy(p v1alpha1.DriftPolicy) (replay.DriftPolicy, error) {
	if p == "" {
		return replay.Strict, nil
	}
	return lookup(driftPolicies, "drift policy", p)
}

// ReplayDriftPolicy is the engine policy for a replay's drift policy; unset means Strict.
func ReplayDriftPolicy(p v1alpha1.ReplayDriftPolicy) (replay.DriftPolicy, error) {
	if p == "" {
		return replay.Strict, nil
	}
	return lookup(replayDriftPolicies, "replay drift policy", p)
}

// ToolOnMiss is the engine policy for tool calls the recording does not hold; unset means Error.
func ToolOnMiss(p v1alpha1.ToolOnMiss) (replay.OnMiss, error) {
	if p == "" {
		return replay.OnMissError, nil
	}
	return lookup(toolOnMisses, "tool miss policy", p)
}
