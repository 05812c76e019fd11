package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/mcpproxy"
	"github.com/agentrewind/agentrewind/internal/proxyargs"
)

// mountMCP serves every configured MCP server (Options.MCPServers) at /mcp/{server} over the
// streamable HTTP transport, recording its calls in the run's session beside the model calls, and
// adds the live tools that relay them: to the server from the start when recording, from a fork's
// tail on (mcpproxy.HTTPForkTail), and none in replay, where nothing goes upstream. A server mounted
// without a URL (a fork's or a replay's, by name only) is answered from the recording alone.
func (s *Server) mountMCP(mux *http.ServeMux) {
	relays := map[string]mcpRelay{}
	if s.opts.Mode != Replay {
		for name, url := range s.opts.MCPServers {
			if url == "" {
				continue
			}
			up := &mcpproxy.HTTPServer{URL: url, Client: s.opts.Client, Counter: func(status string) { s.metrics.upstream("mcp."+name, status) }}
			var relay mcpRelay = up
			if s.opts.Mode == Fork {
				relay = &mcpproxy.HTTPForkTail{Server: up}
			}
			relays[name] = relay
			maps.Copy(s.tools, mcpproxy.Tools(name, func() mcpproxy.Upstream { return relay }))
		}
	}
	mux.HandleFunc("/mcp/{server}", s.count("mcp", func(w http.ResponseWriter, r *http.Request) string {
		return s.handleMCP(w, r, relays[r.PathValue("server")])
	}))
}

// mcpRelay is where a mounted server's messages go: the server, or the server of a fork's tail.
type mcpRelay interface {
	mcpproxy.Upstream
	Forward(ctx context.Context, m mcp.Message) error
}

// mcpLiveTools are the mounted MCP servers' tools, which a fork's tail runs live
// (replay.ForkOptions.LiveTools): calling an MCP server again is what a fork of its calls is for,
// while the proxy's other tools are not known to be safe to run twice.
func (s *Server) mcpLiveTools() map[string]replay.Tool {
	live := map[string]replay.Tool{}
	for name := range s.opts.MCPServers {
		for _, method := range mcp.Methods {
			if tool := s.tools[mcp.ToolName(name, method)]; tool != nil {
				live[mcp.ToolName(name, method)] = tool
			}
		}
	}
	return live
}

// CheckMCPServers checks the MCP servers a proxy running in mode is to mount: names as tool names
// take them, and URLs as the tool backends' are checked; no URL mounts a server answered from the
// recording only, which a recording has not got: its agent's every call would fail, and be recorded
// failing, for want of a server to call.
func CheckMCPServers(servers map[string]string, mode Mode) error {
	for name, url := range servers {
		if !mcp.ServerName.MatchString(name) {
			return fmt.Errorf("MCP server name %q: use 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit", name)
		}
		if url == "" {
			if mode == Record {
				return fmt.Errorf("MCP server %s has no URL: a recording calls the server", name)
			}
			continue
		}
		if err := proxyargs.CheckToolURL(url); err != nil {
			return fmt.Errorf("MCP server %s: %w", name, err)
		}
	}
	return nil
}

