package resume

import (
	"fmt"
	"slices"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// Verdict is the resume verdict; the four states are mutually exclusive.
type Verdict string

const (
	// Resumable: a clean re-entry point and a non-empty residual — continue from here.
	Resumable Verdict = "RESUMABLE"
	// Complete: every declared step is verified; nothing to resume.
	Complete Verdict = "COMPLETE"
	// Diverged: ground truth moved past the resume point — refuse and surface it to a human.
	Diverged Verdict = "DIVERGED"
	// Unresumable: no intent, an unsound fold or a too-new schema — no residual can be grounded.
	Unresumable Verdict = "UNRESUMABLE"
)

// Known reports whether v is one of the four verdicts.
func (v Verdict) Known() bool {
	switch v {
	case Resumable, Complete, Diverged, Unresumable:
		return true
	}
	return false
}

// RulesVersion names the version of the rules Decide applies. A plan records it, so a plan judged by
// older rules can be found and judged again. Version 1 (plans without the field) trusted git ancestry
// alone and read every anchor as a pause; version 2 adds the recorder's rung and the recorder's END.
const RulesVersion = 2

// Reason is the machine-readable cause of a resume verdict.
type Reason string

const (
	ReasonUnreadableNewer   Reason = "UnreadableNewerSchema"
	ReasonUnsoundFold       Reason = "UnsoundFold"
	ReasonNoIntent          Reason = "NoIntent"
	ReasonFreeFormDiverged  Reason = "FreeFormGoalDiverged"
	ReasonFreeFormResumable Reason = "FreeFormGoalResumable"
	ReasonAllStepsVerified  Reason = "AllStepsVerified"
	ReasonLaneAdvanced      Reason = "LaneAdvancedPastResumePoint"
	ReasonResidualRemains   Reason = "ResidualRemains"
)

// The rungs a STEP_VERIFIED may stand on. Matching a step token in commit prose is defeated by
// `git commit --allow-empty -m "step 3"`, so only rungs that prove an artefact moved are safe anchors:
// the file-path footprint and a registry stamp. This is an allow-list: an unknown via is forgeable.
const (
	ViaFilePath = "file-path"
	ViaRegistry = "registry"
)

func nonforgeable(via string) bool { return via == ViaFilePath || via == ViaRegistry }

// Policy shapes the verdict: thresholds are configuration, the mechanism is fixed.
type Policy struct {
	// AllowForgeableRung accepts a step whose stored via is not on the allow-list when the boundary
	// re-adjudicated it. Off (the zero value) refuses it — a belt to the re-adjudication's braces: a
	// resume point built on a forgeable verdict is worse than none, it would skip work that never
	// happened. Every field's zero value is the safe choice, so Policy{} is the default.
	AllowForgeableRung bool `json:"allowForgeableRung,omitempty"`
	// TreatUntaggedAsCorrupt makes any untagged or corrupt ledger record an unsound fold
	// (UNRESUMABLE). Off by default: legacy records fold permissively and corrupt ones are skipped.
	// A too-new record is UNRESUMABLE regardless.
	TreatUntaggedAsCorrupt bool `json:"treatUntaggedAsCorrupt,omitempty"`
}

// DefaultPolicy requires a non-forgeable rung and folds legacy records permissively; it is the zero
// value.
func DefaultPolicy() Policy { return Policy{} }

// Rung names the evidence a verified step stands on.
type Rung string

const (
	// RungGit: a commit in ancestry whose footprint is the step's work.
	RungGit Rung = "git"
	// RungRecorder: the recorded tool stream shows the step's work (the plan-coherence rules).
	RungRecorder Rung = "recorder"
	// RungBoth: both of them, agreeing.
	RungBoth Rung = "git+recorder"
)

// Step is one step of a plan with the evidence backing it, for verified steps.
type Step struct {
	ID string `json:"id"`
	// SHA is the commit backing the step, when git verified it.
	SHA  string `json:"sha,omitempty"`
	Rung Rung   `json:"rung,omitempty"`
	// AtStep is the log step of the latest recorded call behind the step, when the recorder saw it.
	AtStep *int64 `json:"atStep,omitempty"`
}

// Plan is the resume verdict with its derivation.
type Plan struct {
	Verdict Verdict `json:"verdict"`
	Reason  Reason  `json:"reason"`
	// Message explains the verdict in a sentence for an operator.
	Message string `json:"message"`
	RunID   string `json:"runId,omitempty"`
	// ResumeSHA is the minted re-entry point: the commit the boundary re-adjudicated for the last step
	// of the contiguous verified prefix, else the start SHA when it is in ancestry, else empty
	// (re-derive from HEAD).
	ResumeSHA string `json:"resumeSHA,omitempty"`
	// Residual are the step ids still to do, in plan order; a free-form run has its goal as the one unit.
	Residual []string `json:"residual"`
	// Verified is the contiguous verified prefix the resume point rests on.
	Verified []Step `json:"verified"`
	// FreeFormGoal is true when the run declared no steps and Residual holds its goal.
	FreeFormGoal     bool   `json:"freeFormGoal,omitempty"`
	PredecessorRunID string `json:"predecessorRunId,omitempty"`
	// AlreadyProposed echoes a RESUME_PROPOSED record so a continuation is not proposed twice.
	AlreadyProposed bool `json:"alreadyProposed"`
	// ResumeAfterStep is the re-entry point in the recording: the log step of the latest recorded call
	// behind the verified prefix. A resume replays the log up to it and goes live after. Absent when
	// the recorder saw none of the prefix.
	ResumeAfterStep *int64 `json:"resumeAfterStep,omitempty"`
	// RulesVersion is the RulesVersion of the rules that produced the plan.
	RulesVersion int `json:"rulesVersion"`
}

// Decide computes the resume verdict from a folded ledger, the boundary's ancestry facts and the
// recorder's rung. It is pure. A step counts as done only on a rung the agent cannot forge: git (where a
// workspace was read) and the recorder (what the recorded tool stream shows). Where a workspace was
// read, git must verify the step and the stream must not contradict it; without one, the stream alone
// decides. STEP_CLAIMED and STEP_VERIFIED never count by themselves. The order of the checks is part of
// the contract:
//
//  1. UNRESUMABLE first: a too-new record, an unsound fold (by policy) or no INTENT. Don't guess a
//     residual that cannot be grounded.
//  2. A free-form goal (no declared steps) re-enters from the ancestry-checked start SHA with the whole
//     goal as the residual — DIVERGED if the lane moved, since free-form work gets no carve-out.
//  3. The verified set, fail-closed and re-adjudicated, and its contiguous prefix: after the first hole
//     nothing counts, because the resume restarts before the hole.
//  4. COMPLETE before DIVERGED: a finished run has no stale residual to graft, so a lane that moved
//     since is irrelevant (checking DIVERGED first would keep finished runs from ever being collected).
//  5. DIVERGED when there is a residual and the lane advanced past the resume point.
//  6. RESUMABLE otherwise.
func Decide(state ledger.State, facts AncestryFacts, witness RecorderFacts, policy Policy) Plan {
	base := Plan{RunID: state.RunID, PredecessorRunID: state.PredecessorRunID, Residual: []string{}, Verified: []Step{},
		RulesVersion: RulesVersion}
	if p, refused := unresumable(state, policy, base); refused {
		return p
	}
	base.AlreadyProposed = state.ResumeProposed
	if len(state.Steps) == 0 {
		return freeForm(state, facts, base)
	}
	prefix := contiguousPrefix(state, facts, witness, policy)
	base.Verified = prefix
	base.Residual = residualAfter(state.StepIDs(), len(prefix))
	base.ResumeSHA = resumePoint(state, facts, prefix)
	if len(prefix) > 0 {
		base.ResumeAfterStep = prefix[len(prefix)-1].AtStep
	}
	return stepVerdict(state, facts, base)
}

// Point is the re-entry SHA Decide would mint for these facts. The boundary uses it to measure whether
// the lane advanced past the resume point before it fills AncestryFacts.LaneAdvancedPastResume; the
// point does not depend on that flag.
func Point(state ledger.State, facts AncestryFacts, witness RecorderFacts, policy Policy) string {
	if len(state.Steps) == 0 {
		return safeStart(state, facts)
	}
	return resumePoint(state, facts, contiguousPrefix(state, facts, witness, policy))
}

// unresumable is the floor: the states in which no residual can be grounded.
func unresumable(state ledger.State, policy Policy, p Plan) (Plan, bool) {
	p.Verdict = Unresumable
	switch {
	case state.UnreadableNewer > 0:
		p.Reason = ReasonUnreadableNewer
		p.Message = fmt.Sprintf("the ledger holds %d record(s) with a schema newer than this build reads; "+
			"refusing to guess a residual from a misread intent — upgrade agentrewind and re-evaluate", state.UnreadableNewer)
	case policy.TreatUntaggedAsCorrupt && state.Corrupt+state.Untagged > 0:
		p.Reason = ReasonUnsoundFold
		p.Message = fmt.Sprintf("the ledger has %d corrupt and %d untagged record(s) and the policy treats that "+
			"as an unsound fold; refusing to guess a residual", state.Corrupt, state.Untagged)
	case !state.HasIntent:
		p.Reason = ReasonNoIntent
		p.Message = "no plan declared: the run recorded no INTENT (goal and steps), so there is nothing to resume " +
			"and no residual to ground"
	default:
		return Plan{}, false
	}
	return p, true
}

// safeStart is the start SHA only when it is in ancestry. The INTENT is a self-report; echoing an
// unchecked start SHA as the re-entry point would trust the very claim this verdict exists to check.
func safeStart(state ledger.State, facts AncestryFacts) string {
	if facts.Contains(state.StartSHA) {
		return state.StartSHA
	}
	return ""
}

// freeForm handles a run with a goal but no enumerated steps: the goal is the single residual unit,
// because no step-granular resume point can be computed.
func freeForm(state ledger.State, facts AncestryFacts, p Plan) Plan {
	p.FreeFormGoal = true
	p.ResumeSHA = safeStart(state, facts)
	goal := state.Goal
	if goal == "" {
		goal = "(declared goal)"
	}
	p.Residual = []string{goal}
	if facts.LaneAdvancedPastResume {
		p.Verdict, p.Reason = Diverged, ReasonFreeFormDiverged
		p.Message = fmt.Sprintf("free-form goal, but work the run did not record landed on its lane past %s; "+
			"refusing to redo the whole goal over fresh work — a human must decide", orStart(p.ResumeSHA))
		return p
	}
	p.Verdict, p.Reason = Resumable, ReasonFreeFormResumable
	p.Message = "no enumerated steps: re-enter from the run's start SHA with the whole goal as the residual " +
		"(a step-granular resume needs a declared step list)"
	if p.ResumeSHA == "" {
		p.Message += "; the start SHA is not in ancestry, so re-derive the re-entry point from HEAD"
	}
	return p
}

// contiguousPrefix is the unbroken leading run of safely verified steps.
func contiguousPrefix(state ledger.State, facts AncestryFacts, witness RecorderFacts, policy Policy) []Step {
	prefix := []Step{}
	for _, id := range state.StepIDs() {
		step, ok := verifiedStep(state, id, facts, witness, policy)
		if !ok {
			break // the first hole: nothing at or after it counts as done for the resume
		}
		prefix = append(prefix, step)
	}
	return prefix
}

// verifiedStep joins the two rungs for one step. Without a workspace the recorder's rung decides
// alone. With one, git must verify the step and the recorder must not contradict it: a witnessed step
// whose commit is not in ancestry is not done, and neither is a committed step whose last command the
// recorder saw fail. A step the stream is silent about keeps its git verdict: the recorder cannot see
// work done outside its tools (a shell the agent ran itself).
func verifiedStep(state ledger.State, id string, facts AncestryFacts, witness RecorderFacts, policy Policy) (Step, bool) {
	w := witness[id]
	if facts.NoWorkspace {
		if !w.Done || w.Contradicted {
			return Step{}, false
		}
		return Step{ID: id, Rung: RungRecorder, AtStep: new(w.AtStep)}, true
	}
	if !verifiedOnSafeRung(state, id, facts, policy) || w.Contradicted {
		return Step{}, false
	}
	// The commit the boundary resolved, not the token the run wrote: the re-entry point is minted from
	// evidence, and a full SHA is what a driver can check out.
	step := Step{ID: id, SHA: facts.VerifiedAtRead[id], Rung: RungGit}
	if w.Done {
		step.Rung, step.AtStep = RungBoth, new(w.AtStep)
	}
	return step, true
}

// verifiedOnSafeRung says whether a step is a safe resume anchor. The authority is the boundary's
// read-time re-adjudication; the stored record and its via can only narrow it further:
//   - the boundary must have re-adjudicated the step, at the very commit the ledger records;
//   - that commit must still be in ancestry (a re-adjudicated SHA later rewritten out of history);
//   - with the default policy the stored via must be a non-forgeable rung.
//
// No re-adjudication at all means nothing is verified: a stored STEP_VERIFIED alone never counts.
func verifiedOnSafeRung(state ledger.State, id string, facts AncestryFacts, policy Policy) bool {
	adjudicated, ok := facts.VerifiedAtRead[id]
	if !ok {
		return false
	}
	vs, ok := state.Verified[id]
	if !ok || vs.SHA == "" || !SameCommit(vs.SHA, adjudicated) {
		return false
	}
	if !facts.Contains(vs.SHA) {
		return false
	}
	return policy.AllowForgeableRung || nonforgeable(vs.Via)
}

// residualAfter is every declared step from the first hole on. A step verified downstream of a hole
// stays in the residual: the re-entry SHA sits before the hole, so everything after it is redone, and
// verified ∪ residual == declared always holds.
func residualAfter(declared []string, prefixLen int) []string {
	return slices.Clone(declared[prefixLen:])
}

// resumePoint is the commit behind the last verified step, or the ancestry-checked start SHA.
func resumePoint(state ledger.State, facts AncestryFacts, prefix []Step) string {
	if len(prefix) > 0 {
		return prefix[len(prefix)-1].SHA
	}
	return safeStart(state, facts)
}

// stepVerdict applies steps 4–6 of Decide to a plan with declared steps.
func stepVerdict(state ledger.State, facts AncestryFacts, p Plan) Plan {
	declared := len(state.Steps)
	if len(p.Residual) == 0 {
		p.Verdict, p.Reason = Complete, ReasonAllStepsVerified
		p.Message = fmt.Sprintf("all %d declared step(s) verified %s: nothing to resume", declared, rungWords(facts))
		return p
	}
	if facts.LaneAdvancedPastResume {
		p.Verdict, p.Reason = Diverged, ReasonLaneAdvanced
		p.Message = fmt.Sprintf("work the run did not record landed on its lane past the resume point %s; refusing "+
			"to graft %d stale residual step(s) over fresh work — a human must decide", orStart(p.ResumeSHA), len(p.Residual))
		return p
	}
	p.Verdict, p.Reason = Resumable, ReasonResidualRemains
	p.Message = fmt.Sprintf("verified %d/%d step(s) %s; resume from %s with %d residual step(s)%s",
		len(p.Verified), declared, rungWords(facts), resumeFrom(p), len(p.Residual), claimedNote(state, facts, p.Residual))
	return p
}

// rungWords says in a few words what the steps were verified against.
func rungWords(facts AncestryFacts) string {
	if facts.NoWorkspace {
		return "by the recorded tool stream"
	}
	return "against ancestry"
}

// resumeFrom names the re-entry point for a human: a commit, else a step of the recording.
func resumeFrom(p Plan) string {
	if p.ResumeSHA == "" && p.ResumeAfterStep != nil {
		return fmt.Sprintf("after step %d of the recording", *p.ResumeAfterStep)
	}
	return orStart(p.ResumeSHA)
}

// claimedNote points out residual steps the run claimed: they are redone because no evidence backs them.
func claimedNote(state ledger.State, facts AncestryFacts, residual []string) string {
	n := 0
	for _, id := range residual {
		if _, ok := state.Claimed[id]; ok {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d were claimed but not verified %s — the resume must redo them)", n, rungWords(facts))
}

func orStart(sha string) string {
	if sha == "" {
		return "the start of the run (re-derive from HEAD)"
	}
	return short(sha)
}
