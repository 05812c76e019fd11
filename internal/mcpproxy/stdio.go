package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
)

// StdioOptions describe a stand-in for a stdio MCP server.
type StdioOptions struct {
	RunOptions
	// Command is the real server (record mode): argv, and its environment (nil: the proxy's own).
	Command []string
	Env     []string
	// ServerStderr receives the server's stderr, line by line with every secret the session knows
	// redacted (default: discarded).
	ServerStderr io.Writer
	// ShutdownTimeout bounds, once the client has gone, the wait for calls in flight and then for the
	// server to exit after its stdin closed (half each). Default 10s.
	ShutdownTimeout time.Duration
}

// ServeStdio stands in for an MCP server on in and out (the client's side of the pipes) until the
// client closes in or ctx is done, then commits the session and returns the outcome. In record mode
// it starts opts.Command and relays to it; in replay and fork it starts nothing.
func ServeStdio(ctx context.Context, opts StdioOptions, in io.Reader, out io.Writer) *Outcome {
	if err := opts.validate(); err != nil {
		return &Outcome{Mode: opts.Mode, Err: err}
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	if opts.ServerStderr == nil {
		opts.ServerStderr = io.Discard
	}
	logf := opts.Config.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if opts.Config.Redactor == nil {
		opts.Config.Redactor = redact.New(redact.BuiltinPatterns()) // the engine's, shared with stderr
	}
	stderr := newRedactedStderr(opts.Config.Redactor, opts.ServerStderr)
	defer stderr.flush()
	r := &stdioRun{opts: opts, out: out, logf: logf, stderr: stderr, cancels: map[string]context.CancelFunc{}}
	var tools map[string]replay.Tool
	switch {
	case opts.Mode == Record:
		srv, err := r.startServer()
		if err != nil {
			return &Outcome{Mode: opts.Mode, Err: err}
		}
		r.server = srv
		tools = Tools(opts.Server, func() Upstream { return srv })
	case opts.Mode == Fork && len(opts.Command) > 0:
		tools = Tools(opts.Server, func() Upstream { return forkTail{r} })
	}
	eng := startEngine(ctx, opts.RunOptions, tools)
	if out := eng.wait(); out != nil {
		r.closeServer()
		return out
	}
	stderr.release() // the recorder has learned the declared secrets
	r.mu.Lock()
	r.eng = eng // the server may already be talking: serverRequest reads it under mu
	r.mu.Unlock()
	r.calls, r.cutCalls = context.WithCancel(context.WithoutCancel(eng.ctx))
	r.serve(ctx, in)
	return r.shutdown()
}

// stdioRun is one ServeStdio run.
type stdioRun struct {
	opts   StdioOptions
	out    io.Writer
	logf   func(string, ...any)
	stderr *redactedStderr
	eng    *engine
	tailMu sync.Mutex // one start of a fork's tail server

	calls    context.Context // parent of every call; cut at shutdown
	cutCalls context.CancelFunc
	inflight sync.WaitGroup

	wmu sync.Mutex // one frame at a time to the client

	mu         sync.Mutex
	cancels    map[string]context.CancelFunc // calls in flight by client id
	server     *stdioServer                  // the real server: from the start when recording, from a fork's tail on
	initParams json.RawMessage               // what the client initialized with, to initialize a fork's tail server
}

func (r *stdioRun) startServer() (*stdioServer, error) {
	return startStdioServer(r.opts.Command, r.opts.Env, r.stderr, r.write, r.serverRequest, r.logf)
}

// live is the real server, or nil before there is one.
func (r *stdioRun) live() *stdioServer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.server
}

// forkTail is the server a fork's tail relays to, started at the tail's first call.
type forkTail struct{ r *stdioRun }

func (f forkTail) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	srv, err := f.r.startTail(ctx, method)
	if err != nil {
		return nil, err
	}
	return srv.Call(ctx, method, params)
}

// startTail starts the real server for a fork's tail and initializes it (initializeTail).
func (r *stdioRun) startTail(ctx context.Context, method string) (*stdioServer, error) {
	r.tailMu.Lock()
	defer r.tailMu.Unlock()
	if srv := r.live(); srv != nil {
		return srv, nil
	}
	srv, err := r.startServer()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", mcp.ErrServerUnavailable, err)
	}
	r.mu.Lock()
	init := r.initParams
	r.mu.Unlock()
	if err := initializeTail(ctx, srv, method, init); err != nil {
		srv.Close(r.opts.ShutdownTimeout / 2)
		return nil, err
	}
	r.mu.Lock()
	r.server = srv
	r.mu.Unlock()
	return srv, nil
}

// write sends a frame to the client.
func (r *stdioRun) write(frame []byte) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if _, err := r.out.Write(append(frame[:len(frame):len(frame)], '\n')); err != nil {
		r.logf("Could not write to the MCP client: %v", err)
	}
}

