package replay

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Tool implements AgentContext.
func (r *runner) Tool(ctx context.Context, name string, args any, opts ...CallOption) (json.RawMessage, error) {
	if r.fork != nil && r.fork.isHalted() {
		return nil, r.fork.haltErr()
	}
	c := r.begin(ctx, session.KindToolCall, opts, "")
	argsJSON, err := jsonscan.Marshal(args) // never repaired: "x\xfe" must not replay "x\xff"
	if err != nil {
		r.skip(c.step)
		return nil, &SerializationError{Step: c.step, Tool: name, What: "args", Err: err}
	}
	stored, err := r.redactJSON(argsJSON)
	if err != nil {
		r.skip(c.step)
		return nil, err
	}
	argsHash, err := fingerprint.OfJSON(stored, fingerprint.Options{})
	if err != nil {
		r.skip(c.step)
		return nil, err
	}
	ev := r.event(c, session.KindToolCall)
	ev.Name, ev.Args, ev.ArgsHash = name, stored, argsHash

	if r.phaseOf(c.step) == phaseLive && r.fork == nil {
		return r.liveTool(ctx, ev, argsJSON)
	}
	if r.phaseOf(c.step) == phaseLive && r.tools[name] != nil {
		// A fork's tail, with the tool declared safe to run again (ForkOptions.LiveTools).
		ev.Provenance = session.ProvenanceLive
		r.fork.count(session.ProvenanceLive)
		return r.liveTool(ctx, ev, argsJSON)
	}
	// Tool calls are always answered from the recording when it has them — in a fork's tail too:
	// running tools for real needs a sandbox.
	if rec, ok := r.resolve(c, session.KindToolCall, toolKey(name, argsHash)); ok {
		return r.serveTool(ev, rec)
	}
	if r.phaseOf(c.step) == phaseLive {
		return r.forkToolMiss(ev)
	}
	d := r.drift(c, session.KindToolCall, argsHash, []byte(fmt.Sprintf(`{"name":%q,"args":%s}`, name, stored)),
		func(rec *session.Event) []byte {
			return []byte(fmt.Sprintf(`{"name":%q,"args":%s}`, rec.Name, rec.Args))
		})
	if r.policy == Passthrough && r.tools[name] != nil {
		r.tolerate(d)
		return r.liveTool(ctx, ev, argsJSON)
	}
	r.failed(c, session.KindToolCall, d)
	return nil, d
}

// serveTool answers with the recorded result (secrets restored) without running the tool.
func (r *runner) serveTool(ev session.Event, rec *session.Event) (json.RawMessage, error) {
	ev.Result, ev.Error = rec.Result, rec.Error
	if r.fork != nil {
		ev.Provenance = session.ProvenanceRecorded
	}
	r.countServed()
	r.finish(&ev)
	if rec.Error != nil {
		return nil, rec.Error
	}
	return r.restore(rec.Result)
}

// stubResult is what a fork answers for a tool call the recording does not hold, under onMiss: Stub.
var stubResult = json.RawMessage(`{"__agentrewind_unavailable":true}`)

// forkToolMiss applies the fork's onMiss policy to a tool call the recording does not hold.
func (r *runner) forkToolMiss(ev session.Event) (json.RawMessage, error) {
	if r.fork.onMiss == OnMissStub {
		ev.Result, ev.Provenance = stubResult, session.ProvenanceStub
		r.fork.count(session.ProvenanceStub)
		r.finish(&ev)
		return stubResult, nil
	}
	d := &DriftError{Step: ev.Step, Kind: session.KindToolCall, Lane: ev.Lane, CallSite: ev.CallSite, Fingerprint: ev.ArgsHash, Code: DriftToolNotRecorded,
		Reason: fmt.Sprintf("tool %q was called with arguments the recording does not hold (tools.onMiss: Error stops the fork here)", ev.Name)}
	ev.Error = &session.SerializedError{Name: "ForkHalted", Message: d.Error()}
	r.fork.diverged(ev.Step, d)
	r.finish(&ev)
	return nil, ErrForkHalted
}

// liveTool runs the tool and records its result; a result that is not JSON, or not valid Unicode
// text, is recorded as an error.
func (r *runner) liveTool(ctx context.Context, ev session.Event, args json.RawMessage) (json.RawMessage, error) {
	handler := r.tools[ev.Name]
	if handler == nil {
		err := fmt.Errorf("no handler for tool %q", ev.Name)
		ev.Error = &session.SerializedError{Name: "UnknownTool", Message: err.Error()}
		r.finish(&ev)
		return nil, err
	}
	start := r.cfg.Now()
	result, callErr := r.callTool(ctx, handler, ev, args)
	r.countLive()
	ev.LatencyMs = r.cfg.Now().Sub(start).Milliseconds()
	if callErr != nil {
		ev.Error = r.serializeError(callErr)
		r.finish(&ev)
		return nil, callErr
	}
	resultJSON, err := jsonscan.Marshal(result)
	if err != nil {
		serr := &SerializationError{Step: ev.Step, Tool: ev.Name, What: "result", Err: err}
		ev.Error = &session.SerializedError{Name: "SerializationError", Message: r.cfg.Redactor.String(serr.Error())}
		r.finish(&ev)
		return nil, serr
	}
	if ev.Result, err = r.redactJSON(resultJSON); err != nil {
		// The tool ran, so its step must not vanish from the recording: it is recorded as the error
		// it is (text that is not valid Unicode, say), and a replay returns that error again.
		ev.Result = nil
		ev.Error = &session.SerializedError{Name: "UnrecordableAnswer",
			Message: r.cfg.Redactor.String(fmt.Sprintf("the result of tool %q cannot be recorded: %v", ev.Name, err))}
		r.finish(&ev)
		return nil, ev.Error
	}
	r.finish(&ev)
	return resultJSON, nil
}

// callTool runs a live tool; if it panics, its event is recorded before the panic goes on.
func (r *runner) callTool(ctx context.Context, handler Tool, ev session.Event, args json.RawMessage) (any, error) {
	defer r.recordPanic(ev)
	return handler(ctx, args)
}
