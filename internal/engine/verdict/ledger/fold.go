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

// Checkpoint is the conversation anchor the recorder minted at SUSPEND: the index of a turn and the
// digest of that turn's bytes. Present is false when no recorder-minted SUSPEND carried a stamp.
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

	// Suspended, Checkpoint and SuspendSHA come only from recorder-minted SUSPEND records.
	Suspended  bool       `json:"suspended"`
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
	// UnmintedStarts counts START records the agent wrote; they are ignored.
	UnmintedStarts int `json:"unmintedStarts"`
	// ConflictingStamps counts minted SUSPENDs that stamped a turn already stamped with another digest:
	// the transcript under the turn changed between them, so no stamp for it is an anchor.
	ConflictingStamps int       `json:"conflictingStamps"`
	Problems          []Problem `json:"problems,omitempty"`
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

// Fold folds the ledger events among events, in order. Events of other kinds are ignored.
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
}

// Add folds one event; events that are not ledger events are ignored.
func (f *Folder) Add(ev session.Event) {
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
		f.s.Steps[i] = Step{ID: strings.TrimSpace(st.ID), Text: st.Text, Paths: slices.Clone(st.Paths)}
	}
}

// suspend honours only a recorder-minted SUSPEND (see the package doc): an agent-authored stamp is
// the agent naming its own rewind anchor, which is exactly what the anchor must not be.
func (f *Folder) suspend(r Record, author session.Author) {
	if author != session.AuthorRecorder {
		f.s.UnmintedSuspends++
		return
	}
	f.s.Suspended = true
	if sha := strings.TrimSpace(r.ResumeSHA); sha != "" {
		f.s.SuspendSHA = sha
	}
	// The latest suspension defines the anchor: a SUSPEND without a complete stamp leaves none, rather
	// than silently falling back to an older stamp from a different suspension.
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
