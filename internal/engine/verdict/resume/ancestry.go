package resume

import "strings"

// MinPrefix is the shortest hex prefix a SHA comparison honours; below it only an exact match counts.
// Seven is git's conventional abbreviated length. Without the floor a one- or two-character token in a
// claim would "match" an unrelated commit in ancestry and verify a step that never happened.
const MinPrefix = 7

// AncestryFacts is the evidence the boundary gathered and re-adjudicated, handed to the pure verdict.
type AncestryFacts struct {
	// SHAsInAncestry are the commits reachable from the workspace HEAD. A claimed step whose commit
	// is not here was never landed: the resume must redo it.
	SHAsInAncestry []string `json:"shasInAncestry,omitempty"`
	// VerifiedAtRead maps a step id to the commit at which the boundary re-adjudicated it at read time:
	// the commit is in ancestry, is not empty, and touches a path the step names. This — not the
	// agent-written STEP_VERIFIED record — is the authority for "done". A forged STEP_VERIFIED pointing
	// at a real but unrelated commit fails the footprint check and is absent here. Empty means nothing
	// was re-verified, the safe floor when no workspace was available.
	VerifiedAtRead map[string]string `json:"verifiedAtRead,omitempty"`
	// HeadSHA is the workspace HEAD, for the DIVERGED reason and forensics.
	HeadSHA string `json:"headSHA,omitempty"`
	// LaneAdvancedPastResume is true when work the run did not record landed on its lane after the
	// resume point, so the residual cannot be grafted on cleanly. The boundary computes it.
	LaneAdvancedPastResume bool `json:"laneAdvancedPastResume"`
	// NoWorkspace is true when no git workspace was read: the recorder's rung alone then verifies a
	// step. The zero value means a workspace was read, so a caller that forgets to say otherwise gets
	// the stricter rule (git must verify every step).
	NoWorkspace bool `json:"noWorkspace,omitempty"`
}

// Contains reports whether sha is in ancestry (see SameCommit for the matching rule).
func (a AncestryFacts) Contains(sha string) bool {
	for _, c := range a.SHAsInAncestry {
		if SameCommit(sha, c) {
			return true
		}
	}
	return false
}

// SameCommit reports whether two SHA spellings name the same commit. Ledgers hold whatever the agent
// wrote, short or full, so a prefix in either direction matches — but only when the shorter side has
// at least MinPrefix characters; below that only an exact match counts. An empty SHA never matches.
func SameCommit(a, b string) bool {
	a, b = normSHA(a), normSHA(b)
	if a == "" || b == "" {
		return false
	}
	if a == b {
		return true
	}
	if min(len(a), len(b)) < MinPrefix {
		return false
	}
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}

func normSHA(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// short shortens a SHA for a human-readable reason.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// Witness is what the recorded tool stream shows of one declared step: the recorder's rung. The
// recorder saw each call and its answer at the boundary; the agent cannot author them.
type Witness struct {
	// Done is true when the stream holds the step's own evidence by the plan-coherence rules: the
	// path it promised written, its named tool answering, its command passing, its file read back.
	Done bool `json:"done"`
	// Contradicted is true when the stream shows the step failing (its last command failed).
	Contradicted bool `json:"contradicted,omitempty"`
	// AtStep is the log step of the latest recorded call behind Done.
	AtStep int64 `json:"atStep,omitempty"`
}

// RecorderFacts maps a declared step id to what the recorded tool stream shows of it. A step absent
// here is one the stream says nothing about.
type RecorderFacts map[string]Witness
