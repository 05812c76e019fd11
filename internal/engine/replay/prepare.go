package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"golang.org/x/text/unicode/norm"
)

// Preparing a model request for storage and matching — redacting it, then fingerprinting what is
// stored — reads all of it, and an agent's request carries its whole conversation: prepared from
// scratch every time, a run of n turns costs n² message reads, and a 1,000-turn run spent 99% of its
// recording and replaying time here. A lane's next request nearly always repeats its last one's
// messages and adds a few, so each lane keeps a memo of its last request: the messages as given,
// their redacted form, and the fingerprint's SHA-256 state after each of them. The next request pays
// a byte comparison for the messages it repeats and the full work only for the ones it adds.
//
// The memo changes no result: preparing with it gives what preparing from scratch gives
// (TestPreparingWithTheMemoEqualsPreparingFromScratch). Two facts make that hold:
//   - a request is redacted in parts — the request without its messages, then each message on its
//     own, in order — so a message's redacted form does not depend on its neighbours; it depends on
//     what the redactor knows, so the memo is kept only while redact.Redactor.Generation stays the
//     same (a secret learned later is redacted in old messages too);
//   - the canonical form of a request is `{"messages":[`, its messages' canonical forms joined by
//     commas, then `]` and the rest, because "messages" is the first key in canonical order: hashing
//     the messages one after another in one SHA-256 and cloning the state after each lets the next
//     request resume at the last message it shares.
//
// The canonical form after the messages follows from the request's head, which a lane's requests
// usually repeat, so the memo keeps it with the head (a codec's StripVolatile must not strip the head
// by what the messages say; the codecs here strip fixed params). Anything the memo does not cover (a
// request without messages, a codec whose StripVolatile changes messages, a structural path into
// the messages, any error) is prepared from scratch.

// messagesOpen is how the canonical form of a request with messages begins.
var messagesOpen = []byte(`{"messages":[`)

// requestMemo is what a lane's last request leaves for its next one.
type requestMemo struct {
	generation uint64 // the redactor's, when the messages were redacted
	// head is the request without its messages as JSON, as the caller gave it, storedHead its
	// redacted form decoded, and restTail the canonical form of the stored request after its
	// messages (`]` excluded), or nil until a request computed it: both follow from head.
	head       []byte
	storedHead session.Request
	restTail   []byte
	messages   []memoMessage
	// stored holds the messages' redacted forms. Stored requests share its backing array, so it is
	// only ever appended to; a request that changes an earlier message gets a new array.
	stored []session.Message
}

// memoMessage is one message of the last request.
type memoMessage struct {
	role    string
	content []byte // as the caller gave it (a copy: the caller may reuse its buffers)
	// digest is the fingerprint's SHA-256 after messagesOpen and the canonical forms of the messages
	// up to and including this one; it is cloned, never written.
	digest hash.Cloner
}

// shared is how many leading messages of msgs the memo holds as they are.
func (m *requestMemo) shared(msgs []session.Message) int {
	n := min(len(m.messages), len(msgs))
	for i := range n {
		// nil and empty content are not the same request: nil is null, empty is refused.
		if m.messages[i].role != msgs[i].Role || !bytes.Equal(m.messages[i].content, msgs[i].Content) ||
			(m.messages[i].content == nil) != (msgs[i].Content == nil) {
			return i
		}
	}
	return n
}

// prepareRequest returns the redacted request to store and its fingerprint, using and then updating
// the memo of the call's lane.
//
// A request that teaches the redactor a secret (a key found by a pattern in one message) is prepared
// again: the secret may also stand bare in a part redacted before it was learned, and it must not be
// stored there. The passes end when one learns nothing; they are bounded because other lanes may be
// learning at the same time, and a pass's result is never less redacted than the one before.
//
// Redactions are counted as the session stores them: each distinct part (a request's head, a
// message, in its redacted form) once, whichever request, lane or pass stored it first, and only
// for the pass that is kept. So a run's counts do not depend on whether, or how often, a memo was
// dropped, nor on which calls overlapped.
func (r *runner) prepareRequest(c call, req session.Request) (session.Request, string, error) {
	if err := checkRequestText(req); err != nil {
		return req, "", err
	}
	memo := r.takeMemo(c.lane.id)
	for pass := 1; ; pass++ {
		learned := r.cfg.Redactor.Generation()
		if memo.generation != learned {
			memo = &requestMemo{generation: learned}
		}
		var parts []storedPart
		stored, fp, err := r.prepareWith(memo, &parts, req)
		if err != nil {
			return req, "", err // the memo is dropped: the lane's next request starts afresh
		}
		if r.cfg.Redactor.Generation() == learned || pass == maxPreparePasses {
			r.countOnce(parts)
			r.keepMemo(c.lane.id, memo)
			return stored, fp, nil
		}
	}
}

