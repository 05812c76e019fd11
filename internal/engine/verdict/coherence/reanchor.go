package coherence

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Re-anchoring restates the goal late in a long run. Where it goes is fixed: appended at the end,
// because any edit to an earlier message (the system prompt, the task message, an insertion before
// the last few) changes bytes inside the provider's cached prefix and makes every later turn pay full
// price. Appending costs tokens instead — every anchor is re-sent on every later turn — so anchors are
// rare and budgeted: none in the first turns, a minimum gap between them and a cap per run, except one
// final anchor near the turn budget's end, where the last-listed deliverable is the one that dies.
const (
	ReanchorPlacement   = "append-end"
	ReanchorFirstRound  = 6
	ReanchorMinGap      = 8
	ReanchorMaxPerRun   = 3
	ReanchorFinalWithin = 2
)

// ReanchorReason is why an anchor fires, strongest trigger first.
type ReanchorReason string

const (
	// ReanchorCompaction: the transcript was compacted — the only event that can drop the goal.
	ReanchorCompaction ReanchorReason = "compaction"
	// ReanchorDrift: DetectDrift said drifting, with evidence.
	ReanchorDrift ReanchorReason = "drift"
	// ReanchorFinal: the turn budget is nearly spent; exempt from the cap, once per run.
	ReanchorFinal ReanchorReason = "final"
	// ReanchorInterval: nothing is wrong; the task has not been restated for a long time.
	ReanchorInterval ReanchorReason = "interval"
)

// AnchorState is the caller's state between turns. The caller owns it (state in, state out): a
// package-level counter would leak between runs that share a process.
type AnchorState struct {
	// LastAnchorRound is the round of the last anchor; nil when none was appended yet.
	LastAnchorRound *int `json:"lastAnchorRound,omitempty"`
	Count           int  `json:"count"`
	FinalDone       bool `json:"finalDone"`
}

// AnchorInput is what ReanchorDecision reads.
type AnchorInput struct {
	Plan Plan
	// Round is the current round; nil means unknown, and then nothing fires.
	Round *int
	// MaxRounds is the run's turn budget; nil when the run has none.
	MaxRounds *int
	State     AnchorState
	// Drift is this round's DetectDrift result, if it was computed.
	Drift *Drift
	// CompactedSinceAnchor is true when the transcript was compacted since the last anchor.
	CompactedSinceAnchor bool
}

// AnchorDecision says whether to append an anchor this round, with its text and the next state.
type AnchorDecision struct {
	Reanchor  bool           `json:"reanchor"`
	Reason    ReanchorReason `json:"reason,omitempty"`
	Text      string         `json:"text,omitempty"`
	Placement string         `json:"placement"`
	// ApproxTokens is a rough budget figure (about four characters a token), not a measurement.
	ApproxTokens int         `json:"approxTokens"`
	State        AnchorState `json:"state"`
	Why          string      `json:"why"`
}

// ReanchorDecision decides whether an anchor is appended this round. It is pure. The final anchor is
// checked first and ignores the cap; the first-round floor, the cap and the gap are lifted only by a
// compaction; then compaction, drift and interval fire in that order.
func ReanchorDecision(in AnchorInput) AnchorDecision {
	prev := in.State
	no := func(why string) AnchorDecision {
		return AnchorDecision{Placement: ReanchorPlacement, State: prev, Why: why}
	}
	if len(in.Plan.Steps) == 0 {
		return no("no plan is recorded")
	}
	if len(in.Plan.outstanding()) == 0 {
		return no("every step is marked done, so there is nothing to re-anchor to")
	}
	if in.Round == nil {
		return no("no round index was given, so neither the interval nor the wall can be judged")
	}
	round := *in.Round
	yes := func(reason ReanchorReason, why string) AnchorDecision {
		text := AnchorText(in.Plan, reason, in.Round, in.MaxRounds)
		next := AnchorState{LastAnchorRound: &round, Count: prev.Count + 1, FinalDone: prev.FinalDone || reason == ReanchorFinal}
		return AnchorDecision{Reanchor: true, Reason: reason, Text: text, Placement: ReanchorPlacement,
			ApproxTokens: (len(text) + 3) / 4, State: next, Why: why}
	}
	if in.MaxRounds != nil && !prev.FinalDone {
		if remaining := *in.MaxRounds - round; remaining >= 0 && remaining <= ReanchorFinalWithin {
			return yes(ReanchorFinal, "the round budget is nearly spent and the last-listed deliverable is the one that dies")
		}
	}
	compacted := in.CompactedSinceAnchor
	switch {
	case round < ReanchorFirstRound && !compacted:
		return no(fmt.Sprintf("round %d is inside the first %d, where the task is still in immediate context", round, ReanchorFirstRound))
	case prev.Count >= ReanchorMaxPerRun && !compacted:
		return no(fmt.Sprintf("%d anchors already appended, at the %d-per-run cap; each one is re-sent every later round", prev.Count, ReanchorMaxPerRun))
	case prev.LastAnchorRound != nil && round-*prev.LastAnchorRound < ReanchorMinGap && !compacted:
		return no(fmt.Sprintf("the last anchor was round %d, inside the %d-round minimum gap", *prev.LastAnchorRound, ReanchorMinGap))
	case compacted:
		return yes(ReanchorCompaction, "the transcript was compacted, which is the only event that can remove the goal from context")
	case in.Drift != nil && in.Drift.Drifting:
		return yes(ReanchorDrift, "drift was detected with evidence, so restating the goal is the cheapest correction available")
	}
	since := round
	if prev.LastAnchorRound != nil {
		since = round - *prev.LastAnchorRound
	}
	return yes(ReanchorInterval, fmt.Sprintf("nothing is wrong; the task has not been restated for %d rounds", since))
}

