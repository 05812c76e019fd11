package replay

import (
	"encoding/json"
	"fmt"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Compare checks that a candidate run crossed the boundary exactly as a golden recording did: the same
// boundary calls, in the same per-lane order, from the same call sites, with the same fingerprints. It
// returns nil when they agree and otherwise a *DriftError at the first step where they part, with a
// diff of the two requests. Timestamps, latencies and answers do not count: a trajectory is what the
// agent asked, not what it was told.
func Compare(golden, candidate []session.Event) *DriftError {
	g, c := boundary(golden), boundary(candidate)
	for i := 0; i < len(g) || i < len(c); i++ {
		switch {
		case i >= len(c):
			return &DriftError{Step: g[i].Step, Kind: g[i].Kind, Lane: g[i].Lane, CallSite: g[i].CallSite, Expected: g[i],
				Reason: fmt.Sprintf("the candidate stopped after %d boundary calls; the golden run made %d", len(c), len(g))}
		case i >= len(g):
			return &DriftError{Step: c[i].Step, Kind: c[i].Kind, Lane: c[i].Lane, CallSite: c[i].CallSite, Fingerprint: eventFingerprint(c[i]),
				Reason: fmt.Sprintf("the candidate made more boundary calls than the golden run's %d: %s from %s", len(g), c[i].Kind, c[i].CallSite)}
		case !sameCall(g[i], c[i]):
			return &DriftError{Step: c[i].Step, Kind: c[i].Kind, Lane: c[i].Lane, CallSite: c[i].CallSite, Fingerprint: eventFingerprint(c[i]),
				Expected: g[i], Nearest: g[i], Diff: diffJSON(callDoc(g[i]), callDoc(c[i]))}
		}
	}
	return nil
}

func boundary(events []session.Event) []*session.Event {
	var out []*session.Event
	for i := range events {
		if events[i].Kind.IsBoundary() {
			out = append(out, &events[i])
		}
	}
	return out
}

func sameCall(a, b *session.Event) bool {
	return a.Kind == b.Kind && a.Lane == b.Lane && a.Seq == b.Seq && a.CallSite == b.CallSite &&
		a.Name == b.Name && a.Source == b.Source && eventFingerprint(a) == eventFingerprint(b)
}

// callDoc is what a drift diff shows of a call: its identity and its request.
func callDoc(ev *session.Event) []byte {
	doc := map[string]any{"kind": ev.Kind, "lane": ev.Lane, "seq": ev.Seq, "callSite": ev.CallSite}
	switch ev.Kind {
	case session.KindModelCall:
		doc["request"] = ev.Request
	case session.KindToolCall:
		doc["name"], doc["args"] = ev.Name, ev.Args
	case session.KindEntropy:
		doc["source"] = ev.Source
	}
	b, _ := json.Marshal(doc)
	return b
}