// storedPart is a part of a request as it is stored (its redacted JSON, digested) and the
// redactions that made it, to be counted if the session has not stored it before.
type storedPart struct {
	digest [sha256.Size]byte
	tally  *redact.Tally
}

// redactPart redacts doc, one part of a request of the given kind, and adds it to parts.
func (r *runner) redactPart(parts *[]storedPart, kind string, doc []byte) ([]byte, error) {
	tally := r.cfg.Redactor.Tally()
	red, err := tally.JSON(doc)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write(red)
	part := storedPart{tally: tally}
	h.Sum(part.digest[:0])
	*parts = append(*parts, part)
	return red, nil
}

// countOnce commits the redactions of the parts the session had not stored yet.
func (r *runner) countOnce(parts []storedPart) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.countedParts == nil {
		r.countedParts = map[[sha256.Size]byte]bool{}
	}
	for _, p := range parts {
		if !r.countedParts[p.digest] {
			r.countedParts[p.digest] = true
			p.tally.Commit()
		}
	}
}

// maxPreparePasses bounds the passes over one request; two are enough unless other lanes keep
// teaching the redactor secrets meanwhile.
const maxPreparePasses = 4

// takeMemo hands the lane's memo to one call: two concurrent calls of a lane do not share one (the
// second starts from an empty memo).
func (r *runner) takeMemo(lane string) *requestMemo {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.memos[lane]
	delete(r.memos, lane)
	if m == nil {
		return &requestMemo{}
	}
	return m
}

func (r *runner) keepMemo(lane string, m *requestMemo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.memos == nil {
		r.memos = map[string]*requestMemo{}
	}
	r.memos[lane] = m
}

// prepareWith prepares req, reusing and extending memo, and adds the parts it redacts to parts.
func (r *runner) prepareWith(memo *requestMemo, parts *[]storedPart, req session.Request) (session.Request, string, error) {
	stored, err := r.redactHead(memo, parts, req)
	if err != nil {
		return req, "", err
	}
	k := memo.shared(req.Messages)
	if k < len(memo.messages) {
		// Earlier requests' events hold memo.stored[:n] for their n: a new array, so none of them
		// sees its messages change.
		memo.messages = slices.Clone(memo.messages[:k])
		memo.stored = slices.Clone(memo.stored[:k])
	}
	for i := k; i < len(req.Messages); i++ {
		m, err := r.redactMessage(parts, req.Messages[i])
		if err != nil {
			return req, "", err
		}
		memo.stored = append(memo.stored, m)
		memo.messages = append(memo.messages, memoMessage{role: req.Messages[i].Role,
			content: bytes.Clone(req.Messages[i].Content)})
	}
	switch {
	case len(req.Messages) > 0:
		stored.Messages = memo.stored[:len(req.Messages):len(req.Messages)]
	case req.Messages != nil:
		stored.Messages = []session.Message{} // stored and hashed as [], as a request with no messages says
	}
	fp, err := r.fingerprintStored(memo, k, stored)
	return stored, fp, err
}

// redactHead redacts the request without its messages, reusing the memo's redaction of the same head.
func (r *runner) redactHead(memo *requestMemo, parts *[]storedPart, req session.Request) (session.Request, error) {
	head := req
	head.Messages = nil
	doc, err := json.Marshal(head)
	if err != nil {
		return req, err
	}
	if memo.head != nil && bytes.Equal(doc, memo.head) {
		stored := memo.storedHead
		stored.Params = ownParams(stored.Params)
		return stored, nil
	}
	red, err := r.redactPart(parts, "head", doc)
	if err != nil {
		return req, err
	}
	var stored session.Request
	if err := json.Unmarshal(red, &stored); err != nil {
		return req, err
	}
	memo.head, memo.storedHead, memo.restTail = doc, stored, nil
	stored.Params = ownParams(stored.Params)
	return stored, nil
}

// ownParams copies params and their values: each stored request owns its params, as it did when
// every request decoded its head anew, so a caller writing into one's changes neither another's nor
// the memo (whose restTail was hashed from them).
func ownParams(params map[string]json.RawMessage) map[string]json.RawMessage {
	if params == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(params))
	for k, v := range params {
		out[k] = bytes.Clone(v)
	}
	return out
}

// redactMessage redacts one message on its own.
func (r *runner) redactMessage(parts *[]storedPart, m session.Message) (session.Message, error) {
	r.messagesRedacted.Add(1)
	var out session.Message
	doc, err := json.Marshal(m)
	if err != nil {
		return out, err
	}
	red, err := r.redactPart(parts, "message", doc)
	if err != nil {
		return out, err
	}
	if bytes.Equal(red, doc) && jsonscan.Valid(doc) { // Valid: decoding refuses content nested too deep in it
		// Nothing was redacted or respelled: decoding would give the role back (checkRequestText has
		// refused one that is not valid UTF-8, which the encoder would have changed) and the content
		// as the encoder wrote it, the value that ends the document
		// (`{"role":"…","content":…}`; inside the quoted role every '"' is escaped, so the first
		// `,"content":` is the member's own).
		if i := bytes.Index(doc, contentMember); i >= 0 && doc[len(doc)-1] == '}' {
			content := doc[i+len(contentMember) : len(doc)-1]
			return session.Message{Role: m.Role, Content: content[:len(content):len(content)]}, nil
		}
	}
	return out, json.Unmarshal(red, &out)
}

