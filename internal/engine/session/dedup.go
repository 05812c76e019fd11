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
	"reflect"
	"slices"
	"unsafe"
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
//   - joins: a definition made of a run of text, an earlier definition and another run of text,
//     for content that embeds another verbatim (a tool_result message embeds the tool's result).
//   - refs: the request without its messages (model, system prompt, params and tools: the same from
//     turn to turn), its messages, the response's content and a tool's result.
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
	// Request is the request without its messages, Messages the list of its messages.
	Request  string `json:"request,omitempty"`
	Messages string `json:"messages,omitempty"`
	Response string `json:"response,omitempty"`
	Result   string `json:"result,omitempty"`
}

// JoinPart is a piece of a joined definition: a run of its text, or an earlier definition.
type JoinPart struct {
	Text string `json:"t,omitempty"`
	Ref  string `json:"r,omitempty"`
}

// refMin is the encoded size from which a response's content or a tool's result is stored by
// reference: a reference costs about 70 bytes, so shorter values stay inline.
const refMin = 128

// joinMin is the size from which a definition may be embedded in a later one by reference, and
// joinRecent how many of the latest such definitions a new one is compared with.
const (
	joinMin    = 256
	joinRecent = 16
)

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

// Memory in proportion to the log. Each logical event owns a contiguous Request.Messages, so a list
// that extends an older list (one something else already extends) is a copy of it when read, and a
// join may embed a definition any number of times: a small line can cost memory in the size of the
// whole conversation, and a log of such lines memory in its square (2,000 one-message lines
// branching off a 2,000-message list: 1.2 MB of log, 168 MB read). The reader keeps a budget of what
// putting the log back together costs beyond the bytes it decodes — message slots it copies or
// appends, and the bytes of joins — and refuses the line that passes it. The writer keeps the same
// account and never writes a log over it: where a list would pass it, it lists the messages again
// (their bytes in the log pay for their copy), and where a join would, it stores the bytes plainly.
//
// Why the bound is safe for honest logs: the writer cannot exceed it (it checks each line against
// what the reader will count, before the line is written), and a recording whose requests extend the
// previous one — the usual agent loop, any number of lanes interleaved — copies nothing: every list
// extends one nothing else extends, which the reader appends to in place.
const (
	// expansionPerByte is how many bytes of memory the reader may spend per byte of the log's
	// definitions, and expansionFree what it may spend on top, so that a short log may branch freely.
	expansionPerByte = 64
	expansionFree    = 4 << 20
	// messageSlot is the memory one message of an expanded list takes (its content is shared).
	messageSlot = int64(unsafe.Sizeof(Message{}))
)

// expansionBudget is the account both sides keep: read, the bytes of the definitions of the lines
// so far (definedBytes), and spent, the memory that putting them back together took.
type expansionBudget struct {
	read, spent int64
}

// allows says whether spending n more bytes stays within the budget once read more bytes are read.
func (b *expansionBudget) allows(read, n int64) bool {
	return b.spent+n <= expansionPerByte*(b.read+read)+expansionFree
}

// overBudget explains the refusal of line: what it would spend and what the log allows.
func (b *expansionBudget) overBudget(line int, n int64) error {
	return fmt.Errorf("line %d: putting it back takes %d bytes of memory, past the %d left of the budget for the %d bytes of definitions read so far (%dx plus %d): the writer never writes this, and a log of such lines costs memory in the square of its size",
		line, n, expansionPerByte*b.read+expansionFree-b.spent, b.read, expansionPerByte, expansionFree)
}

// definedBytes is a lower bound of the bytes ev's definitions take in its line (their keys, values,
// texts and items, without the JSON around them): the same for the writer and the reader of a line.
func definedBytes(ev *Event) int64 {
	n := 0
	for h, v := range ev.Defs {
		n += len(h) + len(v)
	}
	for h, parts := range ev.Joins {
		n += len(h)
		for _, p := range parts {
			n += len(p.Text) + len(p.Ref)
		}
	}
	for h, l := range ev.Lists {
		n += len(h) + len(l.Prev)
		for _, it := range l.Items {
			n += len(it.Role) + len(it.Content)
		}
	}
	for _, h := range ev.DefBlobs {
		n += len(h)
	}
	return int64(n)
}

// listCost is the memory the reader spends on a list of known messages extended by added: a copy of
// the known ones unless the list it extends is one nothing else extends yet (tip).
func listCost(known, added int, tip bool) int64 {
	if tip {
		return int64(added) * messageSlot
	}
	return int64(known+added) * messageSlot
}

