package replay

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// namedLaneAgent draws a random number in each of two named lanes, creating the lanes in the order
// given: the lanes' identities and values must not depend on it.
func namedLaneAgent(order []string, got map[string]float64, mu *sync.Mutex) Harness {
	return func(ctx context.Context, ac AgentContext) error {
		lanes := map[string]*NamedLane{}
		for _, name := range order {
			l, err := NewNamedLane(ctx, name)
			if err != nil {
				return err
			}
			lanes[name] = l
		}
		for _, name := range order {
			v, err := ac.Random(lanes[name].Bind(context.Background()))
			if err != nil {
				return err
			}
			mu.Lock()
			got[name] = v
			mu.Unlock()
		}
		return nil
	}
}

func TestNamedLanesReplayTheirOwnDrawsWhateverOrderTheyAppearIn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	var mu sync.Mutex
	recorded := map[string]float64{}
	rec, err := Record(context.Background(), RecordOptions{Config: liveEntropy(), Dir: dir, ID: "lanes"},
		namedLaneAgent([]string{"planner", "worker"}, recorded, &mu))
	if err != nil || rec.HarnessErr != nil {
		t.Fatal(err, rec.HarnessErr)
	}
	lanes := map[string]bool{}
	for _, ev := range rec.Events {
		if ev.Kind == session.KindEntropy {
			lanes[ev.Lane] = true
		}
	}
	if !lanes["0/planner"] || !lanes["0/worker"] || len(lanes) != 2 {
		t.Fatalf("entropy lanes %v, want 0/planner and 0/worker", lanes)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	replayed := map[string]float64{}
	if _, err := Replay(context.Background(), ReplayOptions{Session: s}, namedLaneAgent([]string{"worker", "planner"}, replayed, &mu)); err != nil {
		t.Fatal(err)
	}
	for name, v := range recorded {
		if replayed[name] != v {
			t.Errorf("lane %s replayed %v, recorded %v", name, replayed[name], v)
		}
	}
}

func TestNamedLaneRefusesAContextWithoutALaneAndABadName(t *testing.T) {
	if _, err := NewNamedLane(context.Background(), "a"); !errors.Is(err, ErrNoLane) {
		t.Fatalf("err = %v, want ErrNoLane", err)
	}
	ctx := withLane(context.Background(), newLane("0"))
	for _, bad := range []string{"", "a/b", "-x", "a b", string(make([]byte, 65))} {
		if _, err := NewNamedLane(ctx, bad); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	l, err := NewNamedLane(ctx, "w-1")
	if err != nil || l.ID() != "0/w-1" {
		t.Fatalf("lane %v, %v", l, err)
	}
}
