package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/coherence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/convergence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/rewind"
)

// APIVersion names this version of the result contract. A result of any other version is refused: the
// engine and the controller ship in one image, so a mismatch means a mixed rollout, not a format to
// guess at.
const APIVersion = "engine.agentrewind.io/v1"

// Name is an engine task.
type Name string

const (
	Verify     Name = "verify"
	ResumePlan Name = "resume-plan"
	Replay     Name = "replay"
	Fork       Name = "fork"
	Checkpoint Name = "checkpoint"
	GCSweep    Name = "gc-sweep"
)

// Names are every task, in a stable order.
var Names = []Name{Verify, ResumePlan, Replay, Fork, Checkpoint, GCSweep}

// Outcome is how the task ended. A task that ran and found a problem (a corrupt session, a drift) still
// Succeeded as a task: its payload says what it found. Failed means the task could not do its job.
type Outcome string

const (
	Succeeded Outcome = "Succeeded"
	Failed    Outcome = "Failed"
)

// FailureReason is the machine-readable cause of a Failed task; controllers turn it into a condition.
type FailureReason string

const (
	// ReasonInvalidInput: a flag or input document is wrong; retrying the same Job cannot help.
	ReasonInvalidInput FailureReason = "InvalidInput"
	// ReasonSessionNotFound: the session is not committed in the store.
	ReasonSessionNotFound FailureReason = "SessionNotFound"
	// ReasonSessionCorrupt: the session failed verification, so the task refused to use it.
	ReasonSessionCorrupt FailureReason = "SessionCorrupt"
	// ReasonStorageUnavailable: the store could not be reached or refused the credentials.
	ReasonStorageUnavailable FailureReason = "StorageUnavailable"
	// ReasonEvidenceUnavailable: the workspace evidence (a git repository) could not be read.
	ReasonEvidenceUnavailable FailureReason = "EvidenceUnavailable"
	// ReasonInternal: anything else; the message says what.
	ReasonInternal FailureReason = "Internal"
)

// Retryable says whether running the same Job again may succeed: the controller retries these and
// stalls on the others.
func (r FailureReason) Retryable() bool {
	return r == ReasonStorageUnavailable || r == ReasonEvidenceUnavailable || r == ReasonInternal
}

// Failure says why a task failed.
type Failure struct {
	Reason  FailureReason `json:"reason"`
	Message string        `json:"message"`
}

// Result is what an engine Job writes to results/<job-uid>.json. Exactly one payload is set, the one
// of Task, unless the task failed, when Failure is set and the payload may hold what was gathered.
type Result struct {
	APIVersion string    `json:"apiVersion"`
	Task       Name      `json:"task"`
	JobUID     string    `json:"jobUID"`
	Outcome    Outcome   `json:"outcome"`
	Failure    *Failure  `json:"failure,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`

	Verify     *VerifyResult     `json:"verify,omitempty"`
	ResumePlan *ResumePlanResult `json:"resumePlan,omitempty"`
	Replay     *ReplayResult     `json:"replay,omitempty"`
	Fork       *ForkResult       `json:"fork,omitempty"`
	Checkpoint *CheckpointResult `json:"checkpoint,omitempty"`
	GCSweep    *GCSweepResult    `json:"gcSweep,omitempty"`
}

// Usage is a token and cost total.
type Usage struct {
	// InputTokens are all prompt tokens, cached ones included; the cache counts say how many of them
	// were written to and read from the provider's prompt cache.
	InputTokens              int64 `json:"inputTokens"`
	OutputTokens             int64 `json:"outputTokens"`
	CacheCreationInputTokens int64 `json:"cacheCreationInputTokens"`
	CacheReadInputTokens     int64 `json:"cacheReadInputTokens"`
	// CostMicroUSD is the sum of the costs the recorded calls stated (most state none: the reader
	// prices Models with its own table).
	CostMicroUSD int64 `json:"costMicroUSD"`
	// Models splits the calls by provider and model, so the reader prices them (price.Table.Lines).
	// A result from before it has none.
	Models []price.Line `json:"models,omitempty"`
}

// UsageOf is the result form of a session's usage.
func UsageOf(u session.Usage) Usage {
	return Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens,
		CacheReadInputTokens: u.CacheReadInputTokens, CostMicroUSD: u.CostMicroUSD}
}