// interner is the writer's side: what the log defines so far.
type interner struct {
	defined map[string]bool // content digests defined by the log (inline or as blobs)
	chains  map[string]bool // list digests the log defines, every prefix included
	tips    map[string]bool // lists the log defines that no later list extends: read in place
	budget  expansionBudget // the reader's account of the lines so far (see expansionBudget)
	last    []lastMessage   // the previous request's messages, so a repeated one is not hashed again
	recent  []recentDef     // the latest definitions of at least joinMin bytes, newest last
	blobMin int             // definitions above this size become blobs
	putBlob func([]byte) (string, error)
	// journal is what the line under way added to defined and chains, so that a line that fails
	// before it is written can be taken back (begin).
	journal []journalEntry
}

// journalEntry is a key of one of the interner's sets and the value it had before the line.
type journalEntry struct {
	set      map[string]bool
	key      string
	had, was bool
}

// mark sets set[key] to v, journaling what it was.
func (in *interner) mark(set map[string]bool, key string, v bool) {
	was, had := set[key]
	in.journal = append(in.journal, journalEntry{set: set, key: key, had: had, was: was})
	set[key] = v
}

// begin starts a line and returns what takes it back: a line that is not written must leave nothing
// defined, or a later line would refer to a definition the log never holds.
func (in *interner) begin() (undo func()) {
	in.journal = in.journal[:0]
	last, recent, budget := in.last, slices.Clone(in.recent), in.budget
	return func() {
		for i := len(in.journal) - 1; i >= 0; i-- {
			if e := in.journal[i]; e.had {
				e.set[e.key] = e.was
			} else {
				delete(e.set, e.key)
			}
		}
		in.journal = in.journal[:0]
		in.last, in.recent, in.budget = last, recent, budget
	}
}

type recentDef struct {
	hash string
	data []byte
}

type lastMessage struct {
	role    string
	raw     []byte // the content as the caller gave it
	content string // its definition's digest
	chain   string // the digest of the list up to and including it
}

func newInterner(blobMin int, putBlob func([]byte) (string, error)) *interner {
	return &interner{defined: map[string]bool{}, chains: map[string]bool{}, tips: map[string]bool{}, blobMin: blobMin, putBlob: putBlob}
}

// define returns the digest of data, defining it on ev unless the log already does.
func (in *interner) define(ev *Event, data []byte) (string, error) {
	h := digestOf(data)
	if in.defined[h] {
		return h, nil
	}
	parts := in.join(data)
	if parts != nil && !in.budget.allows(definedBytes(ev), int64(len(data))) {
		parts = nil // the reader could not afford to build it: its bytes pay for themselves
	}
	switch {
	case len(data) > in.blobMin:
		if _, err := in.putBlob(data); err != nil {
			return "", err
		}
		ev.DefBlobs = append(ev.DefBlobs, h)
	case parts != nil:
		in.budget.spent += int64(len(data))
		if ev.Joins == nil {
			ev.Joins = map[string][]JoinPart{}
		}
		ev.Joins[h] = parts
	default:
		if ev.Defs == nil {
			ev.Defs = map[string]json.RawMessage{}
		}
		ev.Defs[h] = data
	}
	in.mark(in.defined, h, true)
	if len(data) >= joinMin {
		in.recent = append(in.recent, recentDef{hash: h, data: data})
		if len(in.recent) > joinRecent {
			in.recent = in.recent[1:]
		}
	}
	return h, nil
}

// join returns data as a run of text, a recent definition it embeds and another run of text, or nil
// when it embeds none.
func (in *interner) join(data []byte) []JoinPart {
	for i := len(in.recent) - 1; i >= 0; i-- {
		d := in.recent[i]
		if at := bytes.Index(data, d.data); at >= 0 {
			return []JoinPart{{Text: string(data[:at])}, {Ref: d.hash}, {Text: string(data[at+len(d.data):])}}
		}
	}
	return nil
}

// checkText refuses, before anything of ev is stored, a value the reader would refuse (checkJSONText:
// invalid UTF-8, an unpaired surrogate escape, a duplicate key), naming its field: written as it is,
// the log would commit but never open again. Go strings need no check (encoding/json writes them
// valid); a message the previous request carried as it is was checked then, so a turn checks what it
// adds, not the whole conversation.
func (in *interner) checkText(ev *Event) error {
	check := func(field string, v json.RawMessage) error {
		if len(v) == 0 {
			return nil
		}
		if err := checkJSONText(v, nil); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		return nil
	}
	raw := map[string]json.RawMessage{"args": ev.Args, "result": ev.Result, "value": ev.Value, "ledger": ev.Ledger}
	if ev.Error != nil {
		raw["error.data"] = ev.Error.Data
	}
	if ev.Response != nil {
		raw["response.content"], raw["response.raw"] = ev.Response.Content, ev.Response.Raw
	}
	for i, ch := range ev.Stream {
		raw[fmt.Sprintf("stream[%d].data", i)] = ch.Data
	}
	if r := ev.Request; r != nil {
		for k, v := range r.Params {
			raw["request.params."+k] = v
		}
		for i, m := range r.Messages {
			if i < len(in.last) && in.last[i].role == m.Role && bytes.Equal(in.last[i].raw, m.Content) {
				continue
			}
			raw[fmt.Sprintf("request.messages[%d].content", i)] = m.Content
		}
	}
	for _, field := range slices.Sorted(maps.Keys(raw)) {
		if err := check(field, raw[field]); err != nil {
			return err
		}
	}
	return nil
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
	if err := in.internParts(ev); err != nil {
		return err
	}
	in.budget.read += definedBytes(ev)
	return nil
}

