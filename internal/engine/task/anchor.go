package task

import (
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// MaxReportedAnchors bounds the anchors a verify result lists (the latest ones); TotalAnchors still
// counts them all.
const MaxReportedAnchors = 256

// Anchor is a point of a session a rewind may go back to: an ANCHOR or SUSPEND the recorder stamped
// into the log (author OS_RECORDED), never one the agent wrote. The operator turns each into a
// Checkpoint.
type Anchor struct {
	// Step is the step of the stamping event in the log.
	Step int64 `json:"step"`
	// TurnIndex is the zero-based model call the stamp anchors.
	TurnIndex int `json:"turnIndex"`
	// TranscriptDigest is the SHA-256, 64 lowercase hex characters, of that turn's transcript.
	TranscriptDigest string `json:"transcriptDigest"`
}

// MintedAnchors lists the anchors among events, in log order, the latest MaxReportedAnchors of them,
// and counts them all. An anchor is a readable ANCHOR or SUSPEND ledger record authored by the recorder
// with a turn and a SHA-256 digest. An agent-authored record of the same shape is not one, and neither is any
// stamp of a turn the recorder stamped with two different digests: the transcript under that turn
// changed between the stamps, so no digest identifies it (the ledger fold reads them the same way).
func MintedAnchors(events []session.Event) (anchors []Anchor, total int64) {
	var all []Anchor
	digests := map[int]string{}
	conflicting := map[int]bool{}
	for _, ev := range events {
		if ev.Kind != session.KindLedger || ev.Author != session.AuthorRecorder {
			continue
		}
		rec, damage := ledger.Decode(ev.Ledger)
		if (damage != ledger.DamageNone && damage != ledger.DamageUntagged) || (rec.Op != ledger.OpSuspend && rec.Op != ledger.OpAnchor) || rec.TurnIndex == nil || *rec.TurnIndex < 0 {
			continue
		}
		digest := strings.TrimSpace(rec.TranscriptDigest)
		if !session.ValidBlobHash(digest) {
			continue
		}
		turn := *rec.TurnIndex
		if prev, seen := digests[turn]; seen && prev != digest {
			conflicting[turn] = true
		}
		digests[turn] = digest
		all = append(all, Anchor{Step: ev.Step, TurnIndex: turn, TranscriptDigest: digest})
	}
	for _, a := range all {
		if !conflicting[a.TurnIndex] {
			anchors = append(anchors, a)
		}
	}
	total = int64(len(anchors))
	if len(anchors) > MaxReportedAnchors {
		anchors = anchors[len(anchors)-MaxReportedAnchors:]
	}
	return anchors, total
}

// Anchor returns the listed anchor at step, if the result lists one.
func (v *VerifyResult) Anchor(step int64) (Anchor, bool) {
	for _, a := range v.Anchors {
		if a.Step == step {
			return a, true
		}
	}
	return Anchor{}, false
}

// ParkedAt returns the anchor the run is parked at: the latest anchor, when it is the last step of a log
// the recorder has not closed. Only then is the workspace as it is now the workspace of that step.
func (v *VerifyResult) ParkedAt() (Anchor, bool) {
	if v.Ended || len(v.Anchors) == 0 {
		return Anchor{}, false
	}
	last := v.Anchors[len(v.Anchors)-1]
	return last, last.Step == v.Steps-1
}