// UsageOfEvents is UsageOf the model calls among events that keep accepts (nil accepts all), with
// their split by model.
func UsageOfEvents(events []session.Event, keep func(*session.Event) bool) Usage {
	var u session.Usage
	for i := range events {
		if ev := &events[i]; ev.Kind == session.KindModelCall && (keep == nil || keep(ev)) {
			u.Add(ev.Usage)
		}
	}
	out := UsageOf(u)
	out.Models = price.Lines(events, keep)
	return out
}

// ProblemKind is what kind of problem a verify task found in a session.
type ProblemKind string

const (
	// ProblemDigestMismatch: stored bytes do not hash to the digest the session recorded.
	ProblemDigestMismatch ProblemKind = "DigestMismatch"
	// ProblemSessionCorrupt: the session's structure is broken (a bad log line, a missing file, ...).
	ProblemSessionCorrupt ProblemKind = "SessionCorrupt"
)

// ProblemKindOf classifies a session's problem.
func ProblemKindOf(err error) ProblemKind {
	var dm *session.DigestMismatchError
	if errors.As(err, &dm) {
		return ProblemDigestMismatch
	}
	return ProblemSessionCorrupt
}

// PatternCount is how many secrets one redaction pattern replaced.
type PatternCount struct {
	Pattern string `json:"pattern"`
	Count   int64  `json:"count"`
}

// VerifyResult describes a session as read back from the store and checked.
type VerifyResult struct {
	SessionID     string `json:"sessionID"`
	SchemaVersion int    `json:"schemaVersion"`
	EventsHash    string `json:"eventsHash"`
	// Intact is true when the log, every blob and the vault verified against meta.json and the log's
	// structure holds; Problem says what broke when it is false.
	Intact  bool   `json:"intact"`
	Problem string `json:"problem,omitempty"`
	// ProblemKind says what kind of problem Problem is, for a controller's condition reason.
	ProblemKind ProblemKind `json:"problemKind,omitempty"`
	// Ended is true when the log closes with session_end; a crashed run is intact but not ended.
	Ended      bool  `json:"ended"`
	Events     int64 `json:"events"`
	Steps      int64 `json:"steps"`
	ModelCalls int64 `json:"modelCalls"`
	ToolCalls  int64 `json:"toolCalls"`
	Usage      Usage `json:"usage"`
	Blobs      int64 `json:"blobs"`
	Bytes      int64 `json:"bytes"`
	// AddedBytes is Bytes without the blobs a fork's inherited lines reference: what it adds to the
	// store beside its parent. Equal to Bytes for a session that is not a fork.
	AddedBytes int64          `json:"addedBytes"`
	Redactions []PatternCount `json:"redactions"`
	Vault      bool           `json:"vault"`
	// Anchors are the latest MaxReportedAnchors anchors the recorder minted in the log, in log order
	// (see MintedAnchors); TotalAnchors counts them all.
	Anchors      []Anchor `json:"anchors,omitempty"`
	TotalAnchors int64    `json:"totalAnchors,omitempty"`
}

// Evidence is what a resume plan was computed from, so a controller knows when to re-evaluate.
type Evidence struct {
	EventsHash string `json:"eventsHash"`
	// Workspace is false when no repository was given: then nothing can be re-verified.
	Workspace bool `json:"workspace"`
	// ResolvedCommit is the commit whose ancestry was the evidence.
	ResolvedCommit string `json:"resolvedCommit,omitempty"`
	// PlanPresent is true when the ledger declared an INTENT.
	PlanPresent bool `json:"planPresent"`
}

// ResumePlanResult is every verdict on one run with the evidence behind it.
type ResumePlanResult struct {
	SessionID string   `json:"sessionID"`
	Evidence  Evidence `json:"evidence"`
	Report    Report   `json:"report"`
}

// Report is verdict.Report as a controller reads it. It differs only in the rewind plan: the no-good
// note can be built only from closed verdict tokens inside package rewind, so what travels is its
// rendering (NoteView), which a reader can decode but never turn back into a note.
type Report struct {
	Resume         resume.Plan                `json:"resume"`
	Reachability   resume.ReachabilityVerdict `json:"reachability"`
	Convergence    convergence.Result         `json:"convergence"`
	Rewind         RewindView                 `json:"rewind"`
	Drift          coherence.Drift            `json:"drift"`
	Reconciliation coherence.Reconciliation   `json:"reconciliation"`
}

