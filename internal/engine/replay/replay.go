package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// ReplayOptions describe a replay.
type ReplayOptions struct {
	Config
	Session *session.Session
	// DriftPolicy is Strict unless set.
	DriftPolicy DriftPolicy
	// Model and Tools are needed only by the Passthrough policy.
	Model Model
	Tools map[string]Tool
	// PreserveTiming re-emits streamed chunks with their recorded timing; Sleep waits (default: a
	// context-aware timer).
	PreserveTiming bool
	Sleep          func(context.Context, time.Duration) error
}

// ReplayResult is the trajectory of a replay.
type ReplayResult struct {
	Events []session.Event
	// Drifts were tolerated by the Warn or Passthrough policy.
	Drifts   []*DriftError
	Reorders []Reorder
	// LiveCalls is how many calls went live (Passthrough only).
	LiveCalls int
	// Served is how many model and tool calls were answered from the recording.
	Served int
}

// Replay runs the harness with every boundary call served from the recording. Under Strict it makes
// no live call; a call the recording does not hold, or a run that ends before the recording does,
// fails with a *DriftError.
func Replay(ctx context.Context, opts ReplayOptions, harness Harness) (*ReplayResult, error) {
	if opts.Session == nil {
		return nil, errors.New("replay: a session is required")
	}
	cfg, err := matchRecording(opts.Config, opts.Session)
	if err != nil {
		return nil, err
	}
	r := newRunner(cfg)
	if err := r.prepare(opts.Session); err != nil {
		return nil, err
	}
	r.policy = orStrict(opts.DriftPolicy)
	r.noEnd = !mintsEnd(opts.Session.Events)
	if r.policy == Passthrough && opts.Model == nil {
		return nil, fmt.Errorf("replay: the Passthrough drift policy needs a live model: %w", ErrLiveModelRequired)
	}
	if err := r.openVault(ctx, opts.Session); err != nil {
		return nil, err
	}
	r.model, r.tools, r.matcher, r.atStep = opts.Model, opts.Tools, NewMatcher(opts.Session.Events), -1
	r.timing = opts.PreserveTiming
	if opts.Sleep != nil {
		r.sleep = opts.Sleep
	}
	err = r.run(ctx, opts.Session.Meta, harness)
	r.mu.Lock()
	res := &ReplayResult{Events: r.events, Drifts: r.drifts, Reorders: r.reorders, LiveCalls: r.live, Served: r.served}
	unresolved := r.unresolved
	r.mu.Unlock()
	// A drift fails the replay even when the agent swallowed the error its call returned.
	if len(unresolved) > 0 {
		return res, unresolved[0]
	}
	if err != nil {
		return res, err
	}
	if r.policy == Strict {
		if unserved := r.matcher.Unserved(); len(unserved) > 0 {
			first := unserved[0]
			return res, &DriftError{Step: first.Step, Kind: first.Kind, Lane: first.Lane, CallSite: first.CallSite, Expected: first, Code: DriftRunEndedEarly,
				Reason: fmt.Sprintf("the agent finished, but the recording has %d more call(s)", len(unserved))}
		}
	}
	return res, nil
}
