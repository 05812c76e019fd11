package replay

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// DriftError says a replayed call matched nothing in the recording: the agent asked for something it
// did not ask for when it was recorded. It carries what was expected at that point and how the request
// differs from the nearest recorded one.
type DriftError struct {
	// Step is the global step the drifted call was given.
	Step int64
	Kind session.Kind
	Lane string
	// CallSite and Fingerprint describe the call the agent actually made.
	CallSite    string
	Fingerprint string
	// Expected is the lane's next unserved recorded event, if any.
	Expected *session.Event
	// Nearest is the recorded call the request most likely meant, and Diff how the two differ.
	Nearest *session.Event
	Diff    []string
	// Reason says what happened in words, for the cases without a request to compare.
	Reason string
	// Code is the machine-readable cause, a CamelCase code a controller copies into status.
	Code DriftCode
}

// DriftCode is the machine-readable cause of a drift.
type DriftCode string

const (
	// DriftNoRecordedCall: the request matches no recorded call; Nearest, when set, is the closest one.
	DriftNoRecordedCall DriftCode = "NoRecordedCall"
	// DriftOtherCallSite: the request was recorded, but from another call site (tolerated under Warn).
	DriftOtherCallSite DriftCode = "RecordedFromOtherCallSite"
	// DriftNoRecordedEntropy: a clock, random or UUID draw has no recorded value left in its lane.
	DriftNoRecordedEntropy DriftCode = "NoRecordedEntropy"
	// DriftRunEndedEarly: the agent finished before making every recorded call.
	DriftRunEndedEarly DriftCode = "RunEndedEarly"
	// DriftExtraCall: the candidate made more calls than the golden run.
	DriftExtraCall DriftCode = "ExtraCall"
	// DriftToolNotRecorded: a fork's tool call the recording does not hold, under tools.onMiss Error.
	DriftToolNotRecorded DriftCode = "ToolNotRecorded"
)

func (e *DriftError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "drift at step %d: ", e.Step)
	switch {
	case e.Reason != "":
		b.WriteString(e.Reason)
	default:
		fmt.Fprintf(&b, "%s from %s (lane %s, fingerprint %s) matches no recorded call", e.Kind, e.CallSite, e.Lane, short(e.Fingerprint))
	}
	if e.Expected != nil {
		fmt.Fprintf(&b, "; the recording expected %s at step %d from %s", e.Expected.Kind, e.Expected.Step, e.Expected.CallSite)
	}
	if e.Nearest != nil && len(e.Diff) > 0 {
		fmt.Fprintf(&b, "; differences from the nearest recorded call (step %d):\n  %s", e.Nearest.Step, strings.Join(e.Diff, "\n  "))
	}
	return b.String()
}

// ExpectedFingerprint is the fingerprint of the call the recording expected, for status reports.
func (e *DriftError) ExpectedFingerprint() string {
	switch {
	case e.Nearest != nil:
		return eventFingerprint(e.Nearest)
	case e.Expected != nil:
		return eventFingerprint(e.Expected)
	}
	return ""
}

func eventFingerprint(ev *session.Event) string {
	if ev.Kind == session.KindToolCall {
		return ev.ArgsHash
	}
	return ev.RequestHash
}

func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

// SerializationError says a tool's arguments or result cannot be recorded as JSON. It is raised at
// record time so a broken value never lands in a recording.
type SerializationError struct {
	Step int64
	Tool string
	What string // "args" or "result"
	Err  error
}

func (e *SerializationError) Error() string {
	return fmt.Sprintf("step %d: tool %q %s cannot be recorded as JSON: %v (return JSON-serialisable values)", e.Step, e.Tool, e.What, e.Err)
}

func (e *SerializationError) Unwrap() error { return e.Err }

// ErrForkHalted is returned to a forked harness once the fork has stopped at a divergence, so the
// harness unwinds without making further calls.
var ErrForkHalted = errors.New("fork halted: a tool call the recording does not hold stopped the run (tools.onMiss: Error)")

// OverridesError stops a fork whose overrides do not apply to a live request of its tail (a request
// patch whose path the request does not have): sending the request unchanged would run another fork
// than the one asked for, so the fork halts there. Its text is redacted: a failed test quotes the
// request.
type OverridesError struct {
	// Step, Lane and CallSite place the live request the overrides did not apply to.
	Step     int64
	Lane     string
	CallSite string
	// Model is the request's model as the agent sent it.
	Model string
	// Err is why, a *PatchError for a request patch.
	Err error
	// detail is Err's text, redacted.
	detail string
}

func (e *OverridesError) Error() string {
	return fmt.Sprintf("the fork's overrides do not apply to the live request at step %d (lane %s, call site %s, model %s): %s",
		e.Step, e.Lane, e.CallSite, e.Model, e.detail)
}

// Unwrap gives ErrForkHalted, so a harness unwinds as from any halt, and the cause.
func (e *OverridesError) Unwrap() []error { return []error{ErrForkHalted, e.Err} }

// AtStepError is a fork asked to go live at a step the session does not have: every step before it
// would be served, and nothing would be left to fork.
type AtStepError struct {
	AtStep int64
	// Session and Steps are the session's id and its number of steps (0 to Steps-1).
	Session string
	Steps   int64
}

func (e *AtStepError) Error() string {
	if e.Steps == 0 {
		return fmt.Sprintf("step %d is past the end of session %s, which has no steps", e.AtStep, e.Session)
	}
	return fmt.Sprintf("step %d is past the end of session %s, which has %d steps (0 to %d)", e.AtStep, e.Session, e.Steps, e.Steps-1)
}

// CheckAtStep refuses a fork's first live step unless the session has it: 0 to steps-1, steps being
// one more than the session's last step.
func CheckAtStep(atStep int64, sessionID string, steps int64) error {
	if atStep >= 0 && atStep < steps {
		return nil
	}
	if atStep < 0 {
		return fmt.Errorf("step %d is negative", atStep)
	}
	return &AtStepError{AtStep: atStep, Session: sessionID, Steps: steps}
}

// ErrHarnessPanicked wraps a panic in the harness. The run's events up to the panic are still recorded
// and committed, with session_end marking the run as failed.
var ErrHarnessPanicked = errors.New("the agent panicked")

// ErrVaultNotSealed says a recording was committed without its vault: the key provider failed.
var ErrVaultNotSealed = errors.New("the vault of redacted secrets could not be sealed")

// ErrLiveModelRequired is returned when a call must go live and no live model was given.
var ErrLiveModelRequired = errors.New("this call must go live but no live model was configured")
