package coherence

import (
	"fmt"
	"slices"
	"strings"
)

// StepReport is one step of a reconciliation: the plan's view and the evidence's.
type StepReport struct {
	Step
	Completion Completion `json:"completion"`
}

// ClaimedWithoutEvidence reports a step marked done that no evidence supports.
func (s StepReport) ClaimedWithoutEvidence() bool { return s.Done && !s.Completion.Accepted }

// Reconciliation joins the plan to the tool stream: what was promised against what was done. Its
// headline is how many steps marked done have any evidence. It answers "finished?", never "correct?":
// a file being written is not the file being right.
type Reconciliation struct {
	// OK is false when there was no plan to reconcile against; Note then says so.
	OK         bool `json:"ok"`
	Promised   int  `json:"promised"`
	MarkedDone int  `json:"markedDone"`
	// Evidenced is marked done and backed by the tool stream: the only honest "done" count.
	Evidenced int `json:"evidenced"`
	// Claimed are the step ids asserted done without evidence.
	Claimed     []string     `json:"claimedWithoutEvidence"`
	Outstanding []string     `json:"outstanding"`
	Steps       []StepReport `json:"steps"`
	Changed     []PathAt     `json:"changed"`
	// Unpromised are files the run wrote that no step names. Not an accusation — often a test, a
	// lockfile or a fixture — but the user is entitled to the list.
	Unpromised []string `json:"unpromisedFiles"`
	Note       string   `json:"note,omitempty"`
}

// Reconcile compares the plan's promises with the recorded tool stream.
func Reconcile(plan Plan, rounds []Round) Reconciliation {
	r := Reconciliation{Claimed: []string{}, Outstanding: []string{}, Steps: []StepReport{}, Changed: []PathAt{}, Unpromised: []string{}}
	if len(plan.Steps) == 0 {
		r.Note = "no plan with declared steps was recorded for this run, so there is nothing to reconcile against"
		return r
	}
	r.OK, r.Promised = true, len(plan.Steps)
	for _, s := range plan.Steps {
		rep := StepReport{Step: s, Completion: AcceptCompletion(s, plan, rounds)}
		r.Steps = append(r.Steps, rep)
		switch {
		case !s.Done:
			r.Outstanding = append(r.Outstanding, s.ID)
		case rep.ClaimedWithoutEvidence():
			r.MarkedDone++
			r.Claimed = append(r.Claimed, s.ID)
		default:
			r.MarkedDone++
			r.Evidenced++
		}
	}
	r.Changed = changedFiles(plan, rounds)
	for _, c := range r.Changed {
		if c.StepID == "" {
			r.Unpromised = append(r.Unpromised, c.Path)
		}
	}
	return r
}

// changedFiles lists every path a write touched, once, with its attribution.
func changedFiles(plan Plan, rounds []Round) []PathAt {
	out := []PathAt{}
	for _, c := range flatten(rounds) {
		if !c.mutated {
			continue
		}
		for _, p := range c.paths {
			if slices.ContainsFunc(out, func(x PathAt) bool { return x.Path == p }) {
				continue
			}
			at := PathAt{Path: p, Round: c.label}
			if a, ok := Attribute(p, plan.Steps); ok {
				at.StepID, at.Strength = a.StepID, a.Strength
			}
			out = append(out, at)
		}
	}
	return out
}

// Lines renders the reconciliation as printable lines; the caller decides about colour and width.
func (r Reconciliation) Lines() []string {
	if !r.OK {
		return []string{"RECONCILIATION — " + r.Note}
	}
	lines := []string{
		"RECONCILIATION — what changed vs what was promised",
		fmt.Sprintf("  promised %d · marked done %d · evidenced %d · asserted without evidence %d · unpromised files %d",
			r.Promised, r.MarkedDone, r.Evidenced, len(r.Claimed), len(r.Unpromised)),
	}
	for _, s := range r.Steps {
		lines = append(lines, stepLine(s))
	}
	if len(r.Unpromised) > 0 {
		shown := r.Unpromised[:min(10, len(r.Unpromised))]
		more := ""
		if n := len(r.Unpromised) - len(shown); n > 0 {
			more = fmt.Sprintf(", +%d more", n)
		}
		lines = append(lines, "  changed but promised by no step: "+strings.Join(shown, ", ")+more)
	}
	return append(lines, "  (this compares the plan with the tool calls that actually ran — it says nothing about whether "+
		"the finished work is correct)")
}

func stepLine(s StepReport) string {
	mark, tail := "·", ""
	if s.Done {
		mark = "✓"
	}
	if len(s.Completion.Paths) > 0 {
		tail = " — " + strings.Join(s.Completion.Paths[:min(3, len(s.Completion.Paths))], ", ")
	}
	if s.ClaimedWithoutEvidence() {
		mark, tail = "!", " — MARKED DONE, but "+s.Completion.Why
	}
	return fmt.Sprintf("  %s %-3s [%s] %s%s", mark, s.ID, s.Completion.Kind, s.Text, tail)
}
