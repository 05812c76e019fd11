package replay

import (
	"sort"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Matcher serves recorded boundary events to a replaying harness. Each model or tool call is put in two
// FIFO buckets: a primary one keyed by kind, call site and fingerprint, and a fallback one keyed by kind
// and fingerprint only, so matching survives a call site that moved. Entropy draws are served per lane
// and source in order. Every event is served at most once.
//
// A Matcher is not safe for concurrent use; the runner serialises access.
type Matcher struct {
	primary  map[string]*bucket
	fallback map[string]*bucket
	entropy  map[string]*bucket
	lanes    map[string]*bucket // every boundary event of a lane in seq order
	all      []*entry
}

// bucket is a FIFO of entries. Served entries stay in place — the same entry sits in several buckets
// and its consumed flag is what keeps it from being served twice — and head skips past them so that a
// long replay stays linear.
type bucket struct {
	items []*entry
	head  int
}

func (b *bucket) add(e *entry) { b.items = append(b.items, e) }

// first returns the first unserved entry of the given kind ("" for any).
func (b *bucket) first(kind session.Kind) *entry {
	if b == nil {
		return nil
	}
	for b.head < len(b.items) && b.items[b.head].consumed {
		b.head++
	}
	for _, e := range b.items[b.head:] {
		if !e.consumed && (kind == "" || e.ev.Kind == kind) {
			return e
		}
	}
	return nil
}

func addTo(m map[string]*bucket, key string, e *entry) {
	b := m[key]
	if b == nil {
		b = &bucket{}
		m[key] = b
	}
	b.add(e)
}

type entry struct {
	ev       *session.Event
	consumed bool
}

// Reorder says a lane's call was served out of its recorded order: not fatal, but worth telling.
type Reorder struct {
	Lane        string
	ExpectedSeq int64
	ServedSeq   int64
}

// NewMatcher indexes the boundary events of a recording.
func NewMatcher(events []session.Event) *Matcher {
	m := &Matcher{primary: map[string]*bucket{}, fallback: map[string]*bucket{}, entropy: map[string]*bucket{}, lanes: map[string]*bucket{}}
	for i := range events {
		ev := &events[i]
		if !ev.Kind.IsBoundary() {
			continue
		}
		e := &entry{ev: ev}
		m.all = append(m.all, e)
		addTo(m.lanes, ev.Lane, e)
		if ev.Kind == session.KindEntropy {
			addTo(m.entropy, entropyKey(ev.Lane, ev.Source), e)
			continue
		}
		fp := matchKey(ev)
		addTo(m.primary, primaryKey(ev.Kind, ev.CallSite, fp), e)
		addTo(m.fallback, fallbackKey(ev.Kind, fp), e)
	}
	for _, b := range m.lanes {
		sort.SliceStable(b.items, func(i, j int) bool { return b.items[i].ev.Seq < b.items[j].ev.Seq })
	}
	return m
}

// matchKey is the fingerprint a call is matched on: the request hash of a model call, the tool name
// and argument hash of a tool call (two tools given equal arguments are different calls).
func matchKey(ev *session.Event) string {
	if ev.Kind == session.KindToolCall {
		return toolKey(ev.Name, ev.ArgsHash)
	}
	return ev.RequestHash
}

func toolKey(name, argsHash string) string { return name + "\x00" + argsHash }

func primaryKey(kind session.Kind, site, fp string) string {
	return string(kind) + "\x00" + site + "\x00" + fp
}

func fallbackKey(kind session.Kind, fp string) string { return string(kind) + "\x00" + fp }

func entropyKey(lane string, src session.EntropySource) string { return lane + "\x00" + string(src) }

// Resolution is how a call was matched.
type Resolution int

const (
	// Unresolved: no unserved recorded call has this kind and fingerprint.
	Unresolved Resolution = iota
	// ResolvedExact: same kind, call site and fingerprint.
	ResolvedExact
	// ResolvedFallback: same kind and fingerprint, recorded from another call site (the code around
	// the call moved); the request is the recorded one, byte for byte after canonicalisation.
	ResolvedFallback
)

// Resolve serves the first unserved recorded call with this kind, call site and fingerprint, or else
// with this kind and fingerprint from any call site. It reports a Reorder when the served event is not
// the next one its lane recorded.
func (m *Matcher) Resolve(kind session.Kind, site, lane, fp string) (*session.Event, *Reorder, Resolution) {
	how := ResolvedExact
	e := m.primary[primaryKey(kind, site, fp)].first("")
	if e == nil {
		e, how = m.fallback[fallbackKey(kind, fp)].first(""), ResolvedFallback
	}
	if e == nil {
		return nil, nil, Unresolved
	}
	var reorder *Reorder
	if e.ev.Lane == lane {
		if next := m.nextInLane(lane, ""); next != nil && next != e {
			reorder = &Reorder{Lane: lane, ExpectedSeq: next.ev.Seq, ServedSeq: e.ev.Seq}
		}
	}
	e.consumed = true
	return e.ev, reorder, how
}

// NextEntropy serves the lane's next recorded draw from src.
func (m *Matcher) NextEntropy(lane string, src session.EntropySource) (*session.Event, bool) {
	e := m.entropy[entropyKey(lane, src)].first("")
	if e == nil {
		return nil, false
	}
	e.consumed = true
	return e.ev, true
}

// Expected is the next unserved event the lane recorded, of the given kind ("" for any), or nil.
func (m *Matcher) Expected(lane string, kind session.Kind) *session.Event {
	if e := m.nextInLane(lane, kind); e != nil {
		return e.ev
	}
	return nil
}

// Nearest is the recorded call a drifted request most likely meant: the lane's next unserved call of
// the same kind, else an unserved call of that kind from the same call site, else any unserved call of
// that kind.
func (m *Matcher) Nearest(kind session.Kind, lane, site string) *session.Event {
	if ev := m.Expected(lane, kind); ev != nil {
		return ev
	}
	var any *session.Event
	for _, e := range m.all {
		if e.consumed || e.ev.Kind != kind {
			continue
		}
		if e.ev.CallSite == site {
			return e.ev
		}
		if any == nil {
			any = e.ev
		}
	}
	return any
}

// Unserved lists the recorded boundary events the replay never asked for, in step order.
func (m *Matcher) Unserved() []*session.Event {
	var out []*session.Event
	for _, e := range m.all {
		if !e.consumed {
			out = append(out, e.ev)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out
}

func (m *Matcher) nextInLane(lane string, kind session.Kind) *entry {
	return m.lanes[lane].first(kind)
}
