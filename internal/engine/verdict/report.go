package verdict

import (
	"math"
	"slices"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/coherence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/convergence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/rewind"
)

// Policy gathers the knobs of every verdict.
type Policy struct {
	Resume      resume.Policy      `json:"resume"`
	Rewind      rewind.Policy      `json:"rewind"`
	Convergence convergence.Policy `json:"convergence"`
	// DriftWindow is the number of rounds drift is judged over; 0 means coherence.DriftWindow.
	DriftWindow int `json:"driftWindow"`
}

// DefaultPolicy is every verdict's default.
func DefaultPolicy() Policy {
	return Policy{Resume: resume.DefaultPolicy(), Rewind: rewind.DefaultPolicy(),
		Convergence: convergence.Policy{Window: convergence.DefaultWindow}, DriftWindow: coherence.DriftWindow}
}

// Facts is everything the verdicts read, gathered at the edge.
type Facts struct {
	// Ledger is the folded intent ledger.
	Ledger ledger.State
	// Ancestry is the re-adjudicated git evidence; its zero value is "nothing re-verified".
	Ancestry resume.AncestryFacts
	// History is the residual after each turn (see ResidualHistory).
	History []convergence.Snapshot
	// Turns are the live transcript's turns with their digests.
	Turns []rewind.Turn
	// Env is the latest environment error excerpt, with its recorded author.
	Env rewind.EnvExcerpt
	// Rounds are the recorded tool stream grouped by turn.
	Rounds []coherence.Round
}

// Report is every verdict on one run.
type Report struct {
	Resume         resume.Plan                `json:"resume"`
	Reachability   resume.ReachabilityVerdict `json:"reachability"`
	Convergence    convergence.Result         `json:"convergence"`
	Rewind         rewind.Plan                `json:"rewind"`
	Drift          coherence.Drift            `json:"drift"`
	Reconciliation coherence.Reconciliation   `json:"reconciliation"`
}

// Evaluate computes every verdict from the facts. It is pure.
func Evaluate(f Facts, p Policy) Report {
	var r Report
	r.Resume = resume.Decide(f.Ledger, f.Ancestry, RecorderRung(f.Ledger, f.Rounds), p.Resume)
	r.Reachability = resume.Reach(f.Ledger, r.Resume)
	r.Convergence = convergence.Classify(f.History, p.Convergence)
	plan := CoherencePlan(f.Ledger)
	r.Drift = coherence.DetectDrift(plan, f.Rounds, p.DriftWindow)
	r.Reconciliation = coherence.Reconcile(plan, f.Rounds)
	r.Rewind = rewind.Decide(rewind.Input{
		Turns:      f.Turns,
		Checkpoint: f.Ledger.Checkpoint,
		Fire:       Trigger(r.Resume.Verdict, r.Convergence.Verdict),
		Tokens:     NoteTokens(r),
		Env:        f.Env,
	}, nil, p.Rewind)
	return r
}

// Trigger picks the rewind trigger: a DIVERGED resume verdict, else a surfacing convergence verdict,
// else both verdicts as a non-firing trigger (so the NO_REWIND reason names them).
func Trigger(rv resume.Verdict, cv convergence.Verdict) rewind.Fire {
	switch {
	case rv == resume.Diverged:
		return rewind.FireFromResume(rv)
	case cv.ShouldSurface():
		return rewind.FireFromConvergence(cv)
	}
	return rewind.Fire{Resume: rv, Convergence: cv}
}

// NoteTokens are the closed verdict tokens the no-good note carries for this report: the verdicts,
// the residual and verified counts, the re-entry commit, and the reconciliation's counts. Only typed
// values go in, so nothing the agent wrote (a goal, a step id) can reach the note.
func NoteTokens(r Report) []rewind.Token {
	tokens := []rewind.Token{
		rewind.ResumeVerdictToken(r.Resume.Verdict),
		rewind.ConvergenceToken(r.Convergence.Verdict),
		rewind.VerifiedStepsToken(len(r.Resume.Verified)),
		rewind.ResumePointToken(r.Resume.ResumeSHA),
	}
	if !r.Resume.FreeFormGoal && r.Resume.Verdict != resume.Unresumable {
		tokens = append(tokens, rewind.ResidualStepsToken(len(r.Resume.Residual)))
	}
	if r.Reconciliation.OK {
		tokens = append(tokens, rewind.ClaimedWithoutEvidenceToken(len(r.Reconciliation.Claimed)),
			rewind.UnpromisedFilesToken(len(r.Reconciliation.Unpromised)))
	}
	return tokens
}

