package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
)

// Headers of the streamable HTTP transport.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "MCP-Protocol-Version"
)

// maxAnswerBytes bounds one message read from an HTTP server.
const maxAnswerBytes = MaxFrameBytes

// observerKey carries, to a live call over HTTP, where the messages the server sends before its
// answer go: the client's response stream, and the recording for the server's own requests.
type observerKey struct{}

// Observer receives what a server sends while a call is in flight that is not the call's answer.
type Observer struct {
	// ToClient passes a notification or a server request on to the client.
	ToClient func(frame []byte)
	// OnRequest sees each request the server sends the client (sampling, elicitation, roots).
	OnRequest func(mcp.Message)
}

// WithObserver returns ctx carrying o.
func WithObserver(ctx context.Context, o Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, o)
}

// HTTPServer is a real MCP server behind the streamable HTTP transport (MCP 2025-03-26 and later):
// each message is POSTed; the answer comes back as JSON or as a server-sent event stream that may
// carry the server's notifications and requests first.
type HTTPServer struct {
	URL    string
	Client *http.Client
	// Counter, when set, counts every request sent to the server by outcome (the status, or "error").
	Counter func(outcome string)

	mu        sync.Mutex
	next      int64
	sessionID string
	version   string
}

// Call implements Upstream.
func (h *HTTPServer) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	h.mu.Lock()
	h.next++
	id := json.RawMessage(strconv.FormatInt(h.next, 10))
	h.mu.Unlock()
	resp, err := h.post(ctx, mcp.Message{ID: id, Method: method, Params: params})
	if err != nil {
		return nil, fmt.Errorf("%w: sending %s: %v", mcp.ErrServerUnavailable, method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("%w: %s answered %s: %s", mcp.ErrServerUnavailable, method, resp.Status, bytes.TrimSpace(body))
	}
	answer, err := h.answer(ctx, resp, id)
	if err != nil {
		return nil, fmt.Errorf("%w: the answer to %s broke off: %v", mcp.ErrServerUnavailable, method, err)
	}
	if method == "initialize" && answer.Error == nil {
		h.learnSession(resp.Header.Get(HeaderSessionID), answer.Result)
	}
	if answer.Error != nil {
		return nil, answer.Error
	}
	return answer.Result, nil
}

// learnSession keeps the session id and protocol version initialize settled, sent on every request.
func (h *HTTPServer) learnSession(id string, result json.RawMessage) {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(result, &r)
	h.mu.Lock()
	h.sessionID, h.version = id, r.ProtocolVersion
	h.mu.Unlock()
}

// Forward passes a client's notification, or its answer to a server's request, to the server.
func (h *HTTPServer) Forward(ctx context.Context, m mcp.Message) error {
	resp, err := h.post(ctx, m)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the server answered %s", resp.Status)
	}
	return nil
}

func (h *HTTPServer) post(ctx context.Context, m mcp.Message) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(mcp.Encode(m)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	h.mu.Lock()
	if h.sessionID != "" {
		req.Header.Set(HeaderSessionID, h.sessionID)
	}
	if h.version != "" {
		req.Header.Set(HeaderProtocolVersion, h.version)
	}
	h.mu.Unlock()
	client := h.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if h.Counter != nil {
		if err != nil {
			h.Counter("error")
		} else {
			h.Counter(strconv.Itoa(resp.StatusCode))
		}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// Not the URL: its query may hold the server's key, and this error is recorded in the
		// session and answered to the agent.
		err = fmt.Errorf("%s to the server: %w", ue.Op, ue.Err)
	}
	return resp, err
}

