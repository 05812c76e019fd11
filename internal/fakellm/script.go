package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// A Script says how the server answers. It is usually written as a small YAML or JSON file:
//
//	chunkSize: 8                      # stream text and tool arguments in pieces of at most 8 bytes
//	turns:
//	  - when: {step: 1}               # the first call of a conversation (no assistant message yet)
//	    toolCalls:
//	      - name: read_file
//	        input: {path: main.go}
//	  - when: {step: 2, system: "never delete tests"}
//	    text: I will fix the bug and keep the tests.
//	  - when: {step: 2}
//	    toolCalls: [{name: delete_file, input: {path: main_test.go}}]
//	    faults: [{kind: rate_limit, times: 1}]   # the first request answered by this turn gets a 429
//	  - text: Done.                   # no when: answers any request that reaches it
//	unmatched: {text: "Nothing scripted for this."}
//
// Each request to /v1/messages, /v1/chat/completions or /v1/responses is answered by the first turn, in list order,
// whose When matches it (see Match); a request no turn matches gets Unmatched, or a 400 when the
// script has none.
type Script struct {
	// Model, when set, is the model every response names; empty echoes the request's model.
	// +optional
	Model string `json:"model,omitempty"`
	// ChunkSize is the default size in bytes of the pieces a stream splits text and tool-call
	// arguments into (never splitting a UTF-8 character); 0 sends each in one piece.
	// +optional
	ChunkSize int `json:"chunkSize,omitempty"`
	// Created is the OpenAI "created" timestamp of every completion; 0 means DefaultCreated.
	// +optional
	Created int64 `json:"created,omitempty"`
	// KeepRequests is how many of the last requests LastRequests can return; 0 means
	// DefaultKeepRequests.
	// +optional
	KeepRequests int `json:"keepRequests,omitempty"`
	// Faults apply to every model request, before a turn is selected.
	// +optional
	Faults []Fault `json:"faults,omitempty"`
	// Turns are the scripted answers, tried in order.
	// +required
	Turns []Turn `json:"turns"`
	// Unmatched answers a request that no turn matches; its When is ignored. Without it such a
	// request gets a 400 naming the request's step.
	// +optional
	Unmatched *Turn `json:"unmatched,omitempty"`
}

// DefaultCreated is the OpenAI "created" timestamp when the script does not set one: a fixed
// instant, so responses do not depend on the clock.
const DefaultCreated int64 = 1700000000

// DefaultKeepRequests is how many requests a server remembers when the script does not say.
const DefaultKeepRequests = 100

// A Turn is one scripted answer: text, tool calls, or both; or an error response.
type Turn struct {
	// Name labels the turn in request records and errors.
	// +optional
	Name string `json:"name,omitempty"`
	// When says which requests this turn answers; empty matches every request.
	// +optional
	When Match `json:"when,omitempty"`
	// Text is the assistant's text. Without tool calls an empty text is still sent as one empty
	// text block (Anthropic) or an empty content (OpenAI).
	// +optional
	Text string `json:"text,omitempty"`
	// ToolCalls are the tools the assistant calls, after the text.
	// +optional
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// StopReason overrides the stop reason, in either provider's words (end_turn, tool_use,
	// max_tokens, stop_sequence; stop, tool_calls, length); the default is tool_use/tool_calls when
	// there are tool calls and end_turn/stop otherwise.
	// +optional
	StopReason string `json:"stopReason,omitempty"`
	// Usage overrides the token counts; a zero count is estimated (about 4 bytes a token).
	// +optional
	Usage Usage `json:"usage,omitzero"`
	// ChunkSize overrides Script.ChunkSize for this turn.
	// +optional
	ChunkSize int `json:"chunkSize,omitempty"`
	// Error, when set, is the answer: an error response in the provider's shape instead of a message.
	// +optional
	Error *ErrorAnswer `json:"error,omitempty"`
	// Faults apply to the requests this turn answers, after the script's own faults.
	// +optional
	Faults []Fault `json:"faults,omitempty"`
}

