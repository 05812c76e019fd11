package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Version is the only JSON-RPC version MCP speaks.
const Version = "2.0"

// JSON-RPC error codes the proxy answers with.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInternalError  = -32603
	// CodeDrift is a request the recording does not hold: the replay's answer to a call it cannot serve.
	CodeDrift = -32050
	// CodeUnavailable is a server that is not there: exited, or never started in replay.
	CodeUnavailable = -32051
)

// Message is one JSON-RPC 2.0 message: a request (ID and Method), a notification (Method, no ID) or a
// response (ID and one of Result or Error).
type Message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RPCError       `json:"error,omitempty"`
}

// IsRequest says the message expects a response.
func (m Message) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification says the message expects none.
func (m Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// IsResponse says the message answers a request.
func (m Message) IsResponse() bool { return m.Method == "" }

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// FrameError says why a frame is not a JSON-RPC message, and where: Offset is the byte of the frame at
// which it stops being one (0 when the frame as a whole is wrong).
type FrameError struct {
	Offset int64
	Reason string
	// NotJSON says the frame is not JSON at all (a JSON-RPC parse error), rather than JSON that is not
	// a valid message (an invalid request).
	NotJSON bool
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("malformed JSON-RPC frame at byte %d: %s", e.Offset, e.Reason)
}

// wire is a message as it arrives, with the members Parse checks.
type wire struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// Parse reads one frame: a single JSON-RPC 2.0 object (MCP has no batches since 2025-06-18). An
// explicit "id": null is kept as a response's id (an error about an unparseable request has it).
func Parse(frame []byte) (Message, error) {
	trimmed := bytes.TrimSpace(frame)
	lead := int64(len(frame) - len(bytes.TrimLeft(frame, " \t\r\n")))
	if len(trimmed) == 0 {
		return Message{}, &FrameError{Reason: "the frame is empty"}
	}
	if trimmed[0] != '{' {
		return Message{}, &FrameError{Offset: lead, Reason: "a message is a JSON object (batches are not part of MCP)"}
	}
	dec := json.NewDecoder(bytes.NewReader(frame))
	var w wire
	if err := dec.Decode(&w); err != nil {
		return Message{}, &FrameError{Offset: syntaxOffset(err, dec, int64(len(frame))), Reason: err.Error(), NotJSON: true}
	}
	end := dec.InputOffset()
	if rest := frame[end:]; len(bytes.TrimSpace(rest)) > 0 {
		next := end + int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n")))
		return Message{}, &FrameError{Offset: next, Reason: "more than one JSON value in the frame"}
	}
	if w.JSONRPC == nil || *w.JSONRPC != Version {
		return Message{}, &FrameError{Reason: `"jsonrpc" must be "2.0"`}
	}
	m := Message{Params: w.Params, Result: w.Result}
	if w.ID != nil {
		if !validID(w.ID) {
			return Message{}, &FrameError{Reason: fmt.Sprintf(`"id" must be a string or a number, not %s`, w.ID)}
		}
		m.ID = w.ID
	}
	if w.Method != nil {
		if *w.Method == "" {
			return Message{}, &FrameError{Reason: `"method" is empty`}
		}
		if w.Result != nil || w.Error != nil {
			return Message{}, &FrameError{Reason: `a request has no "result" or "error"`}
		}
		if bytes.Equal(m.ID, []byte("null")) {
			return Message{}, &FrameError{Reason: `a request's "id" must not be null`}
		}
		if w.Params != nil && !bytes.HasPrefix(bytes.TrimSpace(w.Params), []byte("{")) {
			return Message{}, &FrameError{Reason: `"params" must be an object`}
		}
		m.Method = *w.Method
		return m, nil
	}
	if m.ID == nil {
		return Message{}, &FrameError{Reason: `a message without "method" is a response and needs an "id"`}
	}
	if (w.Result != nil) == (w.Error != nil) {
		return Message{}, &FrameError{Reason: `a response has exactly one of "result" and "error"`}
	}
	if w.Error != nil {
		m.Error = &RPCError{}
		if err := json.Unmarshal(w.Error, m.Error); err != nil {
			return Message{}, &FrameError{Reason: `"error" must be {"code": int, "message": string}: ` + err.Error()}
		}
	}
	return m, nil
}

func validID(id json.RawMessage) bool {
	var v any
	if err := json.Unmarshal(id, &v); err != nil {
		return false
	}
	switch v.(type) {
	case string, float64, nil:
		return true
	}
	return false
}

// syntaxOffset is the offset of the byte a decode error is about (encoding/json counts the bytes read
// up to and including it).
func syntaxOffset(err error, dec *json.Decoder, frameLen int64) int64 {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return max(syn.Offset-1, 0)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return typ.Offset
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return frameLen // the frame ends inside a value
	}
	return dec.InputOffset()
}

// Encode writes a message as one line-free JSON frame.
func Encode(m Message) []byte {
	out := struct {
		JSONRPC string `json:"jsonrpc"`
		Message
	}{Version, m}
	data, err := json.Marshal(out)
	if err != nil {
		// Every member is raw JSON that was parsed or produced by json.Marshal: this cannot fail
		// unless a caller put invalid bytes in a RawMessage, which is a programming error.
		panic(fmt.Sprintf("mcp: encoding a message: %v", err))
	}
	return data
}

// Response answers the request id with a result.
func Response(id, result json.RawMessage) Message {
	if result == nil {
		result = json.RawMessage(`{}`)
	}
	return Message{ID: id, Result: result}
}

// ErrorResponse answers the request id with an error; a nil id is the JSON-RPC null id, for a frame
// whose id could not be read.
func ErrorResponse(id json.RawMessage, e *RPCError) Message {
	if id == nil {
		id = json.RawMessage("null")
	}
	return Message{ID: id, Error: e}
}
