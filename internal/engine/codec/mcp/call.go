package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// ServerName is what a server's name may look like: it becomes part of tool names and call sites.
var ServerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// MethodPing is answered by whoever receives it, never recorded: it says the peer is alive.
const MethodPing = "ping"

// Methods are the client-to-server requests of MCP (2025-11-25) that are recorded. A request for
// another method is refused with CodeMethodNotFound in every mode: a replay could not answer it.
var Methods = []string{
	"initialize",
	"tools/list", "tools/call",
	"resources/list", "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe",
	"prompts/list", "prompts/get",
	"completion/complete", "logging/setLevel",
	"tasks/get", "tasks/list", "tasks/result", "tasks/cancel",
}

// Recorded says whether requests for method are recorded.
func Recorded(method string) bool {
	for _, m := range Methods {
		if m == method {
			return true
		}
	}
	return false
}

// ToolName is the name a server's method is recorded under, e.g. "weather/tools/call".
func ToolName(server, method string) string { return server + "/" + method }

// Site is the call site of every call to a server.
func Site(server string) string { return "mcp." + server }

// Args is what a request is recorded and matched under: its params without "_meta" (a progress token
// the client mints anew each run), and for initialize without "clientInfo" (a client's version string
// is not part of what the server answers). Absent params are {}.
func Args(method string, params json.RawMessage) (json.RawMessage, error) {
	if len(params) == 0 || string(params) == "null" {
		return json.RawMessage(`{}`), nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(params, &members); err != nil {
		return nil, fmt.Errorf("params of %s: %w", method, err)
	}
	delete(members, "_meta")
	if method == "initialize" {
		delete(members, "clientInfo")
	}
	return json.Marshal(members)
}

// ErrorName names a recorded JSON-RPC error answer.
const ErrorName = "JSONRPCError"

// errorMessage is how a JSON-RPC error is kept in an event's error message: "[code] text".
var errorMessage = regexp.MustCompile(`^\[(-?[0-9]{1,9})\] (?s:(.*))$`)

// RecordedError is the error a live call returns for a JSON-RPC error answer, so that the engine
// records it as the event's error (Data is not kept: events keep an error's name and message).
func RecordedError(e *RPCError) error {
	return &session.SerializedError{Name: ErrorName, Message: fmt.Sprintf("[%d] %s", e.Code, e.Message)}
}

// AnswerOf turns what a recorded or live call returned into the JSON-RPC answer for the client: the
// result, or an error object. A recorded JSON-RPC error comes back with its code; a drift says which
// step drifted and which recorded call was nearest; any other failure (a server that died mid-call,
// a halted fork) is CodeInternalError or CodeUnavailable with its message.
func AnswerOf(result json.RawMessage, err error) (json.RawMessage, *RPCError) {
	if err == nil {
		return result, nil
	}
	var drift *replay.DriftError
	if errors.As(err, &drift) {
		return nil, DriftAnswer(drift)
	}
	var rpc *RPCError
	if errors.As(err, &rpc) {
		return nil, rpc
	}
	var se *session.SerializedError
	if errors.As(err, &se) {
		if se.Name == ErrorName {
			if m := errorMessage.FindStringSubmatch(se.Message); m != nil {
				code, _ := strconv.Atoi(m[1])
				return nil, &RPCError{Code: code, Message: m[2]}
			}
		}
		code := CodeInternalError
		if strings.HasPrefix(se.Message, ErrServerUnavailable.Error()) {
			code = CodeUnavailable // a server that was gone when the call was recorded
		}
		return nil, &RPCError{Code: code, Message: se.Name + ": " + se.Message}
	}
	if errors.Is(err, ErrServerUnavailable) {
		return nil, &RPCError{Code: CodeUnavailable, Message: err.Error()}
	}
	return nil, &RPCError{Code: CodeInternalError, Message: err.Error()}
}

// ErrServerUnavailable says the server cannot take a call: it exited, or was never started.
var ErrServerUnavailable = errors.New("the MCP server is not available")

// DriftData is the data of a drift's JSON-RPC error: enough for a client or a person to find the
// recorded call the request should have been.
type DriftData struct {
	Step int64  `json:"step"`
	Code string `json:"code"`
	// Nearest is the recorded call the request most likely meant, when there is one.
	Nearest *NearestCall `json:"nearest,omitempty"`
	// Differences list how the request differs from Nearest, path by path.
	Differences []string `json:"differences,omitempty"`
}

// NearestCall is a recorded call, as a drift names it.
type NearestCall struct {
	Step int64           `json:"step"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
	// Served says the replay already answered it: the request is one call too many.
	Served bool `json:"served,omitempty"`
}

// NearestRecorded is the recorded call a drifted request is closest to when the matcher has no
// unserved one left: the last call of the same name to the same tool (the "name" member of the
// arguments, for tools/call and prompts/get), else the last call of the same name; nil when the
// recording has no call of that name.
func NearestRecorded(events []session.Event, name string, args json.RawMessage) *session.Event {
	member := func(doc json.RawMessage) string {
		var m struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(doc, &m)
		return m.Name
	}
	want := member(args)
	var sameName *session.Event
	for i := len(events) - 1; i >= 0; i-- {
		ev := &events[i]
		if ev.Kind != session.KindToolCall || ev.Name != name {
			continue
		}
		if member(ev.Args) == want {
			return ev
		}
		if sameName == nil {
			sameName = ev
		}
	}
	return sameName
}

// DriftAnswer is the JSON-RPC error of a request the recording does not hold. Its message names the
// drifted step and the nearest recorded call (its step and tool name); data has the same, structured.
func DriftAnswer(d *replay.DriftError) *RPCError { return DriftAnswerWith(d, nil) }

// DriftAnswerWith is DriftAnswer with served, a recorded call the replay already answered, named as
// the nearest when the drift itself has none (every recorded call was served).
func DriftAnswerWith(d *replay.DriftError, served *session.Event) *RPCError {
	data := DriftData{Step: d.Step, Code: string(d.Code), Differences: d.Diff}
	nearest := d.Nearest
	if nearest == nil {
		nearest = d.Expected
	}
	already := false
	if nearest == nil && served != nil {
		nearest, already = served, true
	}
	msg := fmt.Sprintf("agentrewind: drift at step %d: the recording holds no such call", d.Step)
	if d.Reason != "" {
		msg = fmt.Sprintf("agentrewind: drift at step %d: %s", d.Step, d.Reason)
	}
	if nearest != nil {
		data.Nearest = &NearestCall{Step: nearest.Step, Name: nearest.Name, Args: nearest.Args, Served: already}
		msg += fmt.Sprintf("; the nearest recorded call is %s at step %d", nearest.Name, nearest.Step)
		if already {
			msg += " (already served)"
		}
		if len(d.Diff) > 0 {
			msg += fmt.Sprintf(" (differences: %s)", joinLimited(d.Diff, 3))
		}
	} else {
		msg += "; the recording has no unserved call of this kind left"
	}
	raw, _ := json.Marshal(data) // plain values: cannot fail
	return &RPCError{Code: CodeDrift, Message: msg, Data: raw}
}

func joinLimited(lines []string, n int) string {
	out := ""
	for i, l := range lines {
		if i == n {
			return out + fmt.Sprintf("; and %d more", len(lines)-n)
		}
		if i > 0 {
			out += "; "
		}
		out += l
	}
	return out
}
