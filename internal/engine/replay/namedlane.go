package replay

import (
	"context"
	"errors"
	"fmt"
	"regexp"
)

// NamedLane is a concurrent branch named by the caller instead of by the order it was spawned in.
// AgentContext.Go numbers child lanes in spawn order, which a deterministic Go harness repeats on
// replay; a harness whose branches arrive from outside (the proxy's HTTP clients, whose first requests
// race) has no such order, so it names each branch and gets the lane "<parent>/<name>" whichever branch
// shows up first. Create one NamedLane per name and reuse it: the lane numbers its calls itself, and
// a second NamedLane of the same name would start again at seq 0.
type NamedLane struct{ l *lane }

// laneName is what a lane name may look like: it becomes part of every event's lane.
var laneName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ErrNoLane says a context does not come from a harness: it carries no lane to name a branch under.
var ErrNoLane = errors.New("the context carries no lane: derive it from the context the harness was given")

// NewNamedLane returns the lane "<parent>/<name>", where parent is the lane ctx carries (the context a
// harness is given carries the main lane, "0"). name is 1 to 64 letters, digits, '.', '_' or '-',
// starting with a letter or digit.
func NewNamedLane(ctx context.Context, name string) (*NamedLane, error) {
	parent, ok := ctx.Value(laneKey{}).(*lane)
	if !ok {
		return nil, ErrNoLane
	}
	if !laneName.MatchString(name) {
		return nil, fmt.Errorf("lane name %q: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return &NamedLane{l: newLane(parent.id + "/" + name)}, nil
}

// ID is the lane's identifier in the recording.
func (n *NamedLane) ID() string { return n.l.id }

// Bind returns ctx carrying the lane: boundary calls made with it are numbered in the lane.
func (n *NamedLane) Bind(ctx context.Context) context.Context { return withLane(ctx, n.l) }
