package replay

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// AgentContext is the harness's only sanctioned way across the boundary. Every method is recorded in
// Record mode and served from the recording in Replay mode; anything the harness does around it (files,
// network, global time or randomness) is neither recorded nor replayed.
type AgentContext interface {
	// Model sends a request to the model.
	Model(ctx context.Context, req session.Request, opts ...CallOption) (*session.Response, error)
	// ModelStream sends a request and hands each streamed chunk to emit as it arrives; it returns the
	// assembled response.
	ModelStream(ctx context.Context, req session.Request, emit func(chunk json.RawMessage) error, opts ...CallOption) (*session.Response, error)
	// Tool calls a tool with JSON-serialisable arguments and returns its JSON result.
	Tool(ctx context.Context, name string, args any, opts ...CallOption) (json.RawMessage, error)
	// Clock, Random and UUID are the virtualised sources of entropy.
	Clock(ctx context.Context) (time.Time, error)
	Random(ctx context.Context) (float64, error)
	UUID(ctx context.Context) (string, error)
	// Env reads an environment variable; the read (never the value) is noted in the recording.
	Env(ctx context.Context, key string) string
	// Note adds a free-form, agent-authored note to the recording.
	Note(ctx context.Context, text string)
	// Ledger appends an intent-ledger record (INTENT, STEP_CLAIMED, ...), agent-authored.
	Ledger(ctx context.Context, record any) error
	// Suspend parks the run. The agent only asks: the recorder mints the SUSPEND stamp itself (the
	// latest turn, the digest of the transcript it saw, the workspace HEAD), so the rewind anchor is
	// never the agent's word.
	Suspend(ctx context.Context) error
	// Anchor asks the recorder to mint a conversation anchor (the latest turn and the digest of the
	// transcript it saw) that a rewind may return to. It does not park the run.
	Anchor(ctx context.Context) error
	// Go returns a context for a new concurrent branch: calls made with it get their own lane.
	Go(ctx context.Context) context.Context
}

// Harness is an agent run.
type Harness func(ctx context.Context, ac AgentContext) error

// Model is a live model provider.
type Model interface {
	Create(ctx context.Context, req session.Request) (*session.Response, error)
}

// StreamingModel is a live model provider that can stream.
type StreamingModel interface {
	Model
	Stream(ctx context.Context, req session.Request, emit func(chunk json.RawMessage) error) (*session.Response, error)
}

// Tool is a live tool. Its result must be JSON-serialisable.
type Tool func(ctx context.Context, args json.RawMessage) (any, error)

// DriftPolicy says what a replay does with a call the recording does not hold.
type DriftPolicy string

const (
	// Strict fails the call with a *DriftError.
	Strict DriftPolicy = "Strict"
	// Warn is Strict that reports more: a call matched only by fingerprint from another call site is
	// served (it is the recorded request) and counted as a tolerated drift; a call the recording does
	// not hold fails with a *DriftError, and an entropy draw with no recorded value left fails too. It
	// never answers a request with the recording of a different request.
	Warn DriftPolicy = "Warn"
	// Passthrough sends the call live (a live model or tool is required), draws entropy live when no
	// recorded value is left, and reports each as a tolerated drift.
	Passthrough DriftPolicy = "Passthrough"
)
