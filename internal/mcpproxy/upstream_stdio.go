package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
)

// stdioServer is a real MCP server run as a child process, spoken to over its stdin and stdout.
// Answers to the proxy's own requests are routed back to the call waiting for them; everything else
// the server sends (notifications, its own requests) goes to the client as it is.
type stdioServer struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	toClient func([]byte)
	// onRequest sees each request the server sends the client (sampling, elicitation, roots).
	onRequest func(mcp.Message)
	logf      func(string, ...any)

	wmu sync.Mutex // one frame at a time on stdin

	mu      sync.Mutex
	next    int64
	pending map[string]chan mcp.Message

	exited  chan struct{}
	exitErr error
}

// stderrWaitDelay bounds the wait for a finished server's stderr to close.
const stderrWaitDelay = time.Second

// startStdioServer starts argv with env (nil: the proxy's own) and relays its stdout.
func startStdioServer(argv, env []string, stderr io.Writer, toClient func([]byte), onRequest func(mcp.Message), logf func(string, ...any)) (*stdioServer, error) {
	if len(argv) == 0 {
		return nil, errors.New("no server command: give it after --")
	}
	// Not CommandContext: the server must outlive a canceled caller long enough to be shut down in
	// order (stdin closed, then a grace period), so its last answers are recorded.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Stderr = env, stderr
	// Once the server exited, its stderr is read for at most this long: a child it left behind may
	// hold the pipe open for as long as it lives, and the run must not wait for it.
	cmd.WaitDelay = stderrWaitDelay
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the MCP server %s: %w", argv[0], err)
	}
	s := &stdioServer{cmd: cmd, stdin: stdin, toClient: toClient, onRequest: onRequest, logf: logf,
		pending: map[string]chan mcp.Message{}, exited: make(chan struct{})}
	go s.read(stdout)
	return s, nil
}

// read relays the server's frames until its stdout closes, then reaps it.
func (s *stdioServer) read(stdout io.Reader) {
	fr := newFrameReader(stdout)
	for {
		frame, off, err := fr.next()
		if errors.Is(err, errFrameTooLong) {
			s.logf("Skipped a frame of the MCP server at byte %d: %v", off, err)
			continue
		}
		if err != nil {
			break
		}
		msg, err := mcp.Parse(frame)
		if err != nil {
			s.logf("Skipped a frame of the MCP server at stream byte %d: %v", off, err)
			continue
		}
		if msg.IsResponse() {
			s.deliver(msg)
			continue
		}
		if msg.IsRequest() && s.onRequest != nil {
			s.onRequest(msg)
		}
		s.toClient(frame)
	}
	err := s.cmd.Wait()
	if err == nil {
		err = errors.New("exit status 0")
	}
	s.mu.Lock()
	s.exitErr = err
	s.mu.Unlock()
	close(s.exited)
}

func (s *stdioServer) deliver(msg mcp.Message) {
	s.mu.Lock()
	ch, ok := s.pending[string(msg.ID)]
	delete(s.pending, string(msg.ID))
	s.mu.Unlock()
	if !ok {
		s.logf("Dropped an answer of the MCP server to id %s: no call of the proxy waits for it", msg.ID)
		return
	}
	ch <- msg
}

func (s *stdioServer) send(m mcp.Message) error {
	frame := append(mcp.Encode(m), '\n')
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := s.stdin.Write(frame)
	return err
}

// Call implements Upstream. The request goes out under the proxy's own id; a canceled call is
// canceled at the server too (notifications/cancelled), as the client asked.
func (s *stdioServer) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	s.mu.Lock()
	s.next++
	id := json.RawMessage(strconv.FormatInt(s.next, 10))
	ch := make(chan mcp.Message, 1)
	s.pending[string(id)] = ch
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		delete(s.pending, string(id))
		s.mu.Unlock()
	}
	if err := s.send(mcp.Message{ID: id, Method: method, Params: params}); err != nil {
		forget()
		return nil, s.unavailable(method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-s.exited:
		forget()
		return nil, s.unavailable(method, nil)
	case <-ctx.Done():
		forget()
		cancel, _ := json.Marshal(map[string]any{"requestId": id, "reason": context.Cause(ctx).Error()})
		_ = s.send(mcp.Message{Method: "notifications/cancelled", Params: cancel})
		return nil, ctx.Err()
	}
}

// unavailable is the error of a call the server can no longer answer.
func (s *stdioServer) unavailable(method string, writeErr error) error {
	select {
	case <-s.exited:
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Errorf("%w: the server exited (%v) while %s was in flight", mcp.ErrServerUnavailable, s.exitErr, method)
	default:
		return fmt.Errorf("%w: sending %s to the server: %v", mcp.ErrServerUnavailable, method, writeErr)
	}
}

// Forward passes a client's notification, or its answer to a server's request, to the server.
func (s *stdioServer) Forward(m mcp.Message) error { return s.send(m) }

func (s *stdioServer) notify(_ context.Context, m mcp.Message) error { return s.send(m) }

// Close ends the server: its stdin is closed (an MCP server exits on EOF) and, after grace, it is
// killed. It returns once the server has exited.
func (s *stdioServer) Close(grace time.Duration) {
	s.wmu.Lock()
	_ = s.stdin.Close()
	s.wmu.Unlock()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.exited:
		return
	case <-t.C:
		s.logf("Killed the MCP server: it did not exit within %s of its stdin closing", grace)
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}
