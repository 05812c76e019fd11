package replay

import (
	"context"
	"strconv"
	"sync"
)

// lane is a concurrent branch of a harness. Seq numbers the lane's calls at initiation; children names
// child lanes in the order they were spawned, which a deterministic harness repeats on replay.
type lane struct {
	id       string
	mu       sync.Mutex
	seq      int64
	children int
	ordinals map[string]int // per-kind call counters, for call sites nobody named
}

func newLane(id string) *lane { return &lane{id: id, ordinals: map[string]int{}} }

// nextSeq returns the next sequence number in the lane.
func (l *lane) nextSeq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.seq
	l.seq++
	return s
}

// child creates the next child lane: "0" spawns "0.1", "0.2", ...
func (l *lane) child() *lane {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.children++
	return newLane(l.id + "." + strconv.Itoa(l.children))
}

// ordinal returns how many calls of kind this lane made before, for an ordinal call site.
func (l *lane) ordinal(kind string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.ordinals[kind]
	l.ordinals[kind] = n + 1
	return n
}

type laneKey struct{}

// laneOf returns the lane carried by ctx, or the root lane.
func laneOf(ctx context.Context, root *lane) *lane {
	if l, ok := ctx.Value(laneKey{}).(*lane); ok {
		return l
	}
	return root
}

func withLane(ctx context.Context, l *lane) context.Context {
	return context.WithValue(ctx, laneKey{}, l)
}
