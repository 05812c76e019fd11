package rewind

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/convergence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// Decision is the rewind verdict; only REWIND authorises the consumer to truncate and re-enter.
type Decision string

const (
	Rewind     Decision = "REWIND"
	NoRewind   Decision = "NO_REWIND"
	Unanchored Decision = "UNANCHORED"
)

// Actionable reports whether the consumer should truncate the transcript and re-enter.
func (d Decision) Actionable() bool { return d == Rewind }

// Reason is the machine-readable cause of a rewind decision.
type Reason string

const (
	ReasonNotAStopSignal  Reason = "NotAGroundTruthStop"
	ReasonNoCheckpoint    Reason = "NoMintedCheckpoint"
	ReasonNoLiveTurn      Reason = "NoLiveTurnAtCheckpoint"
	ReasonDigestMismatch  Reason = "TurnDigestMismatch"
	ReasonDuplicateTurn   Reason = "DuplicateTurnAtCheckpoint"
	ReasonAnchoredRewind  Reason = "RewindToMintedCheckpoint"
	ReasonDigestUnchecked Reason = "RewindDigestNotRequired"
)

// Turn is one transcript turn as data: its index and the recorder's digest of its bytes, never its
// content, so no agent prose can reach the decision.
type Turn struct {
	Index  int    `json:"index"`
	Digest string `json:"digest"`
}

// DigestTurn is the digest that identifies a turn: lower-case hex SHA-256 of its bytes. It is the
// definition of the anchor's identity — the recorder stamps a checkpoint with it and the boundary
// recomputes it for the live transcript — which is what makes the anchor unforgeable by the agent.
func DigestTurn(turnBytes []byte) string {
	sum := sha256.Sum256(turnBytes)
	return hex.EncodeToString(sum[:])
}

// Fire is the trigger: an already-computed ground-truth verdict, never re-derived here. Set one of the
// two; neither set is a non-firing trigger.
type Fire struct {
	Resume      resume.Verdict      `json:"resume,omitempty"`
	Convergence convergence.Verdict `json:"convergence,omitempty"`
}

// FireFromResume wraps a resume verdict as the trigger.
func FireFromResume(v resume.Verdict) Fire { return Fire{Resume: v} }

// FireFromConvergence wraps a convergence verdict as the trigger.
func FireFromConvergence(v convergence.Verdict) Fire { return Fire{Convergence: v} }

// ShouldSurface reports whether the trigger is a ground-truth stop: resume DIVERGED, or a convergence
// verdict in its ShouldSurface set (THRASHING, STARVED).
func (f Fire) ShouldSurface() bool {
	return f.Resume == resume.Diverged || f.Convergence.ShouldSurface()
}

func (f Fire) label() string {
	var parts []string
	if f.Resume != "" {
		parts = append(parts, "resume="+string(f.Resume))
	}
	if f.Convergence != "" {
		parts = append(parts, "convergence="+string(f.Convergence))
	}
	if len(parts) == 0 {
		return "(no signal)"
	}
	return strings.Join(parts, ", ")
}

// Policy shapes the verdict.
type Policy struct {
	// AllowDigestMismatch rewinds to a checkpoint whose live turn no longer digests to the minted stamp
	// (the decision then says DigestUnchecked). Off (the zero value) makes such a checkpoint
	// UNANCHORED: the non-forgeable-anchor floor, which has no honest reason to be lifted; the knob
	// exists so a test can pin the property. Policy{} is the safe default.
	AllowDigestMismatch bool `json:"allowDigestMismatch,omitempty"`
}

// DefaultPolicy requires the live turn to digest to the minted stamp; it is the zero value.
func DefaultPolicy() Policy { return Policy{} }

// Input is what the rewind verdict is computed over, all gathered by the caller.
type Input struct {
	// Turns are the live transcript's turns with their digests.
	Turns []Turn
	// Checkpoint is the recorder-minted anchor from the ledger fold.
	Checkpoint ledger.Checkpoint
	// Fire is the trigger.
	Fire Fire
	// Tokens and Env become the no-good note.
	Tokens []Token
	Env    EnvExcerpt
}

// Plan is the rewind verdict with its derivation.
type Plan struct {
	Decision Decision `json:"decision"`
	Reason   Reason   `json:"reason"`
	Message  string   `json:"message"`
	// RewindToTurn is the minted anchor's index on REWIND, -1 otherwise.
	RewindToTurn int `json:"rewindToTurn"`
	// TranscriptDigest echoes the minted stamp on REWIND so the consumer truncates to it.
	TranscriptDigest string `json:"transcriptDigest,omitempty"`
	// DroppedTurns are the turn indices strictly after the anchor, on REWIND.
	DroppedTurns []int `json:"droppedTurns"`
	Note         Note  `json:"noGoodNote"`
}