// handleMCP answers one POSTed JSON-RPC message. A request is answered through the run (recorded,
// or served from the recording); its answer is JSON, or an event stream when the server sent the
// client notifications or requests first. Notifications and the client's answers to the server's
// requests get 202 and go to the server when there is one. GET has no stream to offer (405: the
// server's messages arrive on the stream of the call they belong to) and DELETE is accepted: the
// session ends with the run.
func (s *Server) handleMCP(w http.ResponseWriter, r *http.Request, up mcpRelay) string {
	name := r.PathValue("server")
	if _, ok := s.opts.MCPServers[name]; !ok {
		return writeRPC(w, http.StatusNotFound, mcp.ErrorResponse(nil, &mcp.RPCError{Code: mcp.CodeUnavailable,
			Message: fmt.Sprintf("no MCP server %q is mounted on this proxy", name)}), outcomeClientErr)
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
		return outcomeOK
	default:
		w.Header().Set("Allow", "POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return outcomeClientErr
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return writeRPC(w, http.StatusRequestEntityTooLarge, mcp.ErrorResponse(nil, &mcp.RPCError{Code: mcp.CodeInvalidRequest,
			Message: fmt.Sprintf("reading the message (at most %d bytes): %v", MaxBodyBytes, err)}), outcomeClientErr)
	}
	msg, err := mcp.Parse(body)
	if err != nil {
		code := mcp.CodeInvalidRequest
		var fe *mcp.FrameError
		if errors.As(err, &fe) && fe.NotJSON {
			code = mcp.CodeParseError
		}
		return writeRPC(w, http.StatusBadRequest, mcp.ErrorResponse(nil, &mcp.RPCError{Code: code, Message: err.Error()}), outcomeClientErr)
	}
	ac, err := s.acquire()
	if err != nil {
		w.Header().Set("Retry-After", "1")
		return writeRPC(w, http.StatusServiceUnavailable, mcp.ErrorResponse(msg.ID, &mcp.RPCError{Code: mcp.CodeUnavailable, Message: err.Error()}), outcomeError)
	}
	defer s.release()
	ctx, err := s.lane(s.callContext(r), r.Header.Get(HeaderLane))
	if err != nil {
		return writeRPC(w, http.StatusBadRequest, mcp.ErrorResponse(msg.ID, &mcp.RPCError{Code: mcp.CodeInvalidRequest, Message: HeaderLane + ": " + err.Error()}), outcomeClientErr)
	}
	if !msg.IsRequest() {
		if up == nil || msg.Method == "notifications/cancelled" {
			// A replay has no server to tell; a cancellation names the client's id, which the server
			// never saw, and the canceled POST already aborted the call it forwarded.
			w.WriteHeader(http.StatusAccepted)
			return outcomeOK
		}
		if msg.IsResponse() {
			ac.Note(ctx, fmt.Sprintf("mcp %s: the client answered the server's request %s: %s", name, msg.ID, body))
		}
		if err := up.Forward(ctx, msg); err != nil {
			return writeRPC(w, http.StatusBadGateway, mcp.ErrorResponse(nil, &mcp.RPCError{Code: mcp.CodeUnavailable,
				Message: fmt.Sprintf("passing %s on to MCP server %s: %v", describeMessage(msg), name, err)}), outcomeUpstreamErr)
		}
		w.WriteHeader(http.StatusAccepted)
		return outcomeOK
	}
	if tail, ok := up.(*mcpproxy.HTTPForkTail); ok && msg.Method == "initialize" {
		tail.ClientInitialized(msg.Params)
	}
	stream := &mcpStream{w: w, withhold: s.withhold.Document}
	ctx = mcpproxy.WithObserver(ctx, mcpproxy.Observer{ToClient: stream.event, OnRequest: func(m mcp.Message) {
		ac.Note(ctx, fmt.Sprintf("mcp %s: the server sent the client a request: %s", name, mcp.Encode(m)))
	}})
	resp := mcpproxy.Answer(ctx, ac, name, msg, s.opts.Session)
	stream.finish(resp)
	switch {
	case resp.Error == nil:
		return outcomeOK
	case resp.Error.Code == mcp.CodeDrift:
		s.metrics.drifts.WithLabelValues(string(s.opts.Mode), "tool_call").Inc()
		return outcomeDrift
	case resp.Error.Code == mcp.CodeUnavailable:
		return outcomeUpstreamErr
	}
	return outcomeOK // the server's own error answer, relayed or replayed
}

func describeMessage(m mcp.Message) string {
	if m.Method != "" {
		return m.Method
	}
	return "the answer to " + string(m.ID)
}

// writeRPC answers with a JSON-RPC message and an HTTP status.
func writeRPC(w http.ResponseWriter, status int, m mcp.Message, outcome string) string {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(mcp.Encode(m))
	return outcome
}

// mcpStream is the answer to one POSTed request: plain JSON, unless the server sent the client
// something first, which turns it into an event stream.
type mcpStream struct {
	w http.ResponseWriter
	// withhold takes the proxy's own credentials out of a message.
	withhold func([]byte) []byte
	started  bool
}

func (st *mcpStream) event(frame []byte) {
	if !st.started {
		st.w.Header().Set("Content-Type", "text/event-stream")
		st.w.Header().Set("Cache-Control", "no-cache")
		st.w.WriteHeader(http.StatusOK)
		st.started = true
	}
	_, _ = fmt.Fprintf(st.w, "event: message\ndata: %s\n\n", st.withhold(frame))
	_ = http.NewResponseController(st.w).Flush()
}

func (st *mcpStream) finish(resp mcp.Message) {
	if st.started {
		st.event(mcp.Encode(resp))
		return
	}
	st.w.Header().Set("Content-Type", "application/json")
	st.w.WriteHeader(http.StatusOK)
	_, _ = st.w.Write(st.withhold(mcp.Encode(resp)))
}