// RewindView is rewind.Plan with its note rendered.
type RewindView struct {
	Decision         rewind.Decision `json:"decision"`
	Reason           rewind.Reason   `json:"reason"`
	Message          string          `json:"message"`
	RewindToTurn     int             `json:"rewindToTurn"`
	TranscriptDigest string          `json:"transcriptDigest,omitempty"`
	DroppedTurns     []int           `json:"droppedTurns"`
	Note             NoteView        `json:"noGoodNote"`
}

// NoteView is a rendered no-good note: its tokens, the environment excerpt and the lines.
type NoteView struct {
	Tokens []NoteToken     `json:"tokens"`
	Env    *EnvExcerptView `json:"envExcerpt"`
	Lines  []string        `json:"lines"`
}

// NoteToken is one closed verdict token as rendered.
type NoteToken struct {
	Kind     rewind.TokenKind `json:"kind"`
	Rendered string           `json:"rendered"`
}

// EnvExcerptView is the environment error excerpt the note carries, with its author.
type EnvExcerptView struct {
	Author session.Author `json:"author"`
	Text   string         `json:"text"`
}

// NewReport turns the verdicts into their wire form through their own JSON encoding, so the view
// cannot drift from what verdict.Report writes (the strict decode here fails on any field it lacks).
func NewReport(r verdict.Report) (Report, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return Report{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var out Report
	if err := dec.Decode(&out); err != nil {
		return Report{}, fmt.Errorf("the verdict report has no wire form: %w", err)
	}
	return out, nil
}

// Divergence is one call that left the recording.
type Divergence struct {
	Step int64  `json:"step"`
	Kind string `json:"kind"`
	// Reason is the machine-readable cause (replay.DriftCode), such as NoRecordedCall.
	Reason              string `json:"reason"`
	Lane                string `json:"lane,omitempty"`
	CallSite            string `json:"callSite,omitempty"`
	ExpectedCallSite    string `json:"expectedCallSite,omitempty"`
	ActualFingerprint   string `json:"actualFingerprint,omitempty"`
	ExpectedFingerprint string `json:"expectedFingerprint,omitempty"`
	Message             string `json:"message,omitempty"`
}

// MaxReportedDrifts bounds the tolerated drifts a result lists; ToleratedDrifts still counts them all.
const MaxReportedDrifts = 8

// ReplayResult is the outcome of a replay: a regression test that passes only with no divergence.
type ReplayResult struct {
	SessionID string `json:"sessionID"`
	Passed    bool   `json:"passed"`
	// Divergence is the drift that failed the replay, when it failed.
	Divergence *Divergence `json:"divergence,omitempty"`
	// ToleratedDrifts counts drifts the Warn or Passthrough policy let through; FirstDrifts lists the
	// first MaxReportedDrifts of them.
	ToleratedDrifts int64        `json:"toleratedDrifts"`
	FirstDrifts     []Divergence `json:"firstDrifts,omitempty"`
	LiveCalls       int64        `json:"liveCalls"`
	Reorders        int64        `json:"reorders"`
	// Provenance counts where the replay's answers came from: all recorded when it passed strictly.
	Provenance Provenance `json:"provenance"`
	// Replayed is what the served calls cost when they were recorded; the replay spent none of it.
	Replayed Usage `json:"replayed"`
}

// Provenance counts where a fork's or a replay's answers came from.
type Provenance struct {
	Recorded int64 `json:"recorded"`
	Live     int64 `json:"live"`
	Stub     int64 `json:"stub"`
}

// ForkResult is the outcome of a fork.
type ForkResult struct {
	ParentSessionID string `json:"parentSessionID"`
	ChildSessionID  string `json:"childSessionID"`
	AtStep          int64  `json:"atStep"`
	// ReachedGoal is nil when the fork had no goal.
	ReachedGoal *bool `json:"reachedGoal,omitempty"`
	// DivergedAtStep is where the fork left the recording and stopped, if it did.
	DivergedAtStep *int64      `json:"divergedAtStep,omitempty"`
	Divergence     *Divergence `json:"divergence,omitempty"`
	TokensSpent    Usage       `json:"tokensSpent"`
	// Replayed is what the served prefix cost when it was recorded; the fork did not spend it again.
	Replayed        Usage        `json:"replayed"`
	Provenance      Provenance   `json:"provenance"`
	ToleratedDrifts int64        `json:"toleratedDrifts"`
	FirstDrifts     []Divergence `json:"firstDrifts,omitempty"`
}

// CheckpointResult describes a captured workspace snapshot.
type CheckpointResult struct {
	CheckpointID string `json:"checkpointID"`
	SessionID    string `json:"sessionID"`
	ManifestHash string `json:"manifestHash"`
	Files        int64  `json:"files"`
	Bytes        int64  `json:"bytes"`
	// IncrementalBytes are the bytes actually uploaded; unchanged files cost nothing.
	IncrementalBytes int64 `json:"incrementalBytes"`
	// Deduplicated is true when the capture equalled the previous checkpoint and none was written.
	Deduplicated bool `json:"deduplicated"`
}

// GCSweepResult is what a blob sweep marked and deleted (or, in a dry run, would delete).
type GCSweepResult struct {
	DryRun bool `json:"dryRun"`
	// RetainedSessions and RetainedCheckpoints are the roots the mark phase walked.
	RetainedSessions    int64 `json:"retainedSessions"`
	RetainedCheckpoints int64 `json:"retainedCheckpoints"`
	MarkedBlobs         int64 `json:"markedBlobs"`
	// Candidates are unreferenced blobs; those younger than the safety margin are kept (Young).
	Candidates   int64 `json:"candidates"`
	Young        int64 `json:"young"`
	DeletedBlobs int64 `json:"deletedBlobs"`
	FreedBytes   int64 `json:"freedBytes"`
	// DamagedSessions (committed, no log) and DamagedCheckpoints (a manifest chunk missing or not
	// hashing to its name) could not be marked from; `agentrewind gc report` names them.
	DamagedSessions    int64 `json:"damagedSessions,omitempty"`
	DamagedCheckpoints int64 `json:"damagedCheckpoints,omitempty"`
}

// Encode writes a result after checking it, indented for a human reading the store.
func Encode(r *Result) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return json.MarshalIndent(r, "", "  ")
}