func (in *interner) internParts(ev *Event) error {
	refs := &Refs{}
	if ev.Request != nil {
		req := *ev.Request
		var err error
		if len(req.Messages) > 0 {
			if refs.Messages, err = in.list(ev, req.Messages); err != nil {
				return err
			}
			req.Messages = []Message{}
		}
		data, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("request: %w", err)
		}
		if refs.Request, err = in.define(ev, data); err != nil {
			return err
		}
		ev.Request = nil
	}
	if len(ev.Result) > 0 {
		h, err := in.defineValue(ev, ev.Result)
		if err != nil {
			return fmt.Errorf("result: %w", err)
		}
		if h != "" {
			ev.Result, refs.Result = nil, h
		}
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
	if *refs != (Refs{}) {
		ev.Refs = refs
	}
	return nil
}

// list defines msgs as a list (extending the longest list the log already defines that is a prefix
// of it, or none when the reader could not afford the copy) and returns its digest.
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
	tip := known > 0 && in.tips[cur[known-1].chain]
	// The line reads definedBytes(ev) and at least this list's bytes more, a lower bound of what the
	// reader will have read when it spends (it counts the whole line first).
	read := definedBytes(ev) + int64(len(chain))
	for _, m := range cur[known:] {
		read += int64(len(m.role) + len(m.content))
	}
	if cost := listCost(known, len(cur)-known, tip); known > 0 && !in.budget.allows(read, cost) {
		known, tip = 0, false
	}
	def := ListDef{Items: make([]ListItem, 0, len(cur)-known)}
	if known > 0 {
		def.Prev = cur[known-1].chain
		in.mark(in.tips, def.Prev, false)
	}
	for _, m := range cur[known:] {
		def.Items = append(def.Items, ListItem{Role: m.role, Content: m.content})
		if !in.chains[m.chain] {
			in.mark(in.chains, m.chain, true)
		}
	}
	in.mark(in.tips, chain, true)
	in.budget.spent += listCost(known, len(cur)-known, tip)
	if ev.Lists == nil {
		ev.Lists = map[string]ListDef{}
	}
	ev.Lists[chain] = def
	return chain, nil
}