// Decide computes the rewind verdict (see the package doc for the order of the rules). It is pure.
func Decide(in Input, reg *Registry, policy Policy) Plan {
	// The note is built the same way in every branch, so there is one place bytes can enter it.
	note := BuildNote(in.Tokens, in.Env, reg)
	p := Plan{RewindToTurn: -1, DroppedTurns: []int{}, Note: note}
	if !in.Fire.ShouldSurface() {
		p.Decision, p.Reason, p.Note = NoRewind, ReasonNotAStopSignal, BuildNote(nil, EnvExcerpt{}, reg)
		p.Message = fmt.Sprintf("no rewind: the trigger (%s) is not a ground-truth stop signal (DIVERGED, "+
			"THRASHING or STARVED); the loop continues and the transcript is untouched", in.Fire.label())
		return p
	}
	cp := in.Checkpoint
	if !cp.Present {
		p.Decision, p.Reason = Unanchored, ReasonNoCheckpoint
		p.Message = fmt.Sprintf("unanchored: %s fired, but the recorder minted no conversation checkpoint; refusing "+
			"to rewind to a turn it did not stamp (the no-good note is still reported)", in.Fire.label())
		return p
	}
	live, found, twice := turnAt(in.Turns, cp.TurnIndex)
	if twice {
		p.Decision, p.Reason = Unanchored, ReasonDuplicateTurn
		p.Message = fmt.Sprintf("unanchored: %s fired, but the live transcript has turn %d more than once, so the turn "+
			"the recorder stamped cannot be told; refusing to rewind", in.Fire.label(), cp.TurnIndex)
		return p
	}
	matches := found && digestsMatch(live.Digest, cp.TranscriptDigest)
	if !policy.AllowDigestMismatch && !matches {
		return unanchoredAt(p, in.Fire, cp, found)
	}
	p.Decision, p.Reason = Rewind, ReasonAnchoredRewind
	if !matches {
		p.Reason = ReasonDigestUnchecked
	}
	p.RewindToTurn, p.TranscriptDigest = cp.TurnIndex, cp.TranscriptDigest
	p.DroppedTurns = after(in.Turns, cp.TurnIndex)
	p.Message = fmt.Sprintf("rewind to the minted checkpoint at turn %d (digest %s): %s is a ground-truth dead end; "+
		"dropping %d turn(s) and re-entering with a no-good note of %d line(s)",
		cp.TurnIndex, short(cp.TranscriptDigest), in.Fire.label(), len(p.DroppedTurns), len(note.Lines()))
	return p
}

func unanchoredAt(p Plan, fire Fire, cp ledger.Checkpoint, found bool) Plan {
	p.Decision, p.Reason = Unanchored, ReasonDigestMismatch
	why := "the live turn there does not digest to the stamp the recorder minted"
	if !found {
		p.Reason, why = ReasonNoLiveTurn, "there is no live turn at that index"
	}
	p.Message = fmt.Sprintf("unanchored: %s fired, but the checkpoint names turn %d (digest %s) and %s — "+
		"history was rewritten under the checkpoint; refusing to rewind to a turn the recorder did not stamp",
		fire.label(), cp.TurnIndex, short(cp.TranscriptDigest), why)
	return p
}

// turnAt finds the live turn at index; twice says more than one turn claims it.
func turnAt(turns []Turn, index int) (turn Turn, found, twice bool) {
	for _, t := range turns {
		if t.Index == index {
			if found {
				return turn, true, true
			}
			turn, found = t, true
		}
	}
	return turn, found, false
}

// digestsMatch compares digests exactly: the recorder mints lower-case hex, and a stamp that differs
// in any byte (case, a space) is not the one it minted. An empty digest on either side never
// matches, so a turn the boundary could not hash is no anchor.
func digestsMatch(a, b string) bool {
	return a != "" && a == b
}

// after lists the turn indices strictly after the anchor, sorted: the dead-end turns to drop. Pure
// subtraction — it removes context and adds none.
func after(turns []Turn, anchor int) []int {
	out := []int{}
	for _, t := range turns {
		if t.Index > anchor {
			out = append(out, t.Index)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	if s == "" {
		return "∅"
	}
	return s
}
