package price

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// maxMisses bounds the unpriced models a cost lists; the rest are counted.
const maxMisses = 16

// Miss is a model whose calls could not be priced, and why.
type Miss struct {
	Model string // provider/model, or the model alone when no provider was recorded
	Why   string
}

// Cost is what a set of calls cost: exact over the priced ones, unknown while any is unpriced.
type Cost struct {
	pico     uint64 // picodollars; the micro-dollar figure is rounded from it once
	overflow bool
	misses   []Miss // sorted by model, one per model
	more     int    // misses past maxMisses
}

// MicroUSD is the cost rounded to the micro-dollar, and false when it is unknown.
func (c Cost) MicroUSD() (int64, bool) {
	if len(c.misses) > 0 || c.more > 0 || c.overflow {
		return 0, false
	}
	micro := c.pico / 1_000_000
	if c.pico%1_000_000 >= 500_000 {
		micro++
	}
	return int64(micro), true
}

// Known reports whether every call was priced.
func (c Cost) Known() bool {
	_, ok := c.MicroUSD()
	return ok
}

// Unpriced lists the models whose calls could not be priced, sorted.
func (c Cost) Unpriced() []string {
	out := make([]string, 0, len(c.misses))
	for _, m := range c.misses {
		out = append(out, m.Model)
	}
	return out
}

// Reason says why the cost is unknown, naming each unpriced model; empty when it is known.
func (c Cost) Reason() string {
	var parts []string
	for _, m := range c.misses {
		parts = append(parts, m.Model+": "+m.Why)
	}
	if c.more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more models", c.more))
	}
	if c.overflow {
		parts = append(parts, "the total is beyond $18,446,744")
	}
	return strings.Join(parts, "; ")
}

// Add adds o to c.
func (c *Cost) Add(o Cost) {
	sum, carry := bits.Add64(c.pico, o.pico, 0)
	c.pico, c.overflow = sum, c.overflow || o.overflow || carry != 0
	c.more += o.more
	for _, m := range o.misses {
		c.miss(m)
	}
}

func (c *Cost) miss(m Miss) {
	i, found := slices.BinarySearchFunc(c.misses, m.Model, func(a Miss, model string) int { return cmp.Compare(a.Model, model) })
	switch {
	case found:
	case len(c.misses) < maxMisses:
		c.misses = slices.Insert(c.misses, i, m)
	default:
		c.more++
	}
}

func (c *Cost) addPico(tokens int64, r Rate) {
	hi, lo := bits.Mul64(uint64(tokens), uint64(r))
	sum, carry := bits.Add64(c.pico, lo, 0)
	c.pico, c.overflow = sum, c.overflow || hi != 0 || carry != 0
}

// nameOf is how a cost names a model: provider/model, the provider as its prices are filed.
func nameOf(provider, model string) string {
	if model == "" {
		return "(no model recorded)"
	}
	return Key{providerOf(provider), model}.String()
}

func unpriced(model, why string) Cost { return Cost{misses: []Miss{{Model: model, Why: why}}} }

// Missing is the cost of calls of model that cannot be priced, and why.
func Missing(model, why string) Cost { return unpriced(model, why) }

// Stated is a cost a recording stated, in micro-dollars (not negative).
func Stated(micro int64) Cost {
	var c Cost
	c.addPico(max(micro, 0), 1_000_000)
	return c
}

// Call is the cost of one model call, or of a Line of them: the cost the usage states when it states
// one, else its tokens at the table's price. A call without usage, or with no tokens, costs nothing.
func (t *Table) Call(provider, model string, u *session.Usage) Cost {
	if u == nil {
		return Cost{}
	}
	name := nameOf(provider, model)
	if why := Check(u); why != "" {
		return unpriced(name, why)
	}
	var c Cost
	if u.CostMicroUSD > 0 {
		c.addPico(u.CostMicroUSD, 1_000_000)
		return c
	}
	if u.InputTokens == 0 && u.OutputTokens == 0 {
		return c
	}
	p, _, ok := t.Lookup(provider, model)
	if !ok {
		return unpriced(name, "no price in the table")
	}
	if u.CacheCreationInputTokens > 0 && p.CacheWrite < 0 {
		return unpriced(name, "cache-write tokens, and no cache-write price")
	}
	if u.CacheReadInputTokens > 0 && p.CacheRead < 0 {
		return unpriced(name, "cache-read tokens, and no cache-read price")
	}
	c.addPico(u.InputTokens-u.CacheCreationInputTokens-u.CacheReadInputTokens, p.Input)
	c.addPico(u.OutputTokens, p.Output)
	c.addPico(u.CacheCreationInputTokens, max(p.CacheWrite, 0))
	c.addPico(u.CacheReadInputTokens, max(p.CacheRead, 0))
	return c
}

// Check says what is wrong with a usage whose counts cannot be priced: a negative count, or cache
// counts that are more than the input tokens that include them. Empty when nothing is.
func Check(u *session.Usage) string {
	switch {
	case u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheCreationInputTokens < 0 || u.CacheReadInputTokens < 0 || u.CostMicroUSD < 0:
		return fmt.Sprintf("a negative count (input %d, output %d, cache write %d, cache read %d, cost %d)",
			u.InputTokens, u.OutputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.CostMicroUSD)
	case u.CacheCreationInputTokens > u.InputTokens-u.CacheReadInputTokens:
		return fmt.Sprintf("%d cache-write and %d cache-read tokens of only %d input tokens",
			u.CacheCreationInputTokens, u.CacheReadInputTokens, u.InputTokens)
	}
	return ""
}

// Events is the cost of the model calls among events that keep accepts (nil accepts all).
func (t *Table) Events(events []session.Event, keep func(*session.Event) bool) Cost {
	var c Cost
	for i := range events {
		ev := &events[i]
		if ev.Kind != session.KindModelCall || (keep != nil && !keep(ev)) {
			continue
		}
		c.Add(t.Call(ev.Provider, ModelOf(ev), ev.Usage))
	}
	return c
}

// ModelOf is the model a model call asked for.
func ModelOf(ev *session.Event) string {
	if ev.Request == nil {
		return ""
	}
	return ev.Request.Model
}
