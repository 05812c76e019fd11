package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// OnMiss says how a fork answers a tool call the recording does not hold.
type OnMiss string

const (
	// OnMissError stops the fork at that step and reports it as the divergence.
	OnMissError OnMiss = "Error"
	// OnMissStub answers {"__agentrewind_unavailable": true} and tags the event as a stub.
	OnMissStub OnMiss = "Stub"
)

// ForkOptions describe a fork of a recorded session.
type ForkOptions struct {
	Config
	// Parent is the recording to fork.
	Parent *session.Session
	// Dir is where the child session is recorded; ID names it (default: parent ID + "-fork-" + AtStep).
	Dir string
	ID  string
	// AtStep is the first step that goes live; every step before it is served from Parent.
	AtStep int64
	// Model is the live model for the tail. Required once a model call reaches AtStep.
	Model Model
	// Overrides change every live request of the tail.
	Overrides Overrides
	// OnMiss is the policy for tool calls the recording does not hold (default Error). Matched tool
	// calls are always served from the recording: running tools for real needs a sandbox.
	OnMiss OnMiss
	// LiveTools, when set, run every tool call of the tail live (ForkRun tools.onMatch: Live), tagged
	// live, instead of serving the recording: for tools that are safe to run again, such as an MCP
	// server the fork relays to. A tool it does not name still follows the recording and OnMiss.
	LiveTools map[string]Tool
	// DriftPolicy applies to the served prefix (default Strict).
	DriftPolicy DriftPolicy
	// Goal, when set, is evaluated on the child's trace.
	Goal *Goal
}

// ForkResult is the outcome of a fork.
type ForkResult struct {
	Meta session.Meta
	// ReachedGoal is nil when no goal was given.
	ReachedGoal *bool
	// TokensSpent counts the live tail only; the served prefix costs nothing.
	TokensSpent session.Usage
	// Replayed is what the served model calls cost when they were recorded.
	Replayed session.Usage
	// DivergedAtStep is the step where the fork left the recording and stopped, if it did.
	DivergedAtStep *int64
	Divergence     *DriftError
	Provenance     ProvenanceCounts
	Trace          Trace
	// HarnessErr is what the harness returned, unless it was the fork's own halt.
	HarnessErr error
	// Overrides is set when the fork halted because its overrides did not apply to a live request:
	// the fork did not run as asked, whatever else the result says.
	Overrides *OverridesError
}

// ProvenanceCounts count where a fork's answers came from.
type ProvenanceCounts struct {
	Recorded, Live, Stub int
}

// forkState is the part of a runner only forks have.
type forkState struct {
	overrides Overrides
	onMiss    OnMiss

	mu         sync.Mutex
	halted     bool
	divergedAt *int64
	divergence *DriftError
	notApplied *OverridesError
	tokens     session.Usage
	prov       ProvenanceCounts
}

func (f *forkState) isHalted() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.halted
}

// diverged stops the fork at its first divergence.
func (f *forkState) diverged(step int64, d *DriftError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.halted {
		return
	}
	f.halted = true
	f.divergedAt = &step
	f.divergence = d
}

// overridesFailed stops the fork at a live request its overrides did not apply to.
func (f *forkState) overridesFailed(e *OverridesError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.halted {
		return
	}
	f.halted = true
	f.notApplied = e
}

// haltErr is what a call of a halted fork returns: why it halted.
func (f *forkState) haltErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.notApplied != nil {
		return f.notApplied
	}
	return ErrForkHalted
}

func (f *forkState) count(p session.Provenance) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch p {
	case session.ProvenanceRecorded:
		f.prov.Recorded++
	case session.ProvenanceLive:
		f.prov.Live++
	case session.ProvenanceStub:
		f.prov.Stub++
	}
}

func (f *forkState) spend(resp *session.Response) {
	if resp == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens.Add(resp.Usage)
}

// ServedUsage is what the model calls of a run that were served from a recording cost when they were
// recorded: every model call but the ones that went live.
func ServedUsage(events []session.Event) session.Usage {
	var u session.Usage
	for i := range events {
		if ev := &events[i]; ev.Kind == session.KindModelCall && ev.Provenance != session.ProvenanceLive {
			u.Add(ev.Usage)
		}
	}
	return u
}

// Fork serves the parent's steps before AtStep from the recording, runs the rest live with the
// overrides, records the whole run as a child session, and evaluates the goal on it.
func Fork(ctx context.Context, opts ForkOptions, harness Harness) (*ForkResult, error) {
	if opts.Parent == nil {
		return nil, errors.New("fork: a parent session is required")
	}
	var steps int64
	for i := range opts.Parent.Events {
		steps = max(steps, opts.Parent.Events[i].Step+1)
	}
	if err := CheckAtStep(opts.AtStep, opts.Parent.Meta.ID, steps); err != nil {
		return nil, fmt.Errorf("fork: atStep: %w", err)
	}
	if opts.OnMiss == "" {
		opts.OnMiss = OnMissError
	}
	if opts.OnMiss != OnMissError && opts.OnMiss != OnMissStub {
		return nil, fmt.Errorf("fork: onMiss %q is not supported (use Error or Stub)", opts.OnMiss)
	}
	cfg, err := matchRecording(opts.Config, opts.Parent)
	if err != nil {
		return nil, err
	}
	r := newRunner(cfg)
	if err := r.prepare(opts.Parent); err != nil {
		return nil, err
	}
	if err := r.openVault(ctx, opts.Parent); err != nil {
		return nil, err
	}
	r.model, r.tools, r.matcher, r.atStep = opts.Model, opts.LiveTools, NewMatcher(opts.Parent.Events), opts.AtStep
	r.policy = orStrict(opts.DriftPolicy)
	r.fork = &forkState{overrides: opts.Overrides, onMiss: opts.OnMiss}
	id := opts.ID
	if id == "" {
		id = fmt.Sprintf("%s-fork-%d", opts.Parent.Meta.ID, opts.AtStep)
	}
	at := opts.AtStep
	meta := r.newMeta(id)
	meta.Parent, meta.ForkedAtStep = opts.Parent.Meta.ID, &at
	// The steps served from the parent are stored as its lines, so the two logs share them (and, in
	// the object store, the segments they are cut into).
	rec, harnessErr, err := r.recordInto(ctx, opts.Dir, meta, session.WriterOptions{Parent: opts.Parent.Events}, harness)
	if rec == nil {
		return nil, err
	}
	f := r.fork
	res := &ForkResult{Meta: rec.Meta, TokensSpent: f.tokens, Replayed: ServedUsage(rec.Events), DivergedAtStep: f.divergedAt, Divergence: f.divergence,
		Provenance: f.prov, Trace: Trace(rec.Events), Overrides: f.notApplied}
	var drift *DriftError
	if harnessErr != nil && !errors.Is(harnessErr, ErrForkHalted) && !errors.As(harnessErr, &drift) {
		res.HarnessErr = harnessErr
	}
	if opts.Goal != nil {
		reached := res.Trace.Reached(*opts.Goal)
		res.ReachedGoal = &reached
	}
	return res, err // err is only ever ErrVaultNotSealed here: the child is committed
}

func orStrict(p DriftPolicy) DriftPolicy {
	if p == "" {
		return Strict
	}
	return p
}