// answer reads the response to request id: a JSON body, or the events of a stream up to the one that
// answers it, passing the others to the call's Observer.
func (h *HTTPServer) answer(ctx context.Context, resp *http.Response, id json.RawMessage) (mcp.Message, error) {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct != "text/event-stream" {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
		if err != nil {
			return mcp.Message{}, err
		}
		if len(body) > maxAnswerBytes {
			return mcp.Message{}, fmt.Errorf("the answer is over %d bytes", maxAnswerBytes)
		}
		msg, err := mcp.Parse(body)
		if err != nil {
			return mcp.Message{}, err
		}
		// A JSON body holds one message, which must be this call's answer: a lying or confused
		// server's other message would otherwise be recorded, and replayed, as the call's result.
		if !answers(msg, id) {
			return mcp.Message{}, fmt.Errorf("the server answered with %s, not the answer to request %s", describeFrame(msg), id)
		}
		return msg, nil
	}
	obs, _ := ctx.Value(observerKey{}).(Observer)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxAnswerBytes)
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			continue
		case line != "":
			continue // event:, id:, retry: and comments say nothing the answer needs
		}
		if data.Len() == 0 {
			continue
		}
		frame := bytes.Clone(data.Bytes())
		data.Reset()
		msg, err := mcp.Parse(frame)
		if err != nil {
			return mcp.Message{}, err
		}
		if answers(msg, id) {
			return msg, nil
		}
		if msg.IsResponse() {
			// Not the client's to see: its ids are not the ones this call sent, and one that matched
			// a request of its own would answer that request with this server's stray message.
			return mcp.Message{}, fmt.Errorf("the server sent %s on the stream of request %s", describeFrame(msg), id)
		}
		if msg.IsRequest() && obs.OnRequest != nil {
			obs.OnRequest(msg)
		}
		if obs.ToClient != nil {
			obs.ToClient(frame)
		}
	}
	if err := sc.Err(); err != nil {
		return mcp.Message{}, err
	}
	return mcp.Message{}, io.ErrUnexpectedEOF
}

// answers says m is the answer to request id: a response with its id, or an error with a null id,
// which JSON-RPC gives when the server could not read the request's.
func answers(m mcp.Message, id json.RawMessage) bool {
	return m.IsResponse() && (bytes.Equal(m.ID, id) || m.Error != nil && (m.ID == nil || bytes.Equal(m.ID, []byte("null"))))
}

// describeFrame names a message for an error: its method, or the id it answers.
func describeFrame(m mcp.Message) string {
	switch {
	case m.IsRequest():
		return "a request (" + m.Method + ")"
	case m.Method != "":
		return "a notification (" + m.Method + ")"
	}
	return "the answer to request " + string(m.ID)
}

func (h *HTTPServer) notify(ctx context.Context, m mcp.Message) error { return h.Forward(ctx, m) }

// HTTPForkTail is the HTTP server a fork's tail relays to. The prefix is served from the recording,
// so nothing reaches the server until the tail's first call, which opens its session
// (Mcp-Session-Id) by initializing it the way the client initialized this run (initializeTail).
type HTTPForkTail struct {
	Server *HTTPServer

	startMu sync.Mutex // one initialize of the server's session
	mu      sync.Mutex
	init    json.RawMessage // the params of the client's initialize
	started bool            // the server's session is open: the tail has begun
}

// ClientInitialized keeps the params the client initialized this run with, for the tail's server.
func (f *HTTPForkTail) ClientInitialized(params json.RawMessage) {
	f.mu.Lock()
	f.init = params
	f.mu.Unlock()
}

// Call implements Upstream: the server's session is opened first if the tail has not yet begun.
func (f *HTTPForkTail) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if err := f.start(ctx, method); err != nil {
		return nil, err
	}
	return f.Server.Call(ctx, method, params)
}

func (f *HTTPForkTail) start(ctx context.Context, method string) error {
	f.startMu.Lock()
	defer f.startMu.Unlock()
	f.mu.Lock()
	started, init := f.started, f.init
	f.mu.Unlock()
	if started {
		return nil
	}
	if err := initializeTail(ctx, f.Server, method, init); err != nil {
		return err
	}
	f.mu.Lock()
	f.started = true
	f.mu.Unlock()
	return nil
}

// Forward passes a client's notification, or its answer to a server's request, to the server once
// the tail has begun; before, the server has no session it could belong to, so it is dropped, as a
// replay drops it.
func (f *HTTPForkTail) Forward(ctx context.Context, m mcp.Message) error {
	f.mu.Lock()
	started := f.started
	f.mu.Unlock()
	if !started {
		return nil
	}
	return f.Server.Forward(ctx, m)
}
