package rewind

import (
	"context"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// The agent's side of the boundary.
type (
	// AgentContext is the harness's only sanctioned way across the boundary: model, tools, clock,
	// random, UUID, environment, notes, ledger and suspension.
	AgentContext = replay.AgentContext
	// Harness is an agent run.
	Harness = replay.Harness
	// Model is a live model provider; StreamingModel can also stream.
	Model          = replay.Model
	StreamingModel = replay.StreamingModel
	// Tool is a live tool; its result must be JSON-serialisable.
	Tool = replay.Tool
	// CallOption names a call site (see Site).
	CallOption = replay.CallOption
)

// The wire shapes of a recorded call.
type (
	Request  = session.Request
	Response = session.Response
	Message  = session.Message
	Usage    = session.Usage
	Event    = session.Event
	Session  = session.Session
	Meta     = session.Meta
)

// Options and results of the three modes.
type (
	Config        = replay.Config
	RecordOptions = replay.RecordOptions
	RecordResult  = replay.RecordResult
	ReplayOptions = replay.ReplayOptions
	ReplayResult  = replay.ReplayResult
	ForkOptions   = replay.ForkOptions
	ForkResult    = replay.ForkResult
	Overrides     = replay.Overrides
	Goal          = replay.Goal
	DriftPolicy   = replay.DriftPolicy
	OnMiss        = replay.OnMiss
	// DriftError says which step of a replay left the recording, what was expected and how it differs.
	DriftError = replay.DriftError
	// AtStepError is a fork asked to go live at a step past the end of its parent session.
	AtStepError = replay.AtStepError
	// KeyProvider seals the vault of redacted secrets; FileKeyProvider keeps its key in a local file.
	KeyProvider     = redact.KeyProvider
	FileKeyProvider = redact.FileKeyProvider
)

// Drift policies and tool-miss policies.
const (
	Strict      = replay.Strict
	Warn        = replay.Warn
	Passthrough = replay.Passthrough
	OnMissError = replay.OnMissError
	OnMissStub  = replay.OnMissStub
)

// Record runs the harness against the live model and tools and commits every boundary crossing,
// redacted, to a new session directory.
func Record(ctx context.Context, opts RecordOptions, harness Harness) (*RecordResult, error) {
	return replay.Record(ctx, opts, harness)
}

// Replay runs the harness with every call served from the recording; under Strict it makes no live
// call and fails with a *DriftError where the agent leaves the recording.
func Replay(ctx context.Context, opts ReplayOptions, harness Harness) (*ReplayResult, error) {
	return replay.Replay(ctx, opts, harness)
}

// Fork replays the recording up to opts.AtStep and then goes live with the overrides. A step the
// parent does not have (past its end) is refused with an *AtStepError, before anything is written.
func Fork(ctx context.Context, opts ForkOptions, harness Harness) (*ForkResult, error) {
	return replay.Fork(ctx, opts, harness)
}

// Open reads and verifies a recorded session directory.
func Open(dir string) (*Session, error) { return session.Open(dir) }

// Site names the call site of a call, so a replay matches it even after the code around it moved.
func Site(name string) CallOption { return replay.Site(name) }
