package bundle

import (
	"context"
	"fmt"
	"io"
	"regexp"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
)

var tokenRegexp = regexp.MustCompile(regexp.QuoteMeta(redact.TokenPrefix) + fmt.Sprintf("[0-9a-f]{%d}", redact.TokenHexLen))

// tokenTail is how many trailing bytes of the stream are kept to find a token split across writes: one
// less than a token, so a token already counted can never be seen whole again.
const tokenTail = len(redact.TokenPrefix) + redact.TokenHexLen - 1

// tokenCounter is an io.Writer that counts redaction tokens in a stream without holding the stream.
type tokenCounter struct {
	counts map[string]int
	tail   []byte
}

func newTokenCounter(counts map[string]int) *tokenCounter {
	return &tokenCounter{counts: counts, tail: make([]byte, 0, tokenTail)}
}

func (c *tokenCounter) Write(p []byte) (int, error) {
	// A token split by this write starts in the tail and ends within tokenTail bytes of p. The seam
	// holds only such tokens: a whole token is longer than the tail and than the slice of p.
	seam := append(c.tail, p[:min(len(p), tokenTail)]...)
	c.count(seam)
	c.count(p)
	c.tail = append(c.tail[:0], seam[max(0, len(seam)-tokenTail):]...)
	if len(p) >= tokenTail {
		c.tail = append(c.tail[:0], p[len(p)-tokenTail:]...)
	}
	return len(p), nil
}

func (c *tokenCounter) count(b []byte) {
	for _, m := range tokenRegexp.FindAll(b, -1) {
		c.counts[string(m)]++
	}
}

// ctxReader stops a long copy when the context is cancelled, not only between entries.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
