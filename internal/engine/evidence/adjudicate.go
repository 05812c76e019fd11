package evidence

import (
	"errors"
	"regexp"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/coherence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// CheckReason is the outcome of re-adjudicating one STEP_VERIFIED record.
type CheckReason string

const (
	CheckVerified          CheckReason = "Verified"
	CheckNoSHA             CheckReason = "NoSHA"
	CheckNotASHA           CheckReason = "NotASHA"
	CheckSHATooShort       CheckReason = "SHATooShort"
	CheckAmbiguousSHA      CheckReason = "AmbiguousSHA"
	CheckCommitMissing     CheckReason = "CommitMissing"
	CheckNotInAncestry     CheckReason = "NotInAncestry"
	CheckEmptyCommit       CheckReason = "EmptyCommit"
	CheckStepNamesNoPath   CheckReason = "StepNamesNoPath"
	CheckFootprintMismatch CheckReason = "FootprintMismatch"
	CheckCommitUnreadable  CheckReason = "CommitUnreadable"
	// CheckNoStartAnchor: the run's start commit is not in ancestry, so no commit can be shown to be
	// the run's own work rather than history it started from.
	CheckNoStartAnchor CheckReason = "NoStartAnchor"
	// CheckPredatesRun: the commit is the run's start or older — work the run found, not work it did.
	CheckPredatesRun CheckReason = "PredatesRun"
)

// StepCheck is the read-time re-adjudication of one declared step's STEP_VERIFIED record.
type StepCheck struct {
	Step       string `json:"step"`
	ClaimedSHA string `json:"claimedSHA"`
	Via        string `json:"via,omitempty"`
	// Commit is the full SHA the claim resolved to in ancestry.
	Commit   string      `json:"commit,omitempty"`
	Verified bool        `json:"verified"`
	Reason   CheckReason `json:"reason"`
	// Touched are the changed paths that matched a path the step names.
	Touched []string `json:"touched,omitempty"`
}

var hexSHA = regexp.MustCompile(`^[0-9a-f]+$`)

// Adjudicate re-runs the footprint check on every declared step the ledger says is verified. The
// ledger is written by the distrusted run, so its STEP_VERIFIED is a hint: a step counts only if its
// commit exists, is in the ancestry of the evidence ref, is not empty (an --allow-empty commit whose
// message names the step proves nothing moved), and touches a path the step names. A forged record
// pointing at a real but unrelated commit fails the last check.
//
// The commit must also be newer than the run's start: a commit the run started from (a root commit's
// footprint is its whole tree) touches every path the plan names, and would verify steps the run
// never did. Without a start commit in ancestry nothing is verified: fail closed.
func (w *Workspace) Adjudicate(state ledger.State) []StepCheck {
	checks := []StepCheck{}
	before, anchored := w.history(state.StartSHA)
	for _, step := range state.Steps {
		v, ok := state.Verified[step.ID]
		if !ok {
			continue
		}
		if !anchored {
			checks = append(checks, StepCheck{Step: step.ID, ClaimedSHA: v.SHA, Via: v.Via, Reason: CheckNoStartAnchor})
			continue
		}
		checks = append(checks, w.check(step, v, before))
	}
	return checks
}

// history is every commit reachable from the run's start commit, the start included, and whether
// the start resolved in ancestry at all.
func (w *Workspace) history(startSHA string) (map[plumbing.Hash]bool, bool) {
	start, reason := w.resolveClaim(startSHA)
	if reason != "" {
		return nil, false
	}
	before, err := w.reachableFrom(start)
	if err != nil {
		return nil, false
	}
	return before, true
}

func (w *Workspace) check(step ledger.Step, v ledger.Verification, before map[plumbing.Hash]bool) StepCheck {
	c := StepCheck{Step: step.ID, ClaimedSHA: v.SHA, Via: v.Via}
	commit, reason := w.resolveClaim(v.SHA)
	if reason != "" {
		c.Reason = reason
		return c
	}
	c.Commit = commit.String()
	if before[commit] {
		c.Reason = CheckPredatesRun
		return c
	}
	changed, err := w.footprint(commit)
	switch {
	case err != nil:
		c.Reason = CheckCommitUnreadable
		return c
	case len(changed) == 0:
		c.Reason = CheckEmptyCommit
		return c
	}
	named := NamedPaths(step)
	if len(named) == 0 {
		// A step that names nothing cannot be tied to a commit, so it is never verified: fail closed.
		c.Reason = CheckStepNamesNoPath
		return c
	}
	c.Touched = touching(changed, named)
	if len(c.Touched) == 0 {
		c.Reason = CheckFootprintMismatch
		return c
	}
	c.Verified, c.Reason = true, CheckVerified
	return c
}

// resolveClaim finds the commit a claimed SHA names in ancestry, or says why it cannot.
func (w *Workspace) resolveClaim(sha string) (plumbing.Hash, CheckReason) {
	s := strings.ToLower(strings.TrimSpace(sha))
	switch {
	case s == "":
		return plumbing.ZeroHash, CheckNoSHA
	case !hexSHA.MatchString(s):
		return plumbing.ZeroHash, CheckNotASHA
	case len(s) < resume.MinPrefix:
		// Below git's abbreviation floor only an exact (full) match could count, and no full SHA is
		// this short: a one- or two-character token never matches an unrelated commit.
		return plumbing.ZeroHash, CheckSHATooShort
	}
	h, err := w.findInAncestry(s, resume.SameCommit)
	switch {
	case errors.Is(err, errAmbiguous):
		return plumbing.ZeroHash, CheckAmbiguousSHA
	case err != nil && w.existsAnywhere(s, resume.SameCommit):
		return plumbing.ZeroHash, CheckNotInAncestry
	case err != nil:
		return plumbing.ZeroHash, CheckCommitMissing
	}
	return h, ""
}

// NamedPaths are the paths a step names: its explicit paths and the path-shaped tokens of its text.
func NamedPaths(step ledger.Step) []string {
	var out []string
	for _, p := range append(slices.Clone(step.Paths), coherence.StepTargets(step.Text).Paths...) {
		if p = coherence.NormPath(p); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// touching lists the changed paths that are a named path or lie inside a named directory. A bare file
// name does not match the same name in another directory: verification must not be loose (coherence
// attribution, which only steers, may be).
func touching(changed, named []string) []string {
	var out []string
	for _, c := range changed {
		for _, n := range named {
			if c == n || strings.HasPrefix(c, n+"/") {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// LaneReason says how the lane was judged against the resume point.
type LaneReason string

const (
	LaneNoResumePoint        LaneReason = "NoResumePoint"
	LaneResumePointRewritten LaneReason = "ResumePointNotInAncestry"
	LaneAtResumePoint        LaneReason = "AtResumePoint"
	LaneOnlyRunsOwnWork      LaneReason = "OnlyTheRunsOwnCommits"
	LaneForeignWork          LaneReason = "UnrecordedCommitsPastResumePoint"
	LaneUnreadable           LaneReason = "HistoryUnreadable"
)

// maxForeign bounds the foreign commits listed; the count stays exact.
const maxForeign = 10

// LaneCheck is how the evidence ref relates to the resume point.
type LaneCheck struct {
	ResumePoint  string     `json:"resumePoint,omitempty"`
	Advanced     bool       `json:"advanced"`
	Reason       LaneReason `json:"reason"`
	Foreign      []string   `json:"foreign,omitempty"`
	ForeignCount int        `json:"foreignCount"`
}

// Lane decides whether the lane advanced past the resume point: whether a commit reachable from the
// evidence ref but not from the resume point is work the run cannot account for. The run accounts for
// a commit when its ledger names it in a STEP_CLAIMED or STEP_VERIFIED record, or when it is reachable
// from the resume SHA the recorder minted at SUSPEND (the recorder saw that state; the agent cannot
// forge it). Everything else — a successor's or a human's commit, or the run's own commit it never
// recorded — makes the lane advanced, because grafting the residual over unaccounted work could
// overwrite it. The run can name a stranger's commit in its own claim and so excuse it; that is the
// one agent-influenced input here, and it only ever excuses commits the run itself put on record.
//
// No resume point (no verified step and no start SHA in ancestry) is not advanced: the plan already
// says to re-derive the re-entry point from HEAD. A resume point outside the ancestry is advanced:
// history was rewritten under it.
func (w *Workspace) Lane(resumeSHA string, state ledger.State) LaneCheck {
	lc := LaneCheck{ResumePoint: resumeSHA}
	if strings.TrimSpace(resumeSHA) == "" {
		lc.Reason = LaneNoResumePoint
		return lc
	}
	point, err := w.findInAncestry(resumeSHA, resume.SameCommit)
	if err != nil {
		lc.Advanced, lc.Reason = true, LaneResumePointRewritten
		return lc
	}
	if point == w.head {
		lc.Reason = LaneAtResumePoint
		return lc
	}
	before, err := w.reachableFrom(point)
	if err != nil {
		lc.Advanced, lc.Reason = true, LaneUnreadable
		return lc
	}
	own := w.accountedFor(state)
	for _, h := range w.ancestry {
		if before[h] || own[h] {
			continue
		}
		lc.ForeignCount++
		if len(lc.Foreign) < maxForeign {
			lc.Foreign = append(lc.Foreign, h.String())
		}
	}
	lc.Advanced = lc.ForeignCount > 0
	lc.Reason = LaneOnlyRunsOwnWork
	if lc.Advanced {
		lc.Reason = LaneForeignWork
	}
	return lc
}

// accountedFor is the set of ancestry commits the run can account for (see Lane).
func (w *Workspace) accountedFor(state ledger.State) map[plumbing.Hash]bool {
	own := map[plumbing.Hash]bool{}
	if state.SuspendSHA != "" {
		if h, err := w.findInAncestry(state.SuspendSHA, resume.SameCommit); err == nil {
			if set, err := w.reachableFrom(h); err == nil {
				own = set
			}
		}
	}
	var claimed []string
	for _, c := range state.Claimed {
		claimed = append(claimed, c.SHA)
	}
	for _, v := range state.Verified {
		claimed = append(claimed, v.SHA)
	}
	for _, sha := range claimed {
		if h, err := w.findInAncestry(sha, resume.SameCommit); err == nil {
			own[h] = true
		}
	}
	return own
}

// GitReport is what the workspace evidence showed, for the result file and the CLI.
type GitReport struct {
	Source  string      `json:"source"`
	Head    string      `json:"head"`
	Commits int         `json:"commitsInAncestry"`
	Steps   []StepCheck `json:"steps"`
	Lane    LaneCheck   `json:"lane"`
}

// Facts gathers the ancestry facts the resume verdict needs: the ancestry, the steps re-adjudicated
// at read time, HEAD, and whether the lane advanced past the resume point the verdict would mint.
func (w *Workspace) Facts(state ledger.State, policy resume.Policy) (resume.AncestryFacts, GitReport) {
	rep := GitReport{Source: w.source, Head: w.Head(), Commits: len(w.ancestry), Steps: w.Adjudicate(state)}
	facts := resume.AncestryFacts{SHAsInAncestry: w.Ancestry(), VerifiedAtRead: map[string]string{}, HeadSHA: w.Head()}
	for _, c := range rep.Steps {
		if c.Verified {
			facts.VerifiedAtRead[c.Step] = c.Commit
		}
	}
	// The resume point does not depend on the lane flag, so it can be computed first and the lane
	// measured against exactly the point the verdict will mint.
	rep.Lane = w.Lane(resume.Point(state, facts, policy), state)
	facts.LaneAdvancedPastResume = rep.Lane.Advanced
	return facts, rep
}
