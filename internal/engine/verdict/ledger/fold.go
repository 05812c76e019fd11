package ledger

import (
	"maps"
	"slices"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Claim is a STEP_CLAIMED record: the run says it finished the step, optionally at a commit.
type Claim struct {
	SHA string `json:"sha,omitempty"`
}

// Verification is a STEP_VERIFIED record as the run wrote it. Via is an unauthenticated hint.
type Verification struct {
	SHA string `json:"sha"`
	Via string `json:"via,omitempty"`
}

// Checkpoint is the latest conversation anchor the recorder minted (an ANCHOR, or the stamp of a
// SUSPEND): the index of a turn and the digest of that turn's bytes. Present is false when no
// recorder-minted record carried a stamp.
type Checkpoint struct {
	Present          bool   `json:"present"`
	TurnIndex        int    `json:"turnIndex"`
	TranscriptDigest string `json:"transcriptDigest,omitempty"`
}

// Problem names a record the fold could not use, by the step of its event.
type Problem struct {
	Step   int64  `json:"step"`
	Damage Damage `json:"damage"`
}

// maxProblems bounds State.Problems: the counts stay exact, the list is only for a human to start from.
const maxProblems = 32

// State is the folded ledger of one run.
type State struct {
	RunID     string `json:"runId,omitempty"`
	HasIntent bool   `json:"hasIntent"`
	Goal      string `json:"goal,omitempty"`
	// Steps are the declared steps of the latest INTENT, in plan order.
	Steps []Step `json:"steps,omitempty"`
	// StartSHA is the commit the run started from: the recorder's START when there is one
	// (StartMinted), else the INTENT's startSHA — the agent's word, which verdicts re-check against
	// ancestry but cannot otherwise confirm.
	StartSHA    string `json:"startSHA,omitempty"`
	StartMinted bool   `json:"startMinted"`

	// Claimed and Verified are keyed by step id; the latest record for a step wins.
	Claimed  map[string]Claim        `json:"claimed,omitempty"`
	Verified map[string]Verification `json:"verified,omitempty"`

	// Suspended is true when the run stopped without finishing, by the recorder's word: it paused on
	// the agent's request (a minted SUSPEND with no model or tool call after it), or the recorder's END
	// says the agent failed, was killed or ran out of time. Stop says which. An anchor never suspends.
	Suspended bool       `json:"suspended"`
	Stop      StopReason `json:"stop,omitempty"`
	// End is the recorder's END record, absent when the log has none (recorded before the recorder
	// wrote one) or when the run went on after it (a fork past its parent's end).
	End *RunEnd `json:"end,omitempty"`
	// Checkpoint comes from recorder-minted ANCHOR and SUSPEND records, SuspendSHA from SUSPEND alone.
	Checkpoint Checkpoint `json:"checkpoint"`
	SuspendSHA string     `json:"suspendSHA,omitempty"`

	ResumeProposed   bool   `json:"resumeProposed"`
	PredecessorRunID string `json:"predecessorRunId,omitempty"`

	// Records counts every ledger event seen; the counters below say what was wrong with some of them.
	Records          int `json:"records"`
	Corrupt          int `json:"corrupt"`
	Untagged         int `json:"untagged"`
	UnreadableNewer  int `json:"unreadableNewer"`
	UnmintedSuspends int `json:"unmintedSuspends"`
	// UnmintedStarts, UnmintedAnchors and UnmintedEnds count START, ANCHOR and END records the agent
	// wrote; they are ignored.
	UnmintedStarts  int `json:"unmintedStarts"`
	UnmintedAnchors int `json:"unmintedAnchors"`
	UnmintedEnds    int `json:"unmintedEnds"`
	// ConflictingStamps counts minted SUSPENDs that stamped a turn already stamped with another digest:
	// the transcript under the turn changed between them, so no stamp for it is an anchor.
	ConflictingStamps int       `json:"conflictingStamps"`
	Problems          []Problem `json:"problems,omitempty"`
}

// StopReason says how a run stopped, as far as the recording tells.
type StopReason string

const (
	// StopUnrecorded: the log holds no END and no pending pause; it says nothing about how the run
	// stopped (a recording made before the recorder wrote an END, or a run still going).
	StopUnrecorded StopReason = ""
	// StopFinished: the agent ended on its own with success.
	StopFinished StopReason = "Finished"
	// StopSuspended: the agent asked to pause and did no work after.
	StopSuspended StopReason = "Suspended"
	// StopFailed, StopKilled and StopDeadline: the recorder saw the agent fail, be killed or run out of
	// time.
	StopFailed   StopReason = "Failed"
	StopKilled   StopReason = "Killed"
	StopDeadline StopReason = "DeadlineExceeded"
	// StopStopped: the recorder was stopped and could not see how the agent ended.
	StopStopped StopReason = "Stopped"
)

// stopOf folds a pending pause and the recorder's END into a stop. A failure the recorder saw outranks
// a pause, which outranks a clean end: the pause is the agent's request, the failure is what happened.
func stopOf(paused bool, end *RunEnd) (StopReason, bool) {
	if end != nil {
		switch end.How {
		case EndFailed:
			return StopFailed, true
		case EndKilled:
			return StopKilled, true
		case EndDeadline:
			return StopDeadline, true
		}
	}
	if paused {
		return StopSuspended, true
	}
	if end == nil {
		return StopUnrecorded, false
	}
	if end.How == EndFinished {
		return StopFinished, false
	}
	// The recorder was stopped without seeing the agent end. Nothing recorded says the run stopped
	// short, so it is not called suspended; Stop says the end is unknown.
	return StopStopped, false
}

// MintedStart is the recorder's START commit, or "" when the recorder minted none.
func (s State) MintedStart() string {
	if !s.StartMinted {
		return ""
	}
	return s.StartSHA
}

// StepIDs returns the declared step ids in plan order.
func (s State) StepIDs() []string {
	ids := make([]string, len(s.Steps))
	for i, st := range s.Steps {
		ids[i] = st.ID
	}
	return ids
}

// RecordedSHAs returns every commit the ledger names (start, claims, verifications, the minted
// suspend SHA), sorted and without duplicates.
func (s State) RecordedSHAs() []string {
	var out []string
	add := func(sha string) {
		if sha = strings.TrimSpace(sha); sha != "" {
			out = append(out, sha)
		}
	}
	add(s.StartSHA)
	add(s.SuspendSHA)
	for _, c := range s.Claimed {
		add(c.SHA)
	}
	for _, v := range s.Verified {
		add(v.SHA)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Fold folds the ledger events among events, in order. Of the other events only model and tool calls
// count, and only as work done after a pause or an END: the run went on.
func Fold(events []session.Event) State {
	var f Folder
	for _, ev := range events {
		f.Add(ev)
	}
	return f.State()
}

// Folder folds ledger events one at a time, so a caller can take the state after any prefix of a
// session (the residual history convergence is judged on).
type Folder struct {
	s State
	// stamps are the digests minted for each turn so far, to catch two stamps that disagree.
	stamps map[int]string
	// paused is true after a minted SUSPEND until the run does more work.
	paused bool
}

// Add folds one event. A model or tool call after a pause or an END means the run went on: a resumed
// pause, or a fork past its parent's end. Other events that are not ledger events are ignored.
func (f *Folder) Add(ev session.Event) {
	if ev.Kind == session.KindModelCall || ev.Kind == session.KindToolCall {
		f.paused, f.s.End = false, nil
		return
	}
	if ev.Kind != session.KindLedger {
		return
	}
	f.s.Records++
	rec, damage := Decode(ev.Ledger)
	switch {
	case damage == DamageTooNew:
		f.s.UnreadableNewer++
		f.problem(ev.Step, damage)
		return
	case damage.Corrupt():
		f.s.Corrupt++
		f.problem(ev.Step, damage)
		return
	case damage == DamageUntagged:
		f.s.Untagged++
	}
	f.apply(rec, ev.Author)
}

// State returns a copy of the state folded so far; later Adds do not change it.
func (f *Folder) State() State {
	s := f.s
	s.Steps = slices.Clone(f.s.Steps)
	s.Claimed = maps.Clone(f.s.Claimed)
	s.Verified = maps.Clone(f.s.Verified)
	s.Problems = slices.Clone(f.s.Problems)
	if f.s.End != nil {
		end := *f.s.End
		s.End = &end
	}
	s.Stop, s.Suspended = stopOf(f.paused, f.s.End)
	return s
}

func (f *Folder) problem(step int64, d Damage) {
	if len(f.s.Problems) < maxProblems {
		f.s.Problems = append(f.s.Problems, Problem{Step: step, Damage: d})
	}
}

func (f *Folder) apply(r Record, author session.Author) {
	switch r.Op {
	case OpIntent:
		f.intent(r)
	case OpStepClaimed:
		f.s.Claimed = setKey(f.s.Claimed, strings.TrimSpace(r.Step), Claim{SHA: strings.TrimSpace(r.SHA)})
	case OpStepVerified:
		f.s.Verified = setKey(f.s.Verified, strings.TrimSpace(r.Step),
			Verification{SHA: strings.TrimSpace(r.SHA), Via: strings.TrimSpace(r.Via)})
	case OpSuspend:
		f.suspend(r, author)
	case OpAnchor:
		f.anchor(r, author)
	case OpEnd:
		f.end(r, author)
	case OpStart:
		f.start(r, author)
	case OpResumeProposed:
		f.s.ResumeProposed = true
		if r.PredecessorRunID != "" {
			f.s.PredecessorRunID = r.PredecessorRunID
		}
	}
}

// intent replaces the plan: a run that re-plans is judged against the plan it holds now. Claims and
// verifications are kept by step id, because the boundary re-adjudicates them against the new plan's
// steps anyway.
func (f *Folder) intent(r Record) {
	f.s.HasIntent = true
	if r.RunID != "" {
		f.s.RunID = r.RunID
	}
	f.s.Goal = strings.TrimSpace(r.Goal)
	if !f.s.StartMinted {
		f.s.StartSHA = strings.TrimSpace(r.StartSHA)
	}
	f.s.Steps = make([]Step, len(r.Steps))
	for i, st := range r.Steps {
		f.s.Steps[i] = Step{ID: strings.TrimSpace(st.ID), Text: st.Text, Paths: slices.Clone(st.Paths), Tools: slices.Clone(st.Tools)}
	}
}

// suspend honours only a recorder-minted SUSPEND (see the package doc): an agent-authored stamp is
// the agent naming its own rewind anchor, which is exactly what the anchor must not be.
func (f *Folder) suspend(r Record, author session.Author) {
	if author != session.AuthorRecorder {
		f.s.UnmintedSuspends++
		return
	}
	f.paused = true
	if sha := strings.TrimSpace(r.ResumeSHA); sha != "" {
		f.s.SuspendSHA = sha
	}
	f.stamp(r)
}

// anchor honours only a recorder-minted ANCHOR, for the reason suspend gives. It stamps the
// conversation and nothing else: the run is not paused.
func (f *Folder) anchor(r Record, author session.Author) {
	if author != session.AuthorRecorder {
		f.s.UnmintedAnchors++
		return
	}
	f.stamp(r)
}

// end takes the recorder's END; one the agent wrote would let a run declare its own crash finished.
func (f *Folder) end(r Record, author session.Author) {
	if author != session.AuthorRecorder {
		f.s.UnmintedEnds++
		return
	}
	f.s.End = &RunEnd{How: r.End, ExitCode: r.ExitCode, Signal: strings.TrimSpace(r.Signal)}
}

// stamp takes the conversation anchor of a minted ANCHOR or SUSPEND.
func (f *Folder) stamp(r Record) {
	// The latest stamp defines the anchor: a record without a complete stamp leaves none, rather than
	// silently falling back to an older stamp from a different point of the run.
	f.s.Checkpoint = Checkpoint{}
	if r.TurnIndex == nil || *r.TurnIndex < 0 || strings.TrimSpace(r.TranscriptDigest) == "" {
		return
	}
	turn, digest := *r.TurnIndex, strings.ToLower(strings.TrimSpace(r.TranscriptDigest))
	if f.stamps == nil {
		f.stamps = map[int]string{}
	}
	if prev, seen := f.stamps[turn]; seen && prev != digest {
		// Two recorder stamps of one turn that disagree: the turn's history changed between the
		// suspensions, so neither digest identifies it. No anchor, and it stays that way for this turn.
		// The marker is no hex digest, so every later stamp of this turn conflicts too.
		f.s.ConflictingStamps++
		f.stamps[turn] = "conflict"
		return
	}
	f.stamps[turn] = digest
	f.s.Checkpoint = Checkpoint{Present: true, TurnIndex: turn, TranscriptDigest: strings.TrimSpace(r.TranscriptDigest)}
}

// start takes the recorder's word on the starting commit; the agent's START is the agent naming the
// history its work is measured against, which is the claim being checked.
func (f *Folder) start(r Record, author session.Author) {
	if author != session.AuthorRecorder {
		f.s.UnmintedStarts++
		return
	}
	if sha := strings.TrimSpace(r.StartSHA); sha != "" {
		f.s.StartSHA, f.s.StartMinted = sha, true
	}
}

func setKey[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = map[string]V{}
	}
	m[k] = v
	return m
}
