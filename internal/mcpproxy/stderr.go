package mcpproxy

import (
	"bytes"
	"io"
	"sync"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
)

// maxStderrLine bounds what an unterminated line of the server's stderr may hold before it is
// written without its end, so a server that never writes a newline still gets its output through
// in bounded memory. Only a secret that straddles that forced end can escape redaction: lines are
// otherwise redacted whole, and a cut anywhere inside a line (at a space, say) can separate a key
// from the name that marks it ("Bearer <token>", "aws_secret_access_key": "<key>").
const maxStderrLine = 1 << 20

// redactedStderr passes the MCP server's stderr on line by line with every secret the session knows
// redacted: the proxy's stderr is the pod's log, and a server that prints its key there must not
// leak it. A secret split across two writes of the server is redacted, since a line is redacted
// whole. Lines wait until release, by which time the recorder has learned the declared secrets.
//
// The lines are redacted by a snapshot of the session's redactor, never by the redactor itself: a
// secret found only in the log must not change how the session stores its later requests, or a
// replay, which starts no server and sees no log, would drift there. Each line is redacted on its
// own, so a string replaced whole (a secret its escapes hide) takes only its own line.
type redactedStderr struct {
	mu       sync.Mutex
	out      io.Writer
	redactor *redact.Redactor // the session's; only read, through Snapshot
	buf      []byte
	released bool
}

func newRedactedStderr(r *redact.Redactor, out io.Writer) *redactedStderr {
	return &redactedStderr{out: out, redactor: r}
}

// Write holds p until its lines are complete and, once released, writes them redacted. It never
// fails, so the server is never killed by a broken log.
func (s *redactedStderr) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	// Only a newline in p, or the unterminated line growing past the limit, can make a line ready:
	// a long line arriving in small writes is not searched again at each.
	if s.released && (bytes.IndexByte(p, '\n') >= 0 || len(s.buf) > maxStderrLine) {
		s.drainLocked(false)
	}
	return len(p), nil
}

// release writes what waited and passes later lines straight on.
func (s *redactedStderr) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = true
	s.drainLocked(false)
}

// flush writes the last, unterminated line (the server has exited).
func (s *redactedStderr) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = true
	s.drainLocked(true)
}

// drainLocked writes the complete lines, and the unterminated rest when all is set or it has grown
// past maxStderrLine.
func (s *redactedStderr) drainLocked(all bool) {
	end := bytes.LastIndexByte(s.buf, '\n') + 1
	if all || len(s.buf)-end > maxStderrLine {
		end = len(s.buf)
	}
	if end == 0 {
		return
	}
	snap := s.redactor.Snapshot()
	var out []byte
	for rest := s.buf[:end]; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		rest = rest[len(line):]
		out = append(out, snap.String(string(line))...)
	}
	_, _ = s.out.Write(out)
	s.buf = append(s.buf[:0], s.buf[end:]...)
}
