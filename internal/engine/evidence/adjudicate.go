package evidence

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// Claims gathers, for every declared step the ledger says is verified, what the workspace shows about
// the claimed commit: whether it resolves in ancestry, whether it predates the run's start, and the
// paths it changed. The rules that judge these facts are resume.Adjudicate's. A repository that cannot
// be read is an error, never a fact.
func (w *Workspace) Claims(state ledger.State) ([]resume.ClaimFacts, error) {
	before, anchored, err := w.history(state.StartSHA)
	if err != nil {
		return nil, err
	}
	claims := []resume.ClaimFacts{}
	for _, step := range state.Steps {
		v, ok := state.Verified[step.ID]
		if !ok {
			continue
		}
		f := resume.ClaimFacts{Step: step, Claim: v, StartAnchored: anchored}
		if anchored {
			if f.Commit, err = w.commitFacts(v.SHA, before); err != nil {
				return nil, fmt.Errorf("reading the commit step %s claims (%s): %w", step.ID, v.SHA, err)
			}
		}
		claims = append(claims, f)
	}
	return claims, nil
}

// history is every commit reachable from the run's start commit, the start included, and whether the
// start resolved to exactly one commit in ancestry.
func (w *Workspace) history(startSHA string) (map[plumbing.Hash]bool, bool, error) {
	s, reason := resume.ClaimShape(startSHA)
	if reason != "" {
		return nil, false, nil
	}
	start, err := w.findInAncestry(s, resume.SameCommit)
	if err != nil {
		return nil, false, nil
	}
	before, err := w.reachableFrom(start)
	if err != nil {
		return nil, false, fmt.Errorf("reading the history of the run's start commit %s: %w", start, err)
	}
	return before, true, nil
}

// commitFacts looks a claimed SHA up and, when it is in ancestry, reads its footprint.
func (w *Workspace) commitFacts(sha string, before map[plumbing.Hash]bool) (resume.CommitFacts, error) {
	s, reason := resume.ClaimShape(sha)
	if reason != "" {
		return resume.CommitFacts{Lookup: resume.LookupSkipped}, nil
	}
	commit, err := w.findInAncestry(s, resume.SameCommit)
	switch {
	case errors.Is(err, errAmbiguous):
		return resume.CommitFacts{Lookup: resume.LookupAmbiguous}, nil
	case err != nil && w.existsAnywhere(s, resume.SameCommit):
		return resume.CommitFacts{Lookup: resume.LookupElsewhere}, nil
	case err != nil:
		return resume.CommitFacts{Lookup: resume.LookupMissing}, nil
	}
	changed, err := w.footprint(commit)
	if err != nil {
		return resume.CommitFacts{}, err
	}
	return resume.CommitFacts{Lookup: resume.LookupFound, Commit: commit.String(), PredatesRun: before[commit], Changed: changed}, nil
}

// LaneFacts gathers the commits past the resume point, each with whether the run's ledger names it and
// whether it lies before the recorder-minted suspend SHA. resume.JudgeLane decides what they mean.
func (w *Workspace) LaneFacts(resumeSHA string, state ledger.State) (resume.LaneFacts, error) {
	lf := resume.LaneFacts{ResumePoint: resumeSHA}
	if strings.TrimSpace(resumeSHA) == "" {
		return lf, nil
	}
	point, err := w.findInAncestry(resumeSHA, resume.SameCommit)
	if err != nil {
		return lf, nil // not in ancestry: a fact, PointInAncestry stays false
	}
	lf.PointInAncestry = true
	before, err := w.reachableFrom(point)
	if err != nil {
		return lf, fmt.Errorf("reading the history of the resume point %s: %w", point, err)
	}
	named := w.namedByRun(state)
	suspended, err := w.beforeSuspend(state.SuspendSHA)
	if err != nil {
		return lf, err
	}
	for _, h := range w.ancestry {
		if before[h] {
			continue
		}
		lf.Past = append(lf.Past, resume.PastCommit{SHA: h.String(), NamedByRun: named[h], BeforeSuspend: suspended[h]})
	}
	return lf, nil
}

// namedByRun is the set of ancestry commits the ledger names in a STEP_CLAIMED or STEP_VERIFIED.
func (w *Workspace) namedByRun(state ledger.State) map[plumbing.Hash]bool {
	var claimed []string
	for _, c := range state.Claimed {
		claimed = append(claimed, c.SHA)
	}
	for _, v := range state.Verified {
		claimed = append(claimed, v.SHA)
	}
	named := map[plumbing.Hash]bool{}
	for _, sha := range claimed {
		if h, err := w.findInAncestry(sha, resume.SameCommit); err == nil {
			named[h] = true
		}
	}
	return named
}

// beforeSuspend is the set of commits reachable from the recorder-minted suspend SHA, when it is in
// ancestry.
func (w *Workspace) beforeSuspend(suspendSHA string) (map[plumbing.Hash]bool, error) {
	if suspendSHA == "" {
		return nil, nil
	}
	h, err := w.findInAncestry(suspendSHA, resume.SameCommit)
	if err != nil {
		return nil, nil
	}
	set, err := w.reachableFrom(h)
	if err != nil {
		return nil, fmt.Errorf("reading the history of the suspend commit %s: %w", h, err)
	}
	return set, nil
}

// GitReport is what the workspace evidence showed, for the result file and the CLI.
type GitReport struct {
	Source  string             `json:"source"`
	Head    string             `json:"head"`
	Commits int                `json:"commitsInAncestry"`
	Steps   []resume.StepCheck `json:"steps"`
	Lane    resume.LaneCheck   `json:"lane"`
}

// Facts gathers the ancestry facts the resume verdict needs and applies the re-adjudication rules to
// them: the ancestry, the steps re-adjudicated at read time, HEAD, and whether the lane advanced past
// the resume point the verdict would mint.
func (w *Workspace) Facts(state ledger.State, witness resume.RecorderFacts, policy resume.Policy) (resume.AncestryFacts, GitReport, error) {
	claims, err := w.Claims(state)
	if err != nil {
		return resume.AncestryFacts{}, GitReport{}, err
	}
	rep := GitReport{Source: w.source, Head: w.Head(), Commits: len(w.ancestry), Steps: []resume.StepCheck{}}
	facts := resume.AncestryFacts{SHAsInAncestry: w.Ancestry(), VerifiedAtRead: map[string]string{}, HeadSHA: w.Head()}
	for _, c := range claims {
		check := resume.Adjudicate(c)
		rep.Steps = append(rep.Steps, check)
		if check.Verified {
			facts.VerifiedAtRead[check.Step] = check.Commit
		}
	}
	// The resume point does not depend on the lane flag, so it can be computed first and the lane
	// measured against exactly the point the verdict will mint.
	lf, err := w.LaneFacts(resume.Point(state, facts, witness, policy), state)
	if err != nil {
		return resume.AncestryFacts{}, GitReport{}, err
	}
	rep.Lane = resume.JudgeLane(lf)
	facts.LaneAdvancedPastResume = rep.Lane.Advanced
	return facts, rep, nil
}