// serve reads the client's frames until it closes its side or ctx is done.
func (r *stdioRun) serve(ctx context.Context, in io.Reader) {
	frames := make(chan struct{})
	go func() {
		defer close(frames)
		fr := newFrameReader(in)
		for {
			frame, off, err := fr.next()
			if errors.Is(err, errFrameTooLong) {
				r.refuse(&mcp.FrameError{Reason: err.Error()}, off)
				continue
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					r.logf("Stopped reading the MCP client: %v", err)
				}
				return
			}
			r.handle(frame, off)
		}
	}()
	select {
	case <-frames:
	case <-ctx.Done():
	}
}

// refuse answers a frame that is not a JSON-RPC message; the client and the run carry on.
func (r *stdioRun) refuse(err error, streamOffset int64) {
	r.logf("Refused a frame of the MCP client at stream byte %d: %v", streamOffset, err)
	code := mcp.CodeInvalidRequest
	var fe *mcp.FrameError
	if errors.As(err, &fe) && fe.NotJSON {
		code = mcp.CodeParseError
	}
	data, _ := json.Marshal(map[string]int64{"streamOffset": streamOffset})
	r.write(mcp.Encode(mcp.ErrorResponse(nil, &mcp.RPCError{Code: code, Message: err.Error(), Data: data})))
}

func (r *stdioRun) handle(frame []byte, off int64) {
	msg, err := mcp.Parse(frame)
	if err != nil {
		r.refuse(err, off)
		return
	}
	switch {
	case msg.IsRequest():
		ctx, cancel := context.WithCancel(r.calls)
		r.mu.Lock()
		if msg.Method == "initialize" {
			r.initParams = msg.Params
		}
		r.cancels[string(msg.ID)] = cancel
		r.mu.Unlock()
		r.inflight.Add(1)
		go func() {
			defer r.inflight.Done()
			resp := Answer(ctx, r.eng.ac, r.opts.Server, msg, r.opts.Session)
			r.mu.Lock()
			_, live := r.cancels[string(msg.ID)]
			delete(r.cancels, string(msg.ID))
			r.mu.Unlock()
			cancel()
			if live { // a request the client canceled gets no answer (MCP: the receiver does not respond)
				r.write(mcp.Encode(resp))
			}
		}()
	case msg.Method == "notifications/cancelled":
		r.cancel(msg)
	default:
		// Other notifications (initialized, progress, roots changed) and the client's answers to the
		// server's requests go to the server when there is one; a replay has nobody to tell.
		srv := r.live()
		if msg.IsResponse() && srv != nil {
			r.eng.ac.Note(r.eng.ctx, fmt.Sprintf("mcp %s: the client answered the server's request %s: %s", r.opts.Server, msg.ID, frame))
		}
		if srv != nil {
			if err := srv.Forward(msg); err != nil {
				r.logf("Could not pass %s to the MCP server: %v", describe(msg), err)
			}
		}
	}
}

// cancel cancels the call the client gave up on; the live call tells the server itself.
func (r *stdioRun) cancel(msg mcp.Message) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil || p.RequestID == nil {
		r.logf("Ignored a notifications/cancelled without a requestId")
		return
	}
	r.mu.Lock()
	cancel, ok := r.cancels[string(p.RequestID)]
	delete(r.cancels, string(p.RequestID))
	r.mu.Unlock()
	if ok {
		cancel()
	}
}

// serverRequest records a request the server sent the client (sampling, elicitation, roots) as a
// note: it is the server's, so a replay, which has no server, never sees it again.
func (r *stdioRun) serverRequest(msg mcp.Message) {
	r.mu.Lock()
	eng := r.eng
	r.mu.Unlock()
	if eng == nil {
		return // before the run started: there is nothing to record it in
	}
	eng.ac.Note(eng.ctx, fmt.Sprintf("mcp %s: the server sent the client a request: %s", r.opts.Server, mcp.Encode(msg)))
}

func describe(m mcp.Message) string {
	if m.Method != "" {
		return m.Method
	}
	return "the answer to " + string(m.ID)
}

// shutdown waits for the calls in flight (half the timeout, then cuts them: each is recorded as an
// error), stops the server and commits the session.
func (r *stdioRun) shutdown() *Outcome {
	grace := r.opts.ShutdownTimeout / 2
	idle := make(chan struct{})
	go func() {
		r.inflight.Wait()
		close(idle)
	}()
	select {
	case <-idle:
	case <-time.After(grace):
		r.logf("Cut the MCP calls still in flight %s after the client went away", grace)
		r.cutCalls()
		<-idle
	}
	r.cutCalls()
	r.closeServer()
	return r.eng.finish()
}

func (r *stdioRun) closeServer() {
	if srv := r.live(); srv != nil {
		srv.Close(r.opts.ShutdownTimeout / 2)
	}
}
