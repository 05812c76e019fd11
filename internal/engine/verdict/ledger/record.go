package ledger

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// SchemaPrefix is the family every ledger schema tag belongs to; the version follows it as "v<N>".
const SchemaPrefix = "agentrewind.io/ledger/"

// CurrentVersion is the newest ledger schema this build reads.
const CurrentVersion = 1

// SchemaV1 is the tag of a version-1 record, the one this build writes.
const SchemaV1 = SchemaPrefix + "v1"

// Op is the kind of a ledger record.
type Op string

const (
	// OpIntent declares the run's goal, its ordered steps and the commit it started from.
	OpIntent Op = "INTENT"
	// OpStepClaimed is the run saying it finished a step — a claim, never evidence.
	OpStepClaimed Op = "STEP_CLAIMED"
	// OpStepVerified is the run saying a step is verified at a commit, and on which rung ("via").
	// It is still written by the run, so it is a hint the boundary re-adjudicates, never authority.
	OpStepVerified Op = "STEP_VERIFIED"
	// OpSuspend parks the run: the recorder stamps the conversation checkpoint and the resume SHA.
	// Only the agent's request to pause mints one.
	OpSuspend Op = "SUSPEND"
	// OpAnchor is a conversation anchor the recorder minted (turn index and transcript digest). The run
	// goes on: an anchor is a point a rewind may return to, not a pause. Only the recorder may append it.
	OpAnchor Op = "ANCHOR"
	// OpEnd is the recorder's word on how the run ended: finished, failed, killed, out of time, or
	// stopped without the recorder knowing which. Only the recorder may append it.
	OpEnd Op = "END"
	// OpResumeProposed records that a continuation was already proposed, so it is not proposed twice.
	OpResumeProposed Op = "RESUME_PROPOSED"
	// OpStart is the recorder's word on the workspace commit the run started from (its HEAD when the
	// recording began). Only the recorder may append it; it outranks the INTENT's startSHA.
	OpStart Op = "START"
)

// Step is one declared step of an INTENT.
type Step struct {
	// ID identifies the step in later records.
	ID string `json:"id"`
	// Text says what the step does, in the run's words.
	Text string `json:"text,omitempty"`
	// Paths are the files or directories the step is expected to change. Re-adjudication accepts a
	// commit as the step's work only if it touches one of these or a path named in Text.
	Paths []string `json:"paths,omitempty"`
	// Tools are the tools whose successful answer completes the step, for work that is neither a file
	// nor a command (a search, a tracker update). The recorder sees those answers; the agent cannot
	// forge them.
	Tools []string `json:"tools,omitempty"`
}

