package mcpproxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// Mode is what a run does with the server's calls.
type Mode string

const (
	// Record starts the real server, relays every message and records every call.
	Record Mode = "record"
	// Replay starts nothing and answers every call from the recording.
	Replay Mode = "replay"
	// Fork serves the recording's steps before AtStep and records a child session; the tail is relayed
	// to a real server, started at the tail's first call (replay.ForkOptions.LiveTools). Without a
	// server command the tail is answered from the recording, and by OnMiss where it holds nothing.
	Fork Mode = "fork"
)

// RunOptions describe the recording a run writes or serves.
type RunOptions struct {
	Mode Mode
	// Server names the server: tool names are "<server>/<method>", the call site "mcp.<server>".
	Server string
	// Dir and ID are where a recording or a fork's child goes, and its id.
	Dir, ID string
	// Session is the recording a replay serves or a fork forks.
	Session *session.Session
	// DriftPolicy is Strict or Warn; AtStep, OnMiss and Goal describe a fork.
	DriftPolicy replay.DriftPolicy
	AtStep      int64
	OnMiss      replay.OnMiss
	Goal        *replay.Goal
	// Config is the engine configuration: secrets to redact, the vault's keys, clock, Logf.
	Config replay.Config
}

// Outcome is how a run ended: the engine's result for its mode, and its error.
type Outcome struct {
	Mode   Mode
	Record *replay.RecordResult
	Replay *replay.ReplayResult
	Fork   *replay.ForkResult
	Err    error
}

func (o RunOptions) validate() error {
	if !mcp.ServerName.MatchString(o.Server) {
		return fmt.Errorf("server name %q: use 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit", o.Server)
	}
	switch o.Mode {
	case Record:
		if o.Dir == "" {
			return errors.New("record mode needs a session directory to write")
		}
	case Replay, Fork:
		if o.Session == nil {
			return fmt.Errorf("%s mode needs a recorded session", o.Mode)
		}
		if o.Mode == Fork && o.Dir == "" {
			return errors.New("fork mode needs a directory for the child session")
		}
	default:
		return fmt.Errorf("mode %q: use record, replay or fork", o.Mode)
	}
	switch o.DriftPolicy {
	case "", replay.Strict, replay.Warn:
	default:
		return fmt.Errorf("drift policy %q: use Strict or Warn (a replayed call never goes to a server)", o.DriftPolicy)
	}
	return nil
}

// engine is the recording engine run around a harness that parks until told to stop, so that calls
// arriving from outside (a client's frames) are made through its AgentContext.
type engine struct {
	ready chan struct{}
	stop  chan struct{}
	done  chan *Outcome
	ac    replay.AgentContext
	ctx   context.Context
}

// startEngine starts the engine for opts; tools are the live tools (record, and a fork's tail).
func startEngine(ctx context.Context, opts RunOptions, tools map[string]replay.Tool) *engine {
	e := &engine{ready: make(chan struct{}), stop: make(chan struct{}), done: make(chan *Outcome, 1)}
	harness := func(hctx context.Context, ac replay.AgentContext) error {
		e.ac, e.ctx = ac, hctx
		close(e.ready)
		<-e.stop
		return nil
	}
	ctx = context.WithoutCancel(ctx) // the session is committed whatever happens to the caller's context
	// The harness parks until the run is told to stop; the client's end is not something it sees.
	opts.Config.RunEnd = func(error) ledger.RunEnd { return ledger.RunEnd{How: ledger.EndStopped} }
	go func() {
		out := &Outcome{Mode: opts.Mode}
		switch opts.Mode {
		case Record:
			out.Record, out.Err = replay.Record(ctx, replay.RecordOptions{Config: opts.Config, Dir: opts.Dir, ID: opts.ID, Tools: tools}, harness)
		case Replay:
			out.Replay, out.Err = replay.Replay(ctx, replay.ReplayOptions{Config: opts.Config, Session: opts.Session, DriftPolicy: opts.DriftPolicy}, harness)
		case Fork:
			out.Fork, out.Err = replay.Fork(ctx, replay.ForkOptions{Config: opts.Config, Parent: opts.Session, Dir: opts.Dir, ID: opts.ID,
				AtStep: opts.AtStep, OnMiss: opts.OnMiss, Goal: opts.Goal, DriftPolicy: opts.DriftPolicy, LiveTools: tools}, harness)
		}
		e.done <- out
	}()
	return e
}

// wait returns once the harness runs, or with the outcome of an engine that refused to start.
func (e *engine) wait() *Outcome {
	select {
	case <-e.ready:
		return nil
	case out := <-e.done:
		return out
	}
}

// finish lets the harness return and waits for the session to be committed.
func (e *engine) finish() *Outcome {
	close(e.stop)
	return <-e.done
}
