package redact

import (
	"bytes"
	"strings"
)

// Bounds of what a WithheldStream holds back at once. Past either, it releases what it holds: a
// secret's head may then reach the agent, but never its tail after it (see WithheldStream).
const (
	maxHeldChunks = 256
	maxHeldBytes  = 1 << 20
)

// A WithheldStream withholds secrets from a streamed answer that reaches the agent chunk by chunk,
// each chunk a JSON document (a codec's chunk). What an SDK assembles are the lanes under a member
// named "delta" (Anthropic's content_block_delta, OpenAI's chat completion chunks and Responses
// events all stream increments so): a lane's pieces are joined and rewritten as Redactor.Stream
// does, each secret's token written into the piece where it starts and its other bytes cut.
//
// A secret may start in one chunk and end in a later one, so a chunk whose lane ends with a proper
// prefix of a secret (any of its forms) is held back, with the chunks after it, until the lane goes
// on (and the prefix turns out to be a secret's head or not), a chunk closes the lanes, or the stream
// ends. The agent gets every chunk, in order, as soon as no secret can run through it; a stream that
// holds none is delayed only where a lane ends with the first bytes of one. Should a held prefix be
// released anyway (closed lanes that go on, or the bounds above), the text it ended with is carried:
// when the lane goes on to complete the secret, the rest is cut and the token written in its place.
//
// A secret split across two lanes (one ending with its head, another starting with its tail), or one
// that a lane of partial JSON spells with escapes, cannot be withheld by rewriting a lane: Next
// returns ErrStreamExposed, and the caller must end the stream there.
type WithheldStream struct {
	w       *Withholder
	held    [][]byte          // chunks not yet released, as they came
	carries map[string]string // by lane path: the released text a secret may still continue
}

// Stream starts the withholding of one streamed answer.
func (w *Withholder) Stream() *WithheldStream {
	return &WithheldStream{w: w, carries: map[string]string{}}
}

// Next takes the stream's next chunk and returns the chunks that may be sent now, in order: none,
// this one, or some held before and perhaps this one. closes says the chunk ends every lane open so
// far (Anthropic's content_block_stop, a Responses ".done" event), so a prefix held for a lane's
// continuation is released.
func (s *WithheldStream) Next(chunk []byte, closes bool) ([][]byte, error) {
	if s.w.Empty() || len(s.held) == 0 && len(s.carries) == 0 && !mayTouch(chunk, s.w.allForms()) {
		return [][]byte{chunk}, nil
	}
	return s.step(append(s.held[:len(s.held):len(s.held)], chunk), closes)
}

// End returns the chunks still held, rewritten: the stream is over, and no secret can run through
// them now.
func (s *WithheldStream) End() ([][]byte, error) {
	if len(s.held) == 0 {
		return nil, nil
	}
	return s.step(s.held, true)
}

// step rewrites the window of held chunks and the next and releases what it may.
func (s *WithheldStream) step(window [][]byte, closes bool) ([][]byte, error) {
	parsed, err := parseChunks(window)
	if err != nil {
		return nil, err
	}
	chunkOf := map[*jnode]int{}
	for i, n := range parsed {
		n.walk(func(leaf *jnode) { chunkOf[leaf] = i })
	}
	lanes := collectLanes(parsed)
	carried := s.attachCarries(lanes)
	found, err := s.w.r.rewriteStrings(parsed, lanes)
	if err != nil {
		return nil, err
	}
	forms := s.w.allForms()
	if straddles(lanes, forms) {
		return nil, ErrStreamExposed
	}
	for _, c := range carried {
		placeCarriedToken(c)
	}
	out, err := emitChunks(window, parsed)
	if err != nil {
		return nil, err
	}
	s.w.r.record(found)

	// Release up to the first chunk in which a held prefix starts, and never between the pieces of a
	// secret replaced: what is held is kept as it came and rewritten again with what follows, so a
	// longer form (a padded base64) still wins over the shorter one it begins with.
	release := len(out)
	pending := map[*lane]int{} // where a delta lane's pending prefix starts in its original text
	for _, ln := range lanes {
		if !strings.Contains(ln.path, deltaMember) {
			continue
		}
		text := ln.original()
		p := pendingLen(text, forms)
		if p == 0 {
			continue
		}
		pending[ln] = len(text) - p
		if at, ok := pieceAt(ln, len(text)-p, chunkOf); ok {
			release = min(release, at)
		}
	}
	for moved := true; moved; {
		moved = false
		for _, ln := range lanes {
			for _, rp := range ln.reps {
				first, ok1 := pieceAt(ln, rp.start, chunkOf)
				last, ok2 := pieceAt(ln, rp.end-1, chunkOf)
				if ok1 && ok2 && first < release && last >= release {
					release, moved = first, true
				}
			}
		}
	}
	size := 0
	for _, c := range window[release:] {
		size += len(c)
	}
	if closes || len(window)-release > maxHeldChunks || size > maxHeldBytes {
		release = len(out)
	}
	for _, ln := range lanes {
		if !strings.Contains(ln.path, deltaMember) {
			continue
		}
		carried := len(s.carries[ln.path])
		released := releasedLen(ln, release, chunkOf)
		if released == carried {
			continue // none of the lane's pieces is released: its carried text still comes before them
		}
		// The part of the pending prefix released now (none when it is held whole) is carried, so that
		// its continuation can still be cut.
		if start, ok := pending[ln]; ok && start < released {
			s.carries[ln.path] = ln.original()[start:released]
		} else {
			delete(s.carries, ln.path)
		}
	}
	s.held = window[release:]
	return out[:release], nil
}

