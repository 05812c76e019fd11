package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Clock implements AgentContext: wall-clock milliseconds, recorded and replayed.
func (r *runner) Clock(ctx context.Context) (time.Time, error) {
	v, err := r.draw(ctx, session.SourceClock, func() json.RawMessage {
		return json.RawMessage(strconv.FormatInt(r.cfg.Now().UnixMilli(), 10))
	})
	if err != nil {
		return time.Time{}, err
	}
	var ms int64
	if err := json.Unmarshal(v, &ms); err != nil {
		return time.Time{}, fmt.Errorf("recorded clock value %s: %w", v, err)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// Random implements AgentContext: a float in [0, 1), recorded and replayed.
func (r *runner) Random(ctx context.Context) (float64, error) {
	v, err := r.draw(ctx, session.SourceRandom, func() json.RawMessage {
		return json.RawMessage(strconv.FormatFloat(r.cfg.Random(), 'g', -1, 64))
	})
	if err != nil {
		return 0, err
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return 0, fmt.Errorf("recorded random value %s: %w", v, err)
	}
	return f, nil
}

// UUID implements AgentContext: a random UUID, recorded and replayed.
func (r *runner) UUID(ctx context.Context) (string, error) {
	v, err := r.draw(ctx, session.SourceUUID, func() json.RawMessage {
		b, _ := json.Marshal(r.cfg.NewUUID())
		return b
	})
	if err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("recorded uuid value %s: %w", v, err)
	}
	return s, nil
}

// draw takes one value from an entropy source: live (and recorded) in Record mode and a fork's tail,
// and otherwise the lane's next recorded draw from the same source.
func (r *runner) draw(ctx context.Context, src session.EntropySource, live func() json.RawMessage) (json.RawMessage, error) {
	if r.fork != nil && r.fork.isHalted() {
		return nil, r.fork.haltErr()
	}
	c := r.begin(ctx, session.KindEntropy, nil, string(src))
	ev := r.event(c, session.KindEntropy)
	ev.Source = src
	if r.phaseOf(c.step) == phaseLive {
		ev.Value = live()
		if r.fork != nil {
			ev.Provenance = session.ProvenanceLive
		}
		r.finish(&ev)
		return ev.Value, nil
	}
	r.mu.Lock()
	rec, ok := r.matcher.NextEntropy(c.lane.id, src)
	r.mu.Unlock()
	if ok {
		ev.Value = rec.Value
		if r.fork != nil {
			ev.Provenance = session.ProvenanceRecorded
		}
		r.finish(&ev)
		return rec.Value, nil
	}
	r.mu.Lock()
	expected := r.matcher.Expected(c.lane.id, "")
	r.mu.Unlock()
	d := &DriftError{Step: c.step, Kind: session.KindEntropy, Lane: c.lane.id, CallSite: c.site, Expected: expected, Code: DriftNoRecordedEntropy,
		Reason: fmt.Sprintf("a %s draw in lane %s has no recorded value left", src, c.lane.id)}
	if r.policy == Passthrough {
		// Passthrough is the policy that asked for live values; Warn never draws entropy live, since a
		// live value would silently change every later request that carries it.
		r.tolerate(d)
		ev.Value = live()
		r.finish(&ev)
		return ev.Value, nil
	}
	r.failed(c, session.KindEntropy, d)
	return nil, d
}
