package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
)

// Messages stored once (schema 3).
//
// A model call's request carries the whole conversation so far, so storing each request as it is
// costs the square of a run's length. The stored form defines each distinct piece of content once,
// on the first line that uses it, and later lines refer to it by digest:
//
//   - defs: the sha256 hex digest of the bytes → the JSON value (a message's content, a system
//     prompt, a request param such as the tool list, a response's content). A definition larger than
//     the writer's blob threshold is stored as blobs/<sha256> and named in defBlobs instead, so that
//     unrelated sessions share it too.
//   - lists: a message list is a chain: its digest folds chainDigest over its items (a role and the
//     digest of a content), and its definition extends an earlier list (prev) by the items the turn
//     added, so a turn costs its new messages plus one list node.
//   - refs: the request's system prompt, messages and large params, and the response's content.
//
// The reader checks every definition before it uses it (the digest of its bytes, or the chain of a
// list) and expands refs back into the Request and Response the writer was given, byte for byte.

// ListDef defines a message list as an earlier list (Prev, empty for none) followed by Items.
type ListDef struct {
	Prev  string     `json:"prev,omitempty"`
	Items []ListItem `json:"items"`
}

// ListItem is one message of a list: its role and the digest of its content's definition.
type ListItem struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Refs says which parts of an event are taken from definitions, by digest.
type Refs struct {
	System   string            `json:"system,omitempty"`
	Messages string            `json:"messages,omitempty"`
	Params   map[string]string `json:"params,omitempty"`
	Response string            `json:"response,omitempty"`
}

// refMin is the encoded size from which a system prompt, a param or a response's content is stored
// by reference: a reference costs about 70 bytes, so shorter values stay inline.
const refMin = 128

