package price

import (
	"cmp"
	"slices"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// MaxLines bounds the lines Lines returns; the calls of further models go into one Other line, which is
// never priced. A run that asks for more models than this is not one anyone prices from a table.
const MaxLines = 64

// Line is the model calls of one provider and model added up, so that a reader prices a run with its
// own table later (the operator prices a Job's result with its price file). Calls that state a cost
// are added up apart from those that do not, and calls whose counts cannot be priced (Check) are only
// counted: their tokens would hide the contradiction in a sum.
type Line struct {
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model"`
	Calls    int64  `json:"calls"`
	// Usage is the calls' tokens; its CostMicroUSD, when not 0, is the cost every one of them stated.
	Usage session.Usage `json:"usage"`
	// Invalid counts calls whose usage cannot be priced; a line with one is unpriced.
	Invalid int64 `json:"invalid,omitempty"`
	// Other holds the calls of the models past MaxLines.
	Other bool `json:"other,omitempty"`
}

// Lines adds up the usage of the model calls among events that keep accepts (nil accepts all), one
// line per provider, model and whether they stated a cost, sorted. Calls without usage are left out.
func Lines(events []session.Event, keep func(*session.Event) bool) []Line {
	type key struct {
		provider, model string
		stated          bool
	}
	index := map[key]int{}
	var out []Line
	other := -1
	for i := range events {
		ev := &events[i]
		if ev.Kind != session.KindModelCall || ev.Usage == nil || (keep != nil && !keep(ev)) {
			continue
		}
		k := key{ev.Provider, ModelOf(ev), ev.Usage.CostMicroUSD != 0}
		at, ok := index[k]
		if !ok {
			if len(out) < MaxLines {
				at = len(out)
				out = append(out, Line{Provider: k.provider, Model: k.model})
				index[k] = at
			} else {
				if other < 0 {
					other = len(out)
					out = append(out, Line{Other: true})
				}
				at = other
			}
		}
		l := &out[at]
		l.Calls++
		if Check(ev.Usage) != "" {
			l.Invalid++
			continue
		}
		l.Usage.Add(ev.Usage)
	}
	slices.SortStableFunc(out, func(a, b Line) int {
		if a.Other != b.Other {
			if a.Other {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Model, b.Model), cmp.Compare(a.Usage.CostMicroUSD, b.Usage.CostMicroUSD))
	})
	return out
}

// Lines is the cost of lines.
func (t *Table) Lines(lines []Line) Cost {
	var c Cost
	for i := range lines {
		l := &lines[i]
		switch {
		case l.Other:
			c.miss(Miss{Model: "(other models)", Why: "more models than a result lists"})
		case l.Invalid > 0:
			c.miss(Miss{Model: nameOf(l.Provider, l.Model), Why: "token counts that cannot be priced"})
		default:
			c.Add(t.Call(l.Provider, l.Model, &l.Usage))
		}
	}
	return c
}