// Match is the tiny rule language selecting a turn. Every condition given must hold; an empty Match
// holds for every request. Text conditions are case-sensitive substring tests.
type Match struct {
	// Step holds when the request is the Step-th call of its conversation, counted from 1: the
	// request carries Step-1 assistant messages. It depends on the request alone, so a replayed or
	// forked conversation gets the same turn from any server. On the Responses API a run of output
	// items handed back (assistant message, function calls) is one, and the response a request's
	// previous_response_id names counts with all the turns before it.
	// +optional
	Step int `json:"step,omitempty"`
	// System holds when the system prompt contains this text (Anthropic's system; OpenAI's system
	// and developer messages, joined by newlines).
	// +optional
	System string `json:"system,omitempty"`
	// Message holds when the text of the request's last message contains this text: its string
	// content, its text blocks and the text of its tool results.
	// +optional
	Message string `json:"message,omitempty"`
	// Model holds when the request's model contains this text.
	// +optional
	Model string `json:"model,omitempty"`
}

// A ToolCall is one tool the assistant calls.
type ToolCall struct {
	// Name is the tool's name.
	// +required
	Name string `json:"name"`
	// Input is the tool's arguments, a JSON object; empty means {}. Parse sorts its keys.
	// +optional
	Input json.RawMessage `json:"input,omitempty"`
}

// Usage is a turn's token counts.
type Usage struct {
	// InputTokens is the prompt's size in tokens.
	// +optional
	InputTokens int64 `json:"inputTokens,omitempty"`
	// OutputTokens is the answer's size in tokens.
	// +optional
	OutputTokens int64 `json:"outputTokens,omitempty"`
}

// ErrorAnswer is a scripted error response.
type ErrorAnswer struct {
	// Status is the HTTP status, 400 to 599.
	// +required
	Status int `json:"status"`
	// Message is the error's message; empty uses the status text.
	// +optional
	Message string `json:"message,omitempty"`
}

// FaultKind names a fault.
// +kubebuilder:validation:Enum=rate_limit;server_error;slow;cut;stream_error
type FaultKind string

const (
	// FaultRateLimit answers 429 in the provider's error shape with a retry-after header.
	FaultRateLimit FaultKind = "rate_limit"
	// FaultServerError answers 500 in the provider's error shape.
	FaultServerError FaultKind = "server_error"
	// FaultSlow waits Delay before answering, and EventDelay between stream events, then answers
	// normally; it stops waiting when the client goes away.
	FaultSlow FaultKind = "slow"
	// FaultCut starts the answer and drops the connection mid-way: a stream after CutAfter events,
	// a JSON body after half its bytes.
	FaultCut FaultKind = "cut"
	// FaultStreamError ends a stream after CutAfter events with the provider's in-stream error
	// (Anthropic's error event with overloaded_error, OpenAI's data line with an error object);
	// a request that is not streamed gets a 500 instead.
	FaultStreamError FaultKind = "stream_error"
)

