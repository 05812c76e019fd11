package resume

import (
	"regexp"
	"slices"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/coherence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
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
	// CheckNoStartAnchor: the run's start commit is not in ancestry, so no commit can be shown to be
	// the run's own work rather than history it started from.
	CheckNoStartAnchor CheckReason = "NoStartAnchor"
	// CheckPredatesRun: the commit is the run's start or older — work the run found, not work it did.
	CheckPredatesRun CheckReason = "PredatesRun"
)

var hexSHA = regexp.MustCompile(`^[0-9a-f]+$`)

// ClaimShape says whether a claimed SHA is worth looking up, and returns it normalised. Below git's
// abbreviation floor only an exact (full) match could count, and no full SHA is that short, so a one-
// or two-character token never matches an unrelated commit.
func ClaimShape(sha string) (string, CheckReason) {
	s := normSHA(sha)
	switch {
	case s == "":
		return "", CheckNoSHA
	case !hexSHA.MatchString(s):
		return "", CheckNotASHA
	case len(s) < MinPrefix:
		return "", CheckSHATooShort
	}
	return s, ""
}

// Lookup is what the workspace found for a claimed SHA.
type Lookup string

const (
	// LookupSkipped: the claim's shape refused it (ClaimShape) or the run has no start anchor.
	LookupSkipped Lookup = ""
	// LookupFound: exactly one commit in ancestry matches.
	LookupFound Lookup = "Found"
	// LookupAmbiguous: more than one commit in ancestry matches the abbreviation.
	LookupAmbiguous Lookup = "Ambiguous"
	// LookupElsewhere: the commit exists in the repository but not in the evidence ref's ancestry.
	LookupElsewhere Lookup = "Elsewhere"
	// LookupMissing: no such commit in the repository.
	LookupMissing Lookup = "Missing"
)

// CommitFacts is what the workspace showed about one claimed commit; gathered, never judged.
type CommitFacts struct {
	Lookup Lookup `json:"lookup"`
	// Commit is the full SHA, when found.
	Commit string `json:"commit,omitempty"`
	// PredatesRun is true when the commit is reachable from the run's start commit (the start included).
	PredatesRun bool `json:"predatesRun"`
	// Changed are the paths the commit changed against its first parent (a root against the empty tree).
	Changed []string `json:"changed,omitempty"`
}

// ClaimFacts are the facts about one STEP_VERIFIED record of a declared step.
type ClaimFacts struct {
	Step  ledger.Step         `json:"step"`
	Claim ledger.Verification `json:"claim"`
	// StartAnchored is true when the run's start commit resolved in ancestry.
	StartAnchored bool        `json:"startAnchored"`
	Commit        CommitFacts `json:"commit"`
}

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

// Adjudicate re-runs the footprint check on one STEP_VERIFIED claim. The ledger is written by the
// distrusted run, so its record is a hint: the step counts only if the run has a start anchor, the
// commit exists in the ancestry of the evidence ref, is newer than the run's start (a commit the run
// started from touches every path the plan names — a root's footprint is its whole tree), is not empty
// (an --allow-empty commit whose message names the step proves nothing moved), and touches a path the
// step names (a forged record pointing at a real but unrelated commit fails here). The order of the
// checks is part of the contract; every refusal fails closed.
func Adjudicate(f ClaimFacts) StepCheck {
	c := StepCheck{Step: f.Step.ID, ClaimedSHA: f.Claim.SHA, Via: f.Claim.Via}
	if !f.StartAnchored {
		c.Reason = CheckNoStartAnchor
		return c
	}
	if _, reason := ClaimShape(f.Claim.SHA); reason != "" {
		c.Reason = reason
		return c
	}
	switch f.Commit.Lookup {
	case LookupFound:
	case LookupAmbiguous:
		c.Reason = CheckAmbiguousSHA
		return c
	case LookupElsewhere:
		c.Reason = CheckNotInAncestry
		return c
	default:
		c.Reason = CheckCommitMissing
		return c
	}
	c.Commit = f.Commit.Commit
	if f.Commit.PredatesRun {
		c.Reason = CheckPredatesRun
		return c
	}
	if len(f.Commit.Changed) == 0 {
		c.Reason = CheckEmptyCommit
		return c
	}
	named := NamedPaths(f.Step)
	if len(named) == 0 {
		// A step that names nothing cannot be tied to a commit, so it is never verified.
		c.Reason = CheckStepNamesNoPath
		return c
	}
	if c.Touched = touching(f.Commit.Changed, named); len(c.Touched) == 0 {
		c.Reason = CheckFootprintMismatch
		return c
	}
	c.Verified, c.Reason = true, CheckVerified
	return c
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
)