// contentMember is what precedes a message's content in its JSON.
var contentMember = []byte(`,"content":`)

// fingerprintStored fingerprints the stored request, hashing only the messages from index from on
// when the memo's states cover the rest.
func (r *runner) fingerprintStored(memo *requestMemo, from int, stored session.Request) (string, error) {
	opts := fingerprint.Options{Mode: r.cfg.FingerprintMode, VolatilePaths: r.cfg.Codec.VolatilePaths()}
	stripped := r.cfg.Codec.StripVolatile(stored)
	if fp, ok := r.resumeFingerprint(memo, from, stripped, opts); ok {
		return fp, nil
	}
	for i := range memo.messages {
		memo.messages[i].digest = nil // the states are of no use for this request's successor
	}
	return fingerprint.Of(stripped, opts)
}

// resumeFingerprint is fingerprint.Of(stripped, opts) resumed from the memo's state after message
// from-1; ok is false when the request is not one it can take (see the package comment above).
func (r *runner) resumeFingerprint(memo *requestMemo, from int, stripped session.Request, opts fingerprint.Options) (string, bool) {
	n := len(stripped.Messages)
	if n == 0 || !sameMessages(stripped.Messages, memo.stored) || masksMessages(opts) {
		return "", false
	}
	if from > 0 && memo.messages[from-1].digest == nil {
		from = 0
	}
	var h hash.Cloner
	if from == 0 {
		h, _ = sha256.New().(hash.Cloner)
		if h == nil {
			return "", false
		}
		h.Write(messagesOpen)
	} else if h = cloneDigest(memo.messages[from-1].digest); h == nil {
		return "", false
	}
	for i := from; i < n; i++ {
		canon, err := fingerprint.Canonical(stripped.Messages[i], fingerprint.Options{})
		if err != nil || depthOf(canon)+len(`{[`) > fingerprint.MaxDepth {
			return "", false // from scratch, for the error it names (the request nests its messages two deeper)
		}
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write(canon)
		if memo.messages[i].digest = cloneDigest(h); memo.messages[i].digest == nil {
			return "", false
		}
	}
	if memo.restTail == nil {
		rest := stripped
		rest.Messages = []session.Message{}
		canon, err := fingerprint.Canonical(rest, opts)
		if err != nil {
			return "", false
		}
		tail, ok := bytes.CutPrefix(canon, []byte(`{"messages":[]`))
		if !ok {
			return "", false
		}
		memo.restTail = tail
	}
	h.Write([]byte{']'})
	h.Write(memo.restTail)
	return hex.EncodeToString(h.Sum(nil)), true
}

// depthOf is the deepest nesting of a compact JSON document.
func depthOf(doc []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case inString && c == '\\':
			i++
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// cloneDigest clones a SHA-256 state, or returns nil where this build cannot.
func cloneDigest(h hash.Cloner) hash.Cloner {
	c, err := h.Clone()
	if err != nil {
		return nil
	}
	return c
}

// sameMessages reports whether a is b (StripVolatile left the messages alone).
func sameMessages(a, b []session.Message) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

// masksMessages reports whether a structural path reaches into the messages, which the memo's
// states hash unmasked.
func masksMessages(opts fingerprint.Options) bool {
	if opts.Mode != fingerprint.Structural {
		return false
	}
	for _, p := range opts.VolatilePaths {
		first, _, _ := strings.Cut(p, ".")
		if norm.NFC.String(first) == "messages" {
			return true
		}
	}
	return false
}

// checkRequestText refuses invalid UTF-8 in a request's plain strings before json.Marshal sees them:
// it would replace each bad byte with U+FFFD, and two requests differing only there would be stored
// and fingerprinted as one. Message contents and params are raw JSON, which redaction checks itself.
func checkRequestText(req session.Request) error {
	bad := func(path, s string) error {
		if utf8.ValidString(s) {
			return nil
		}
		return &fingerprint.InvalidUTF8Error{Path: path}
	}
	if err := bad("model", req.Model); err != nil {
		return err
	}
	if err := bad("system", req.System); err != nil {
		return err
	}
	for i, m := range req.Messages {
		if !utf8.ValidString(m.Role) { // the path is written only then: a request has many messages
			return &fingerprint.InvalidUTF8Error{Path: fmt.Sprintf("messages[%d].role", i)}
		}
	}
	for k := range req.Params {
		if err := bad("params", k); err != nil {
			return err
		}
	}
	return nil
}