// mayTouch reports whether a chunk may hold one of forms or end a string with the head of one: the
// chunk must then be parsed. A chunk without a backslash spells its strings as they are, so a form or
// its head stands in its bytes, the head right before a closing quote.
func mayTouch(chunk []byte, forms []string) bool {
	if bytes.IndexByte(chunk, '\\') >= 0 {
		return true
	}
	for _, f := range forms {
		for rest := chunk; ; {
			j := bytes.IndexByte(rest, f[0])
			if j < 0 {
				break
			}
			rest = rest[j:]
			m := 0
			for m < len(f) && m < len(rest) && rest[m] == f[m] {
				m++
			}
			if m == len(f) || (m < len(rest) && rest[m] == '"') {
				return true
			}
			rest = rest[1:]
		}
	}
	return false
}

// deltaMember is how a lane path names a member "delta" (paths spell a member as .<len>:<name>).
const deltaMember = ".5:delta"

// carriedPiece is a lane's carried text, put before its pieces as a piece of no chunk.
type carriedPiece struct {
	ln    *lane
	piece *jnode
}

// attachCarries puts each lane's carried text before its pieces.
func (s *WithheldStream) attachCarries(lanes []*lane) []carriedPiece {
	var out []carriedPiece
	for _, ln := range lanes {
		c, ok := s.carries[ln.path]
		if !ok {
			continue
		}
		p := &jnode{kind: '"', str: c}
		ln.pieces = append([]*jnode{p}, ln.pieces...)
		out = append(out, carriedPiece{ln, p})
	}
	return out
}

// placeCarriedToken leaves the carried text as it was sent and writes a token that redaction put into
// it (a secret that started there) at the head of the lane's first piece instead.
func placeCarriedToken(c carriedPiece) {
	p := c.piece
	if p.out == p.str {
		return
	}
	n := 0
	for n < len(p.str) && n < len(p.out) && p.str[n] == p.out[n] {
		n++
	}
	tail := p.out[n:]
	p.out = p.str
	if len(c.ln.pieces) > 1 {
		c.ln.pieces[1].out = tail + c.ln.pieces[1].out
	}
}

// pieceAt is the chunk holding byte at of the lane's original text; ok is false when that byte is
// carried text, already released.
func pieceAt(ln *lane, at int, chunkOf map[*jnode]int) (int, bool) {
	off := 0
	for _, p := range ln.pieces {
		if at < off+len(p.str) {
			i, inChunk := chunkOf[p]
			return i, inChunk
		}
		off += len(p.str)
	}
	return 0, false
}

// releasedLen is how many bytes of the lane's original text lie before chunk release: its carried text and
// its pieces in the chunks released.
func releasedLen(ln *lane, release int, chunkOf map[*jnode]int) int {
	n := 0
	for _, p := range ln.pieces {
		if i, inChunk := chunkOf[p]; inChunk && i >= release {
			break
		}
		n += len(p.str)
	}
	return n
}

// pendingLen is the length of the longest suffix of text that is a proper prefix of one of forms: the
// head of a secret the lane's next piece may complete (0 when there is none).
func pendingLen(text string, forms []string) int {
	best := 0
	for _, f := range forms {
		for p := min(len(f)-1, len(text)); p > best; p-- {
			if strings.HasSuffix(text, f[:p]) {
				best = p
				break
			}
		}
	}
	return best
}
