package coherence

import (
	"fmt"
	"slices"
	"strings"
)

// Drift thresholds. Each leans towards "on plan", for the asymmetry in the package doc.
const (
	// DriftWindow is how many recent rounds are examined.
	DriftWindow = 6
	// DriftMinRounds is the history needed before drift can be judged at all.
	DriftMinRounds = 4
	// DriftMinUnattributed is how many distinct unplanned paths make a different piece of work; one
	// stray file is a helper.
	DriftMinUnattributed = 3
)

// DriftVerdict is the drift verdict.
type DriftVerdict string

const (
	DriftNoPlan              DriftVerdict = "no-plan"
	DriftInsufficientHistory DriftVerdict = "insufficient-history"
	DriftPlanComplete        DriftVerdict = "plan-complete"
	// DriftExploring is its own verdict so nobody later folds "no writes" into drifting.
	DriftExploring DriftVerdict = "exploring"
	DriftOnPlan    DriftVerdict = "on-plan"
	DriftDrifting  DriftVerdict = "drifting"
)

// PathAt is a path changed in a round, with its attribution when it has one.
type PathAt struct {
	Path     string   `json:"path"`
	Round    int      `json:"round"`
	StepID   string   `json:"step,omitempty"`
	Strength Strength `json:"strength,omitempty"`
}

// StaleStep is a step nothing in the whole run can be attributed to. The wording is the honesty:
// "no activity observed" is a fact about the tool stream; "not done" would be a claim about the disk.
type StaleStep struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	Done bool   `json:"done"`
}

// DriftEvidence is what the drift verdict saw.
type DriftEvidence struct {
	Window         int         `json:"window"`
	RoundsSeen     int         `json:"roundsSeen"`
	StaleSteps     []StaleStep `json:"staleSteps"`
	MarkedInWindow []int       `json:"markedInWindow,omitempty"`
	Attributed     []PathAt    `json:"attributed,omitempty"`
	Unattributed   []PathAt    `json:"unattributed,omitempty"`
	MutatingRounds []int       `json:"mutatingRounds,omitempty"`
	// Key is stable while one drift persists and differs between distinct drifts, so a caller nudges
	// once per drift rather than every round.
	Key string `json:"key,omitempty"`
}

// Drift is the drift verdict with its evidence. Suggestion is set only when drifting: a clean result
// carries no stale hint.
type Drift struct {
	Verdict    DriftVerdict   `json:"verdict"`
	Drifting   bool           `json:"drifting"`
	Evidence   *DriftEvidence `json:"evidence"`
	Suggestion string         `json:"suggestion,omitempty"`
}

// DetectDrift judges whether the run is still doing what it said. window < 1 means DriftWindow.
func DetectDrift(plan Plan, rounds []Round, window int) Drift {
	if len(plan.Steps) == 0 {
		return Drift{Verdict: DriftNoPlan}
	}
	if window < 1 {
		window = DriftWindow
	}
	ev := &DriftEvidence{Window: window, RoundsSeen: len(rounds), StaleSteps: staleSteps(plan, rounds)}
	done := func(v DriftVerdict) Drift { return Drift{Verdict: v, Evidence: ev} }
	if len(plan.outstanding()) == 0 {
		return done(DriftPlanComplete)
	}
	if len(rounds) < DriftMinRounds {
		return done(DriftInsufficientHistory)
	}
	first := max(0, len(rounds)-window)
	collectWindow(plan, rounds, first, ev)
	switch {
	case len(ev.MutatingRounds) == 0:
		return done(DriftExploring) // (a) nothing was written: this is orientation
	case len(ev.MarkedInWindow) > 0:
		return done(DriftOnPlan) // (d) the run is maintaining its plan, whatever it writes
	case len(ev.Attributed) > 0:
		return done(DriftOnPlan) // (b) at least one write belongs to a step
	case len(ev.Unattributed) < DriftMinUnattributed:
		return done(DriftOnPlan) // (c) a stray file or two is a helper
	}
	ev.Key = driftKey(ev.Unattributed)
	return Drift{Verdict: DriftDrifting, Drifting: true, Evidence: ev, Suggestion: driftSuggestion(plan, ev)}
}