// chainDigest is the digest of the list prev followed by one message.
func chainDigest(prev, role, content string) string {
	h := sha256.New()
	h.Write([]byte("agentrewind.list.v1\x00"))
	h.Write([]byte(prev))
	h.Write([]byte{0})
	h.Write([]byte(role))
	h.Write([]byte{0})
	h.Write([]byte(content))
	return hex.EncodeToString(h.Sum(nil))
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// interner is the writer's side: what the log defines so far.
type interner struct {
	defined map[string]bool // content digests defined by the log (inline or as blobs)
	chains  map[string]bool // list digests the log defines, every prefix included
	last    []lastMessage   // the previous request's messages, so a repeated one is not hashed again
	blobMin int             // definitions above this size become blobs
	putBlob func([]byte) (string, error)
}

type lastMessage struct {
	role    string
	raw     []byte // the content as the caller gave it
	content string // its definition's digest
	chain   string // the digest of the list up to and including it
}

func newInterner(blobMin int, putBlob func([]byte) (string, error)) *interner {
	return &interner{defined: map[string]bool{}, chains: map[string]bool{}, blobMin: blobMin, putBlob: putBlob}
}

// define returns the digest of data, defining it on ev unless the log already does.
func (in *interner) define(ev *Event, data []byte) (string, error) {
	h := digestOf(data)
	if in.defined[h] {
		return h, nil
	}
	if len(data) > in.blobMin {
		if _, err := in.putBlob(data); err != nil {
			return "", err
		}
		ev.DefBlobs = append(ev.DefBlobs, h)
	} else {
		if ev.Defs == nil {
			ev.Defs = map[string]json.RawMessage{}
		}
		ev.Defs[h] = data
	}
	in.defined[h] = true
	return h, nil
}

// defineValue defines the encoding of v when it is at least refMin bytes, returning "" otherwise.
func (in *interner) defineValue(ev *Event, v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil || len(data) < refMin {
		return "", err
	}
	return in.define(ev, data)
}

// intern rewrites ev, a copy the caller owns, into its stored form. The caller's Request and
// Response are not modified: ev gets its own.
func (in *interner) intern(ev *Event) error {
	refs := &Refs{}
	if ev.Request != nil {
		req := *ev.Request
		var err error
		if req.System != "" {
			if refs.System, err = in.defineValue(ev, req.System); err != nil {
				return fmt.Errorf("request.system: %w", err)
			}
			if refs.System != "" {
				req.System = ""
			}
		}
		for _, k := range slices.Sorted(maps.Keys(req.Params)) {
			h, err := in.defineValue(ev, req.Params[k])
			if err != nil {
				return fmt.Errorf("request.params.%s: %w", k, err)
			}
			if h == "" {
				continue
			}
			if refs.Params == nil {
				refs.Params, req.Params = map[string]string{}, maps.Clone(req.Params)
			}
			refs.Params[k] = h
			delete(req.Params, k)
		}
		if len(req.Messages) > 0 {
			if refs.Messages, err = in.list(ev, req.Messages); err != nil {
				return err
			}
			req.Messages = []Message{}
		}
		ev.Request = &req
	}
	if ev.Response != nil && ev.Response.Content != nil {
		h, err := in.defineValue(ev, ev.Response.Content)
		if err != nil {
			return fmt.Errorf("response.content: %w", err)
		}
		if h != "" {
			resp := *ev.Response
			resp.Content, refs.Response = nil, h
			ev.Response = &resp
		}
	}
	if refs.System != "" || refs.Messages != "" || refs.Params != nil || refs.Response != "" {
		ev.Refs = refs
	}
	return nil
}

// list defines msgs as a list (extending the longest list the log already defines that is a prefix
// of it) and returns its digest.
func (in *interner) list(ev *Event, msgs []Message) (string, error) {
	cur := make([]lastMessage, len(msgs))
	chain, same := "", true
	for i, m := range msgs {
		if same && i < len(in.last) && in.last[i].role == m.Role && bytes.Equal(in.last[i].raw, m.Content) {
			cur[i], chain = in.last[i], in.last[i].chain
			continue
		}
		same = false
		data, err := json.Marshal(m.Content)
		if err != nil {
			return "", fmt.Errorf("request.messages[%d].content: %w", i, err)
		}
		h, err := in.define(ev, data)
		if err != nil {
			return "", err
		}
		chain = chainDigest(chain, m.Role, h)
		cur[i] = lastMessage{role: m.Role, raw: m.Content, content: h, chain: chain}
	}
	in.last = cur
	known := len(cur)
	for known > 0 && !in.chains[cur[known-1].chain] {
		known--
	}
	if known == len(cur) {
		return chain, nil
	}
	def := ListDef{Items: make([]ListItem, 0, len(cur)-known)}
	if known > 0 {
		def.Prev = cur[known-1].chain
	}
	for _, m := range cur[known:] {
		def.Items = append(def.Items, ListItem{Role: m.role, Content: m.content})
		in.chains[m.chain] = true
	}
	if ev.Lists == nil {
		ev.Lists = map[string]ListDef{}
	}
	ev.Lists[chain] = def
	return chain, nil
}

// Expander turns stored events back into the logical ones, in log order: it resolves blob fields
// (ResolveBlobs), checks and remembers every definition, and expands references. Its memory is in
// the distinct content of the log, not in the number of times it is used. The events it returns share
// message slices and content bytes with each other: treat them as read-only.
type Expander struct {
	blobs  BlobSource
	name   string // the log's name in errors
	defs   map[string]json.RawMessage
	chains map[string]*chainNode
}

// chainNode is a list the log defines: msgs holds its messages (len is its length). tip says that
// nothing was appended after msgs in its backing array, so extending it may append in place.
type chainNode struct {
	msgs []Message
	tip  bool
}

// NewExpander returns an expander for one log named name, reading blobs from blobs.
func NewExpander(blobs BlobSource, name string) *Expander {
	return &Expander{blobs: blobs, name: name, defs: map[string]json.RawMessage{}, chains: map[string]*chainNode{}}
}

// Resolve turns the next stored event of the log into the logical one.
func (x *Expander) Resolve(ev *Event) error {
	if err := ResolveBlobs(ev, x.blobs); err != nil {
		return err
	}
	if err := x.learn(ev); err != nil {
		return err
	}
	if err := x.expand(ev); err != nil {
		return err
	}
	if err := x.unsplice(ev); err != nil {
		return err
	}
	ev.Defs, ev.Lists, ev.Refs, ev.StreamText = nil, nil, nil, nil
	return nil
}

// RefError reports a reference or definition of the stored form that cannot be honoured.
type RefError struct {
	Step  int64
	Field string // "refs.messages", "lists", "defBlobs"...
	Hash  string
	Err   error
}

func (e *RefError) Error() string {
	return fmt.Sprintf("step %d: %s %s: %v", e.Step, e.Field, e.Hash, e.Err)
}

func (e *RefError) Unwrap() error { return e.Err }

// learn checks and remembers what ev defines.
func (x *Expander) learn(ev *Event) error {
	for _, h := range slices.Sorted(maps.Keys(ev.Defs)) {
		data := ev.Defs[h]
		if got := digestOf(data); got != h {
			return &DigestMismatchError{Object: fmt.Sprintf("%s: the definition at step %d", x.name, ev.Step), Want: h, Got: got}
		}
		x.defs[h] = data
	}
	for _, h := range ev.DefBlobs {
		fail := func(err error) error { return &RefError{Step: ev.Step, Field: "defBlobs", Hash: h, Err: err} }
		if !ValidBlobHash(h) {
			return fail(errors.New("not a sha256 hex digest"))
		}
		data, err := x.blobs.ReadBlob(h)
		if errors.Is(err, fs.ErrNotExist) {
			return &MissingError{Object: BlobPath(h), Step: ev.Step, Field: "defBlobs", Err: err}
		}
		if err != nil {
			return fmt.Errorf("step %d: reading blob %s for defBlobs: %w", ev.Step, h, err)
		}
		if err := VerifyBlob(h, data); err != nil {
			return err
		}
		if err := checkJSONText(data, nil); err != nil {
			return fail(err)
		}
		x.defs[h] = data
	}
	// A list may extend another list of the same line: define them in dependency order.
	pending := slices.Sorted(maps.Keys(ev.Lists))
	for len(pending) > 0 {
		var later []string
		for _, h := range pending {
			def := ev.Lists[h]
			if def.Prev != "" && x.chains[def.Prev] == nil {
				later = append(later, h)
				continue
			}
			if err := x.defineList(ev.Step, h, def); err != nil {
				return err
			}
		}
		if len(later) == len(pending) {
			return &RefError{Step: ev.Step, Field: "lists", Hash: later[0], Err: fmt.Errorf("extends %s, which the log does not define before it", ev.Lists[later[0]].Prev)}
		}
		pending = later
	}
	return nil
}

func (x *Expander) defineList(step int64, h string, def ListDef) error {
	fail := func(err error) error { return &RefError{Step: step, Field: "lists", Hash: h, Err: err} }
	if len(def.Items) == 0 {
		return fail(errors.New("a list definition adds no message"))
	}
	var base []Message
	tip := false
	if def.Prev != "" {
		p := x.chains[def.Prev]
		base, tip = p.msgs, p.tip
		p.tip = false
	}
	msgs := base
	if !tip {
		msgs = make([]Message, len(base), len(base)+len(def.Items))
		copy(msgs, base)
	}
	chain := def.Prev
	var chains []string
	for i, it := range def.Items {
		content, ok := x.defs[it.Content]
		if !ok {
			return fail(fmt.Errorf("item %d refers to content %s, which the log does not define before it", i, it.Content))
		}
		chain = chainDigest(chain, it.Role, it.Content)
		chains = append(chains, chain)
		msgs = append(msgs, Message{Role: it.Role, Content: content})
	}
	if chain != h {
		return &DigestMismatchError{Object: fmt.Sprintf("%s: the message list defined at step %d", x.name, step), Want: h, Got: chain}
	}
	n := len(base)
	for i, c := range chains {
		if x.chains[c] == nil {
			x.chains[c] = &chainNode{msgs: msgs[: n+i+1 : n+i+1]}
		}
	}
	x.chains[h] = &chainNode{msgs: msgs, tip: true}
	return nil
}

// expand puts back what ev.Refs refers to.
func (x *Expander) expand(ev *Event) error {
	r := ev.Refs
	if r == nil {
		return nil
	}
	fail := func(field, h string, err error) error {
		return &RefError{Step: ev.Step, Field: field, Hash: h, Err: err}
	}
	def := func(field, h string) (json.RawMessage, error) {
		data, ok := x.defs[h]
		if !ok {
			return nil, fail(field, h, errors.New("the log does not define it before it is used"))
		}
		return data, nil
	}
	if r.System != "" || r.Messages != "" || r.Params != nil {
		if ev.Request == nil {
			return fail("refs", "", errors.New("refers to request parts, but the event has no request"))
		}
		req := ev.Request
		if r.System != "" {
			data, err := def("refs.system", r.System)
			if err != nil {
				return err
			}
			if req.System != "" {
				return fail("refs.system", r.System, errors.New("the system prompt is also stored inline"))
			}
			if err := json.Unmarshal(data, &req.System); err != nil {
				return fail("refs.system", r.System, fmt.Errorf("not a JSON string: %w", err))
			}
		}
		if r.Messages != "" {
			node := x.chains[r.Messages]
			if node == nil {
				return fail("refs.messages", r.Messages, errors.New("the log does not define this list before it is used"))
			}
			if len(req.Messages) != 0 {
				return fail("refs.messages", r.Messages, errors.New("the messages are also stored inline"))
			}
			req.Messages = node.msgs[:len(node.msgs):len(node.msgs)]
		}
		for _, k := range slices.Sorted(maps.Keys(r.Params)) {
			data, err := def("refs.params."+k, r.Params[k])
			if err != nil {
				return err
			}
			if _, dup := req.Params[k]; dup {
				return fail("refs.params."+k, r.Params[k], errors.New("the param is also stored inline"))
			}
			if req.Params == nil {
				req.Params = map[string]json.RawMessage{}
			}
			req.Params[k] = data
		}
	}
	if r.Response != "" {
		data, err := def("refs.response", r.Response)
		if err != nil {
			return err
		}
		if ev.Response == nil || (len(ev.Response.Content) != 0 && string(ev.Response.Content) != "null") {
			return fail("refs.response", r.Response, errors.New("the event has no response, or its content is also stored inline"))
		}
		ev.Response.Content = data
	}
	return nil
}