// CoherencePlan is the plan coherence judges: the INTENT's steps, with their explicit paths appended to
// the text so attribution sees them, marked done when the run claimed the step or recorded it
// verified — both are the run's own assertions, which is exactly what reconciliation checks.
func CoherencePlan(state ledger.State) coherence.Plan {
	p := coherence.Plan{Task: state.Goal, Steps: []coherence.Step{}}
	for _, s := range state.Steps {
		_, claimed := state.Claimed[s.ID]
		_, verified := state.Verified[s.ID]
		text := strings.TrimSpace(s.Text + " " + strings.Join(s.Paths, " "))
		p.Steps = append(p.Steps, coherence.Step{ID: s.ID, Text: text, Done: claimed || verified, Tools: s.Tools})
	}
	return p
}

// RecorderRung is what the recorded tool stream shows of each declared step, by the rules plan
// coherence accepts a completion with: only evidence the recorder observed counts (a promised path
// written, a named tool answering, a command passing, a file read back), never an assertion or a
// write elsewhere in the run. Whether the run marked the step done does not matter: the evidence is
// the recorder's, and an unmarked step that was done is still done.
func RecorderRung(state ledger.State, rounds []coherence.Round) resume.RecorderFacts {
	plan := CoherencePlan(state)
	out := resume.RecorderFacts{}
	for _, s := range plan.Steps {
		c := coherence.AcceptCompletion(s, plan, rounds)
		w := resume.Witness{Contradicted: c.Contradicted}
		if c.Accepted && c.Evidence.Observed() && len(c.CallSteps) > 0 {
			w.Done, w.AtStep = true, slices.Max(c.CallSteps)
		}
		if w.Done || w.Contradicted {
			out[s.ID] = w
		}
	}
	return out
}

// ResidualHistory is the residual after each turn: the ledger is folded event by event and, at the end
// of every turn (just before the next model call, and at the end of the log), the resume residual is
// computed against the same re-adjudicated ancestry and the recorder's rung over the tool stream as it
// stood then (rounds cut before the turn's end): a step counts from the turn its evidence was
// recorded in, never from a later call. Turns before an INTENT, and turns whose plan has no declared
// steps or is unresumable, have no measurable residual and are left out — a free-form run therefore
// has no history and is never called stuck.
func ResidualHistory(events []session.Event, facts resume.AncestryFacts, rounds []coherence.Round, policy resume.Policy) []convergence.Snapshot {
	facts.LaneAdvancedPastResume = false // the residual does not depend on it; the verdict does
	history := []convergence.Snapshot{}
	var f ledger.Folder
	turn := -1
	take := func(before int64) {
		if turn < 0 {
			return
		}
		state := f.State()
		if len(state.Steps) == 0 {
			return
		}
		if p := resume.Decide(state, facts, RecorderRung(state, roundsBefore(rounds, before)), policy); p.Verdict != resume.Unresumable {
			history = append(history, convergence.Snapshot{Turn: turn, Residual: p.Residual})
		}
	}
	for _, ev := range events {
		if ev.Kind == session.KindModelCall {
			take(ev.Step)
			turn++
		}
		f.Add(ev)
	}
	take(math.MaxInt64)
	return history
}

// roundsBefore is the tool stream as it stood before step: the calls recorded before it.
func roundsBefore(rounds []coherence.Round, step int64) []coherence.Round {
	out := make([]coherence.Round, 0, len(rounds))
	for _, r := range rounds {
		cut := coherence.Round{Label: r.Label, Marks: r.Marks}
		for _, c := range r.Calls {
			if c.Step < step {
				cut.Calls = append(cut.Calls, c)
			}
		}
		out = append(out, cut)
	}
	return out
}