// AnchorText is the anchor's text: deterministic, so a test can assert its bytes. It restates the goal
// and the outstanding steps and nothing else — the counts and countdown belong to a banner; what
// survives thirty rounds of tool output badly is the task itself. Empty when nothing is outstanding.
func AnchorText(plan Plan, reason ReanchorReason, round, maxRounds *int) string {
	left := plan.outstanding()
	if len(plan.Steps) == 0 || len(left) == 0 {
		return ""
	}
	where := ""
	if round != nil && maxRounds != nil {
		where = fmt.Sprintf(" (round %d of %d)", *round, *maxRounds)
	}
	lead := map[ReanchorReason]string{
		ReanchorCompaction: "the conversation above was compacted, so the original task may no longer be in context",
		ReanchorDrift:      "the recent rounds changed files that no planned step names",
		ReanchorFinal:      "the round budget is nearly spent",
		ReanchorInterval:   "it has been a while since the task was stated",
	}[reason]
	if lead == "" {
		lead = "restating the task"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[plan anchor — automatic, not from the user] Re-stating the goal because %s%s.\n", lead, where)
	fmt.Fprintf(&b, "TASK: %s\n", plan.Task)
	fmt.Fprintf(&b, "STILL OUTSTANDING (%d of %d):\n", len(left), len(plan.Steps))
	for _, s := range left {
		fmt.Fprintf(&b, "  %s [todo] %s\n", s.ID, s.Text)
	}
	if reason == ReanchorFinal {
		b.WriteString("Finish the outstanding items that can still be finished, smallest-risk first, and if one cannot be " +
			"finished mark it blocked with a note rather than leaving it silent.")
	} else {
		b.WriteString("If these are still the deliverables, do the next one. If they are not, declare the steps you are " +
			"actually doing so the rest of the budget is spent against a plan that is true.")
	}
	return b.String()
}

// AppendOnly proves the claim re-anchoring rests on about two transcripts: every message of before is
// still in after, at the same index, with the same role, content, tool calls and tool-call id. It
// compares serialised content, not identity, and has no length shortcut: a truncated after compares a
// message against nothing and fails.
func AppendOnly(before, after []json.RawMessage) bool {
	for i := range before {
		if i >= len(after) || messageKey(before[i]) != messageKey(after[i]) {
			return false
		}
	}
	return true
}

// messageKey is the canonical form of the fields that make a message what it is. A message that is
// not a JSON object keys as its raw bytes, so two different malformed messages never compare equal.
func messageKey(raw json.RawMessage) string {
	var m struct {
		Role       json.RawMessage `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
		ToolCallID json.RawMessage `json:"tool_call_id"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return "raw:" + string(raw)
	}
	key, _ := json.Marshal([]json.RawMessage{compactOrNull(m.Role), compactOrNull(m.Content), compactOrNull(m.ToolCalls), compactOrNull(m.ToolCallID)})
	return string(key)
}

func compactOrNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw // json.Marshal compacts a RawMessage, so whitespace never tells two messages apart
}
