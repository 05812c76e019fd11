package replay

import (
	"bytes"
	"encoding/json"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Trace is the event list of a run, in step order.
type Trace []session.Event

// Goal is reached when the run calls Tool with arguments that contain ArgsMatch.
type Goal struct {
	Tool string
	// ArgsMatch is a JSON object that must be a subset of the call's arguments; empty matches any.
	ArgsMatch json.RawMessage
}

// Reached reports whether any tool call of the trace reached the goal.
func (t Trace) Reached(g Goal) bool {
	var want any
	if len(g.ArgsMatch) > 0 {
		if err := decodeNumbers(g.ArgsMatch, &want); err != nil {
			return false
		}
	}
	for _, ev := range t {
		if ev.Kind != session.KindToolCall || ev.Name != g.Tool || ev.Error != nil {
			continue
		}
		if want == nil {
			return true
		}
		var got any
		if err := decodeNumbers(ev.Args, &got); err == nil && subset(want, got) {
			return true
		}
	}
	return false
}

// subset reports whether want is contained in got: every key of a wanted object matches recursively,
// arrays match element by element, and scalars are equal (numbers by value).
func subset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !subset(wv, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], g[i]) {
				return false
			}
		}
		return true
	case json.Number:
		g, ok := got.(json.Number)
		if !ok {
			return false
		}
		wf, err1 := w.Float64()
		gf, err2 := g.Float64()
		return err1 == nil && err2 == nil && wf == gf
	default:
		return want == got
	}
}

func decodeNumbers(doc []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	return dec.Decode(v)
}

// Usage sums the token usage of the trace's model calls.
func (t Trace) Usage() session.Usage {
	var u session.Usage
	for _, ev := range t {
		if ev.Kind == session.KindModelCall {
			u.Add(ev.Usage)
		}
	}
	return u
}