// Record is the wire form of one ledger record: the JSON kept in session.Event.Ledger.
type Record struct {
	Schema string `json:"schema,omitempty"`
	Op     Op     `json:"op"`
	RunID  string `json:"runId,omitempty"`

	// INTENT and START
	Goal     string `json:"goal,omitempty"`
	Steps    []Step `json:"steps,omitempty"`
	StartSHA string `json:"startSHA,omitempty"`

	// STEP_CLAIMED and STEP_VERIFIED
	Step string `json:"step,omitempty"`
	SHA  string `json:"sha,omitempty"`
	Via  string `json:"via,omitempty"`

	// SUSPEND
	TurnIndex        *int   `json:"turnIndex,omitempty"`
	TranscriptDigest string `json:"transcriptDigest,omitempty"`
	ResumeSHA        string `json:"resumeSHA,omitempty"`

	// RESUME_PROPOSED
	PredecessorRunID string `json:"predecessorRunId,omitempty"`

	// END
	End      EndHow `json:"end,omitempty"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Signal   string `json:"signal,omitempty"`
}

// EndHow says how a run ended, as the process that ran the agent saw it.
type EndHow string

const (
	// EndFinished: the agent ended on its own and reported success (exit status 0).
	EndFinished EndHow = "Finished"
	// EndFailed: the agent ended on its own and reported failure (a non-zero exit status, an error).
	EndFailed EndHow = "Failed"
	// EndKilled: the agent was killed (a signal) or its run was cancelled before it ended.
	EndKilled EndHow = "Killed"
	// EndDeadline: the recording's deadline passed before the agent ended.
	EndDeadline EndHow = "DeadlineExceeded"
	// EndStopped: the recorder was told to stop and cannot see how the agent ended (a sidecar proxy).
	EndStopped EndHow = "Stopped"
)

// Known reports whether h is one of the defined ends.
func (h EndHow) Known() bool {
	switch h {
	case EndFinished, EndFailed, EndKilled, EndDeadline, EndStopped:
		return true
	}
	return false
}

// RunEnd is how a run ended: the END record the recorder minted.
type RunEnd struct {
	How EndHow `json:"how"`
	// ExitCode is the agent process's exit status, when the recorder ran the process.
	ExitCode *int `json:"exitCode,omitempty"`
	// Signal names the signal that killed the agent, when one did.
	Signal string `json:"signal,omitempty"`
}

// Intent builds a tagged INTENT record.
func Intent(runID, goal, startSHA string, steps ...Step) Record {
	return Record{Schema: SchemaV1, Op: OpIntent, RunID: runID, Goal: goal, StartSHA: startSHA, Steps: steps}
}

// Claimed builds a tagged STEP_CLAIMED record; sha may be empty.
func Claimed(step, sha string) Record {
	return Record{Schema: SchemaV1, Op: OpStepClaimed, Step: step, SHA: sha}
}

// Verified builds a tagged STEP_VERIFIED record.
func Verified(step, sha, via string) Record {
	return Record{Schema: SchemaV1, Op: OpStepVerified, Step: step, SHA: sha, Via: via}
}

// Suspend builds a tagged SUSPEND record. Only the recorder may append it (with Author OS_RECORDED);
// the fold ignores one the agent wrote.
func Suspend(turnIndex int, transcriptDigest, resumeSHA string) Record {
	return Record{Schema: SchemaV1, Op: OpSuspend, TurnIndex: &turnIndex, TranscriptDigest: transcriptDigest, ResumeSHA: resumeSHA}
}

// Start builds a tagged START record. Only the recorder may append it (with Author OS_RECORDED); the
// fold ignores one the agent wrote.
func Start(startSHA string) Record {
	return Record{Schema: SchemaV1, Op: OpStart, StartSHA: startSHA}
}

// Anchor builds a tagged ANCHOR record. Only the recorder may append it (with Author OS_RECORDED); the
// fold ignores one the agent wrote.
func Anchor(turnIndex int, transcriptDigest string) Record {
	return Record{Schema: SchemaV1, Op: OpAnchor, TurnIndex: &turnIndex, TranscriptDigest: transcriptDigest}
}

// End builds a tagged END record. Only the recorder may append it (with Author OS_RECORDED); the fold
// ignores one the agent wrote.
func End(e RunEnd) Record {
	return Record{Schema: SchemaV1, Op: OpEnd, End: e.How, ExitCode: e.ExitCode, Signal: e.Signal}
}

// ResumeProposed builds a tagged RESUME_PROPOSED record.
func ResumeProposed(predecessorRunID string) Record {
	return Record{Schema: SchemaV1, Op: OpResumeProposed, PredecessorRunID: predecessorRunID}
}

// JSON encodes r for session.Event.Ledger.
func (r Record) JSON() json.RawMessage {
	b, _ := json.Marshal(r) // a Record has no value json cannot encode
	return b
}

// Damage says why a record was not folded as a current, readable record.
type Damage string

const (
	// DamageNone is a readable, current record.
	DamageNone Damage = ""
	// DamageUntagged is a legacy record without a schema tag: folded permissively, but counted.
	DamageUntagged Damage = "Untagged"
	// DamageTooNew is a record whose schema is newer than this build reads: not folded.
	DamageTooNew Damage = "SchemaTooNew"
	// DamageNotJSON is a record that is not a JSON object.
	DamageNotJSON Damage = "NotJSON"
	// DamageForeignSchema is a record tagged with a schema outside the ledger family.
	DamageForeignSchema Damage = "ForeignSchema"
	// DamageBadVersion is a ledger schema tag whose version is not a positive integer.
	DamageBadVersion Damage = "BadSchemaVersion"
	// DamageUnknownOp is a record whose op this schema version does not define.
	DamageUnknownOp Damage = "UnknownOp"
	// DamageMissingStep is a STEP_CLAIMED or STEP_VERIFIED record that names no step.
	DamageMissingStep Damage = "MissingStep"
	// DamageBadSteps is an INTENT whose steps have an empty or repeated id: the plan is ambiguous.
	DamageBadSteps Damage = "BadSteps"
	// DamageUnknownEnd is an END record whose end is not one this schema defines.
	DamageUnknownEnd Damage = "UnknownEnd"
)

// Corrupt reports whether the damage keeps the record out of the fold. Untagged records are folded.
func (d Damage) Corrupt() bool {
	return d != DamageNone && d != DamageUntagged && d != DamageTooNew
}

// Decode reads one ledger record and classifies it. A record is only ever returned for folding when
// the damage is DamageNone or DamageUntagged.
func Decode(raw []byte) (Record, Damage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return Record{}, DamageNotJSON
	}
	var r Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return Record{}, DamageNotJSON
	}
	untagged := r.Schema == ""
	if !untagged {
		if d := checkSchema(r.Schema); d != DamageNone {
			return Record{}, d
		}
	}
	if d := checkShape(r); d != DamageNone {
		return Record{}, d
	}
	if untagged {
		return r, DamageUntagged
	}
	return r, DamageNone
}

// checkSchema accepts a tag of the ledger family at a version this build reads. A newer version is
// refused rather than guessed at: a field whose meaning changed would be folded into a wrong residual.
func checkSchema(tag string) Damage {
	rest, ok := strings.CutPrefix(tag, SchemaPrefix)
	if !ok {
		return DamageForeignSchema
	}
	num, ok := strings.CutPrefix(rest, "v")
	if !ok {
		return DamageBadVersion
	}
	v, err := strconv.Atoi(num)
	switch {
	case err != nil || v < 1:
		return DamageBadVersion
	case v > CurrentVersion:
		return DamageTooNew
	}
	return DamageNone
}

// checkShape checks the fields each op needs to mean anything.
func checkShape(r Record) Damage {
	switch r.Op {
	case OpIntent:
		return checkSteps(r.Steps)
	case OpStepClaimed, OpStepVerified:
		if strings.TrimSpace(r.Step) == "" {
			return DamageMissingStep
		}
	case OpEnd:
		if !r.End.Known() {
			return DamageUnknownEnd
		}
	case OpSuspend, OpAnchor, OpResumeProposed, OpStart:
	default:
		return DamageUnknownOp
	}
	return DamageNone
}

// checkSteps refuses a plan whose steps cannot be told apart: a claim against such a plan would
// attach to whichever duplicate happened to win.
func checkSteps(steps []Step) Damage {
	seen := make(map[string]bool, len(steps))
	for _, s := range steps {
		id := strings.TrimSpace(s.ID)
		if id == "" || seen[id] {
			return DamageBadSteps
		}
		seen[id] = true
	}
	return DamageNone
}
