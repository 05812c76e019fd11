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