// A Fault is injected into some of the requests it applies to: those numbered After+1 to
// After+Times, counting from 1 the requests it applies to (every model request for a script fault,
// the requests a turn answers for a turn fault). Times 0 means every request after the first After.
// When several faults apply to a request, the first (script faults before turn faults) wins, except
// that slow only delays and lets a later fault apply too.
type Fault struct {
	// Kind is what goes wrong.
	// +required
	Kind FaultKind `json:"kind"`
	// After is how many applicable requests pass before the fault starts.
	// +optional
	After int `json:"after,omitempty"`
	// Times is how many requests get the fault; 0 means all from After on.
	// +optional
	Times int `json:"times,omitempty"`
	// Delay is how long slow waits before answering, e.g. "1.5s".
	// +optional
	Delay Duration `json:"delay,omitzero"`
	// EventDelay is how long slow waits before each stream event after the first.
	// +optional
	EventDelay Duration `json:"eventDelay,omitzero"`
	// RetryAfter is the retry-after header of a rate_limit answer, in seconds; 0 means 1.
	// +optional
	RetryAfter int `json:"retryAfter,omitempty"`
	// CutAfter is how many stream events (pings and, for OpenAI, data: [DONE] included) a cut or
	// stream_error stream sends before it breaks off; 0 means half of them, and such a stream
	// always misses at least its last event.
	// +optional
	CutAfter int `json:"cutAfter,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("250ms").
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"250ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// Load reads a script from a YAML or JSON file.
func Load(path string) (Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Script{}, err
	}
	s, err := Parse(b)
	if err != nil {
		return Script{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse reads a script from YAML or JSON, refusing unknown fields, and validates it.
func Parse(b []byte) (Script, error) {
	var s Script
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return Script{}, fmt.Errorf("parsing the script: %w", err)
	}
	if err := s.Validate(); err != nil {
		return Script{}, err
	}
	return s, nil
}

// Validate reports the first thing wrong with the script.
func (s *Script) Validate() error {
	if s.ChunkSize < 0 {
		return fmt.Errorf("chunkSize %d is negative", s.ChunkSize)
	}
	if s.KeepRequests < 0 {
		return fmt.Errorf("keepRequests %d is negative", s.KeepRequests)
	}
	if err := validateFaults("faults", s.Faults); err != nil {
		return err
	}
	if len(s.Turns) == 0 && s.Unmatched == nil {
		return fmt.Errorf("the script has no turns and no unmatched answer")
	}
	for i := range s.Turns {
		if err := s.Turns[i].validate(fmt.Sprintf("turns[%d]", i)); err != nil {
			return err
		}
	}
	if s.Unmatched != nil {
		if err := s.Unmatched.validate("unmatched"); err != nil {
			return err
		}
	}
	return nil
}

func (t *Turn) validate(at string) error {
	if t.When.Step < 0 {
		return fmt.Errorf("%s.when.step %d is negative", at, t.When.Step)
	}
	if t.ChunkSize < 0 {
		return fmt.Errorf("%s.chunkSize %d is negative", at, t.ChunkSize)
	}
	if t.Usage.InputTokens < 0 || t.Usage.OutputTokens < 0 {
		return fmt.Errorf("%s.usage has a negative count", at)
	}
	if t.StopReason != "" {
		if _, ok := stopReasons[t.StopReason]; !ok {
			return fmt.Errorf("%s.stopReason %q is none of end_turn, tool_use, max_tokens, stop_sequence, stop, tool_calls, length", at, t.StopReason)
		}
	}
	if t.Error != nil {
		if t.Error.Status < 400 || t.Error.Status > 599 {
			return fmt.Errorf("%s.error.status %d is not an HTTP error status (400-599)", at, t.Error.Status)
		}
		if t.Text != "" || len(t.ToolCalls) > 0 {
			return fmt.Errorf("%s answers with an error and also with text or tool calls", at)
		}
	}
	for j, c := range t.ToolCalls {
		if c.Name == "" {
			return fmt.Errorf("%s.toolCalls[%d] has no name", at, j)
		}
		if len(c.Input) > 0 {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(c.Input, &obj); err != nil || obj == nil {
				return fmt.Errorf("%s.toolCalls[%d].input is not a JSON object", at, j)
			}
		}
	}
	return validateFaults(at+".faults", t.Faults)
}

func validateFaults(at string, faults []Fault) error {
	for i, f := range faults {
		switch f.Kind {
		case FaultRateLimit, FaultServerError, FaultCut, FaultStreamError:
		case FaultSlow:
			if f.Delay.Duration <= 0 && f.EventDelay.Duration <= 0 {
				return fmt.Errorf("%s[%d]: a slow fault needs a positive delay or eventDelay", at, i)
			}
		default:
			return fmt.Errorf("%s[%d].kind %q is none of rate_limit, server_error, slow, cut, stream_error", at, i, f.Kind)
		}
		if f.After < 0 || f.Times < 0 || f.RetryAfter < 0 || f.CutAfter < 0 || f.Delay.Duration < 0 || f.EventDelay.Duration < 0 {
			return fmt.Errorf("%s[%d] has a negative count or delay", at, i)
		}
	}
	return nil
}

// stop is a stop reason in provider-neutral terms.
type stop int

const (
	stopEnd stop = iota
	stopTool
	stopLength
	stopSequence
)

var stopReasons = map[string]stop{
	"end_turn": stopEnd, "stop": stopEnd,
	"tool_use": stopTool, "tool_calls": stopTool,
	"max_tokens": stopLength, "length": stopLength,
	"stop_sequence": stopSequence,
}

// stopOf is the turn's stop reason.
func (t *Turn) stopOf() stop {
	if t.StopReason != "" {
		return stopReasons[t.StopReason]
	}
	if len(t.ToolCalls) > 0 {
		return stopTool
	}
	return stopEnd
}

// arguments is a tool call's input as compact JSON, {} when empty.
func (c ToolCall) arguments() string {
	if len(bytes.TrimSpace(c.Input)) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, c.Input); err != nil {
		return "{}" // Validate refuses such input; a Go-built script that skipped it gets {}.
	}
	return b.String()
}

// chunkSize is the piece size for this turn under script s.
func (t *Turn) chunkSize(s *Script) int {
	if t.ChunkSize > 0 {
		return t.ChunkSize
	}
	return s.ChunkSize
}

// contains reports whether haystack contains needle; an empty needle always holds.
func contains(haystack, needle string) bool {
	return needle == "" || strings.Contains(haystack, needle)
}