// collectWindow fills the window's marks, attributed and unattributed writes and mutating rounds.
func collectWindow(plan Plan, rounds []Round, first int, ev *DriftEvidence) {
	for i := first; i < len(rounds); i++ {
		if len(rounds[i].Marks) > 0 {
			ev.MarkedInWindow = append(ev.MarkedInWindow, rounds[i].Label)
		}
	}
	for _, c := range flatten(rounds) {
		if c.round < first {
			continue
		}
		if MarkTools[c.name] && c.ok {
			ev.MarkedInWindow = append(ev.MarkedInWindow, c.label)
		}
		if !c.mutated || len(c.paths) == 0 {
			continue
		}
		if !slices.Contains(ev.MutatingRounds, c.label) {
			ev.MutatingRounds = append(ev.MutatingRounds, c.label)
		}
		for _, p := range c.paths {
			addPath(plan, p, c.label, ev)
		}
	}
}

func addPath(plan Plan, p string, label int, ev *DriftEvidence) {
	seen := func(list []PathAt) bool {
		return slices.ContainsFunc(list, func(x PathAt) bool { return x.Path == p })
	}
	if a, ok := Attribute(p, plan.Steps); ok {
		if !seen(ev.Attributed) {
			ev.Attributed = append(ev.Attributed, PathAt{Path: p, Round: label, StepID: a.StepID, Strength: a.Strength})
		}
	} else if !seen(ev.Unattributed) {
		ev.Unattributed = append(ev.Unattributed, PathAt{Path: p, Round: label})
	}
}

func driftKey(unattributed []PathAt) string {
	paths := make([]string, len(unattributed))
	for i, u := range unattributed {
		paths[i] = u.Path
	}
	slices.Sort(paths)
	return "drift:" + strings.Join(paths, ",")
}

// staleSteps are the steps not marked done that no write in the whole run attributes to.
func staleSteps(plan Plan, rounds []Round) []StaleStep {
	touched := map[string]bool{}
	for _, c := range flatten(rounds) {
		if !c.mutated {
			continue
		}
		for _, p := range c.paths {
			if a, ok := Attribute(p, plan.Steps); ok {
				touched[a.StepID] = true
			}
		}
	}
	out := []StaleStep{}
	for _, s := range plan.Steps {
		if !s.Done && !touched[s.ID] {
			out = append(out, StaleStep{ID: s.ID, Text: s.Text, Done: s.Done})
		}
	}
	return out
}

// driftSuggestion is written for a model to act on, and it offers both honest exits: the commonest
// cause of drift is a plan that stopped describing the work, not a model that stopped caring, and a
// nudge with only "get back on plan" leaves such a run no honest move. No scolding: "you have failed"
// reads as permission to hand back half a job.
func driftSuggestion(plan Plan, ev *DriftEvidence) string {
	var files []string
	for _, u := range ev.Unattributed[:min(4, len(ev.Unattributed))] {
		files = append(files, "`"+u.Path+"`")
	}
	more := ""
	if n := len(ev.Unattributed) - 4; n > 0 {
		more = fmt.Sprintf(", +%d more", n)
	}
	var left []string
	for _, s := range plan.outstanding()[:min(3, len(plan.outstanding()))] {
		left = append(left, s.ID+" "+s.Text)
	}
	return fmt.Sprintf("[plan coherence — automatic, not from the user] The last %d rounds changed %s%s, which no "+
		"step of the recorded plan names, and no step was marked meanwhile. Still outstanding: %s. If this work is the "+
		"task, record a new INTENT with the steps you are actually doing so the remaining budget is spent against a true "+
		"plan; if the outstanding steps are still what was asked for, do the next one now — the last one on the list is "+
		"the one that gets lost.", ev.Window, strings.Join(files, ", "), more, strings.Join(left, " · "))
}

// Banner is the one-line, person-facing form of a drifting verdict, naming files rather than counts;
// empty for every other verdict, so a terminal is not told every round that nothing is wrong.
func (d Drift) Banner() string {
	if !d.Drifting || d.Evidence == nil || len(d.Evidence.Unattributed) == 0 {
		return ""
	}
	ev := d.Evidence
	var files []string
	for _, u := range ev.Unattributed[:min(3, len(ev.Unattributed))] {
		files = append(files, u.Path)
	}
	more := ""
	if n := len(ev.Unattributed) - 3; n > 0 {
		more = fmt.Sprintf(" +%d more", n)
	}
	untouched := ""
	if n := len(ev.StaleSteps); n > 0 {
		untouched = fmt.Sprintf("; %d planned step(s) still untouched", n)
	}
	return fmt.Sprintf("plan drift — the last %d rounds wrote %s%s, which no planned step names, and marked no step%s",
		ev.Window, strings.Join(files, ", "), more, untouched)
}