// MaxForeignListed bounds the foreign commits a LaneCheck lists; the count stays exact.
const MaxForeignListed = 10

// PastCommit is a commit reachable from the evidence ref but not from the resume point, with what the
// recording says about it.
type PastCommit struct {
	SHA string `json:"sha"`
	// NamedByRun is true when the run's ledger names the commit in a STEP_CLAIMED or STEP_VERIFIED.
	NamedByRun bool `json:"namedByRun"`
	// BeforeSuspend is true when it is reachable from the SHA the recorder minted at SUSPEND.
	BeforeSuspend bool `json:"beforeSuspend"`
}

// LaneFacts are what the workspace showed about the resume point.
type LaneFacts struct {
	ResumePoint string `json:"resumePoint,omitempty"`
	// PointInAncestry is false when the resume point is not in the evidence ref's ancestry.
	PointInAncestry bool `json:"pointInAncestry"`
	// Past are the commits after the resume point, newest first.
	Past []PastCommit `json:"past,omitempty"`
}

// LaneCheck is how the evidence ref relates to the resume point.
type LaneCheck struct {
	ResumePoint  string     `json:"resumePoint,omitempty"`
	Advanced     bool       `json:"advanced"`
	Reason       LaneReason `json:"reason"`
	Foreign      []string   `json:"foreign,omitempty"`
	ForeignCount int        `json:"foreignCount"`
}

// JudgeLane decides whether the lane advanced past the resume point: whether a commit past it is work
// the run cannot account for. The run accounts for a commit its ledger names, or one reachable from
// the resume SHA the recorder minted at SUSPEND (the recorder saw that state; the agent cannot forge
// it). Everything else — a successor's or a human's commit, or the run's own commit it never recorded
// — advances the lane, because grafting the residual over unaccounted work could overwrite it. The run
// can name a stranger's commit in its own claim and so excuse it; that is the one agent-influenced
// input here, and it only ever excuses commits the run itself put on record.
//
// No resume point is not advanced: the plan already says to re-derive the re-entry point from HEAD. A
// resume point outside the ancestry is advanced: history was rewritten under it.
func JudgeLane(f LaneFacts) LaneCheck {
	lc := LaneCheck{ResumePoint: f.ResumePoint}
	switch {
	case strings.TrimSpace(f.ResumePoint) == "":
		lc.Reason = LaneNoResumePoint
		return lc
	case !f.PointInAncestry:
		lc.Advanced, lc.Reason = true, LaneResumePointRewritten
		return lc
	case len(f.Past) == 0:
		lc.Reason = LaneAtResumePoint
		return lc
	}
	for _, c := range f.Past {
		if c.NamedByRun || c.BeforeSuspend {
			continue
		}
		lc.ForeignCount++
		if len(lc.Foreign) < MaxForeignListed {
			lc.Foreign = append(lc.Foreign, c.SHA)
		}
	}
	lc.Advanced = lc.ForeignCount > 0
	lc.Reason = LaneOnlyRunsOwnWork
	if lc.Advanced {
		lc.Reason = LaneForeignWork
	}
	return lc
}