// Expander turns stored events back into the logical ones, in log order: it resolves blob fields
// (ResolveBlobs), checks and remembers every definition, and expands references. What it builds
// beyond the bytes it decodes (copies of message lists, joined definitions) stays within
// expansionPerByte times the bytes of the log's definitions plus expansionFree: a line that would
// pass that is refused (a *RefError naming the budget), which no log the writer writes does. The
// events it returns share message slices and content bytes with each other: treat them as read-only.
type Expander struct {
	blobs  BlobSource
	name   string // the log's name in errors
	defs   map[string]json.RawMessage
	chains map[string]*chainNode
	budget expansionBudget
	line   int // the log's line under way, counting from 1 (Resolve is called once a line)
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
	x.line++
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
	ev.Defs, ev.Joins, ev.Lists, ev.Refs, ev.StreamText = nil, nil, nil, nil, nil
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
	x.budget.read += definedBytes(ev)
	for _, h := range slices.Sorted(maps.Keys(ev.Defs)) {
		data := ev.Defs[h]
		if got := digestOf(data); got != h {
			return &DigestMismatchError{Object: fmt.Sprintf("%s: the definition at step %d", x.name, ev.Step), Want: h, Got: got}
		}
		x.defs[h] = data
	}
	// A join may embed another join of the same line (the writer compares a definition with the ones
	// just before it), and a list extend another list of the same line: both are learnt in dependency
	// order, whatever the order of their digests.
	err := inDependencyOrder(slices.Sorted(maps.Keys(ev.Joins)), func(h string) (deps []string) {
		for _, p := range ev.Joins[h] {
			if _, sibling := ev.Joins[p.Ref]; sibling && p.Ref != "" && x.defs[p.Ref] == nil {
				deps = append(deps, p.Ref)
			}
		}
		return deps
	}, func(h string) error { return x.defineJoin(ev.Step, h, ev.Joins[h]) }, func(h string) error {
		return &RefError{Step: ev.Step, Field: "joins", Hash: h, Err: errors.New("embeds, through joins of the same line, a join that embeds it: a cycle")}
	})
	if err != nil {
		return err
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
	return inDependencyOrder(slices.Sorted(maps.Keys(ev.Lists)), func(h string) []string {
		prev := ev.Lists[h].Prev
		if _, sibling := ev.Lists[prev]; sibling && x.chains[prev] == nil {
			return []string{prev}
		}
		return nil
	}, func(h string) error { return x.defineList(ev.Step, h, ev.Lists[h]) }, func(h string) error {
		return &RefError{Step: ev.Step, Field: "lists", Hash: h, Err: errors.New("extends, through lists of the same line, a list that extends it: a cycle")}
	})
}

// inDependencyOrder defines every key after the keys deps says it needs (keys of the same batch not
// defined yet), in time linear in the keys and their dependencies whatever their order or the depth
// of their chains, and fails with stuck for the first key left in a cycle. A dependency that is
// missing is define's to report.
func inDependencyOrder(keys []string, deps func(string) []string, define, stuck func(string) error) error {
	waiting := make(map[string]int, len(keys))
	dependents := map[string][]string{}
	var ready []string
	for _, k := range keys {
		ds := deps(k)
		waiting[k] = len(ds)
		for _, d := range ds {
			dependents[d] = append(dependents[d], k)
		}
		if len(ds) == 0 {
			ready = append(ready, k)
		}
	}
	for len(ready) > 0 {
		k := ready[0]
		ready = ready[1:]
		if err := define(k); err != nil {
			return err
		}
		for _, d := range dependents[k] {
			if waiting[d]--; waiting[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	for _, k := range keys {
		if waiting[k] > 0 {
			return stuck(k)
		}
	}
	return nil
}

// defineJoin checks the join h of the line at step and remembers its bytes.
func (x *Expander) defineJoin(step int64, h string, parts []JoinPart) error {
	size := 0
	for _, p := range parts {
		size += len(p.Text) + len(x.defs[p.Ref])
	}
	if !x.budget.allows(0, int64(size)) {
		return &RefError{Step: step, Field: "joins", Hash: h, Err: x.budget.overBudget(x.line, int64(size))}
	}
	x.budget.spent += int64(size)
	data := make([]byte, 0, size)
	for i, p := range parts {
		if p.Ref == "" {
			data = append(data, p.Text...)
			continue
		}
		part, ok := x.defs[p.Ref]
		if !ok || p.Text != "" {
			return &RefError{Step: step, Field: "joins", Hash: h, Err: fmt.Errorf("part %d refers to %s, which the log does not define before it (or has text too)", i, p.Ref)}
		}
		data = append(data, part...)
	}
	if got := digestOf(data); got != h {
		return &DigestMismatchError{Object: fmt.Sprintf("%s: the definition at step %d", x.name, step), Want: h, Got: got}
	}
	if err := checkJSONText(data, nil); err != nil {
		return &RefError{Step: step, Field: "joins", Hash: h, Err: err}
	}
	x.defs[h] = data
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
		if p == nil {
			return fail(fmt.Errorf("extends %s, which the log does not define before it", def.Prev))
		}
		base, tip = p.msgs, p.tip
	}
	cost := listCost(len(base), len(def.Items), tip)
	if !x.budget.allows(0, cost) {
		return fail(x.budget.overBudget(x.line, cost))
	}
	x.budget.spent += cost
	if def.Prev != "" {
		x.chains[def.Prev].tip = false
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
	if r.Messages != "" && r.Request == "" {
		return fail("refs.messages", r.Messages, errors.New("messages without a request"))
	}
	if r.Request != "" {
		data, err := def("refs.request", r.Request)
		if err != nil {
			return err
		}
		if ev.Request != nil {
			return fail("refs.request", r.Request, errors.New("the request is also stored inline"))
		}
		req := &Request{}
		if err := json.Unmarshal(data, req); err != nil {
			return fail("refs.request", r.Request, fmt.Errorf("not a request: %w", err))
		}
		if err := checkJSONText(data, reflect.TypeFor[Request]()); err != nil {
			return fail("refs.request", r.Request, err)
		}
		ev.Request = req
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
	}
	if r.Result != "" {
		data, err := def("refs.result", r.Result)
		if err != nil {
			return err
		}
		if len(ev.Result) != 0 {
			return fail("refs.result", r.Result, errors.New("the result is also stored inline"))
		}
		ev.Result = data
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