// Decode reads a result the way a controller does: strictly. An unknown field, another API version, a
// task this build does not know or a payload that does not match the task is an error, so a controller
// never writes a half-understood result into status.
func Decode(data []byte) (*Result, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Result
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("engine result: %w", err)
	}
	if dec.More() {
		return nil, errors.New("engine result: trailing data after the document")
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Validate checks the envelope: the version, a known task, an outcome, and the payload of that task.
func (r *Result) Validate() error {
	if r.APIVersion != APIVersion {
		return fmt.Errorf("engine result: apiVersion %q, want %q", r.APIVersion, APIVersion)
	}
	payloads := r.payloads()
	if _, ok := payloads[r.Task]; !ok {
		return fmt.Errorf("engine result: unknown task %q", r.Task)
	}
	for name, set := range payloads {
		if set && name != r.Task {
			return fmt.Errorf("engine result: a %s result carries a %s payload", r.Task, name)
		}
	}
	switch r.Outcome {
	case Succeeded:
		if r.Failure != nil {
			return fmt.Errorf("engine result: a succeeded %s carries a failure", r.Task)
		}
		if !payloads[r.Task] {
			return fmt.Errorf("engine result: a succeeded %s has no %s payload", r.Task, r.Task)
		}
	case Failed:
		if r.Failure == nil || r.Failure.Reason == "" {
			return fmt.Errorf("engine result: a failed %s says no reason", r.Task)
		}
	default:
		return fmt.Errorf("engine result: outcome %q, want %s or %s", r.Outcome, Succeeded, Failed)
	}
	return nil
}

func (r *Result) payloads() map[Name]bool {
	return map[Name]bool{
		Verify: r.Verify != nil, ResumePlan: r.ResumePlan != nil, Replay: r.Replay != nil,
		Fork: r.Fork != nil, Checkpoint: r.Checkpoint != nil, GCSweep: r.GCSweep != nil,
	}
}
