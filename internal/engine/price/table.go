package price

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Rate is a price in millionths of a US dollar per million tokens: a list price of $3 per million
// tokens is 3_000_000.
type Rate int64

// None marks a token class the table has no price for.
const None Rate = -1

// Price is what one model charges per million tokens of each class. CacheWrite is the five-minute
// prompt-cache write (Anthropic); providers that bill cache writes as ordinary input carry the input
// rate there.
type Price struct {
	Input      Rate `json:"input"`
	Output     Rate `json:"output"`
	CacheWrite Rate `json:"cacheWrite"`
	CacheRead  Rate `json:"cacheRead"`
}

// Key names a model of a provider.
type Key struct {
	Provider string
	Model    string
}

func (k Key) String() string {
	if k.Provider == "" {
		return k.Model
	}
	return k.Provider + "/" + k.Model
}

// Table is a set of prices. The zero value and nil hold none.
type Table struct {
	prices map[Key]Price
}

// New is a table of the given prices.
func New(prices map[Key]Price) *Table {
	return &Table{prices: maps.Clone(prices)}
}

// Default is the built-in table: the list prices of the Anthropic and OpenAI models agentrewind is
// used with. Operators override or extend it (With).
func Default() *Table { return New(builtin) }

// With is t with the given prices added, each replacing t's price for the same key.
func (t *Table) With(prices map[Key]Price) *Table {
	out := &Table{prices: map[Key]Price{}}
	if t != nil {
		maps.Copy(out.prices, t.prices)
	}
	maps.Copy(out.prices, prices)
	return out
}

// Keys lists the table's models, sorted.
func (t *Table) Keys() []Key {
	if t == nil {
		return nil
	}
	return slices.SortedFunc(maps.Keys(t.prices), func(a, b Key) int {
		return strings.Compare(a.String(), b.String())
	})
}

// snapshotSuffix is a dated snapshot or "-latest" after a model's name: claude-sonnet-4-5-20250929,
// gpt-4o-2024-08-06, claude-3-5-haiku-latest.
var snapshotSuffix = regexp.MustCompile(`-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$`)

// providerOf is the provider whose prices apply to a recorder's provider name: the Responses API
// bills like Chat Completions, and the SDK's provider-neutral "generic" names no provider.
func providerOf(p string) string {
	switch p {
	case "openai-responses":
		return "openai"
	case "generic":
		return ""
	}
	return p
}

// Lookup finds the price of a model: by its exact name first, then with a dated snapshot suffix
// removed (a snapshot priced differently from its alias has its own entry). A call recorded without a
// provider finds a model only one provider lists.
func (t *Table) Lookup(provider, model string) (Price, Key, bool) {
	if t == nil || model == "" {
		return Price{}, Key{}, false
	}
	names := []string{model}
	if base := snapshotSuffix.ReplaceAllString(model, ""); base != model && base != "" {
		names = append(names, base)
	}
	provider = providerOf(provider)
	for _, name := range names {
		if provider != "" {
			if p, ok := t.prices[Key{provider, name}]; ok {
				return p, Key{provider, name}, true
			}
			continue
		}
		var found []Key
		for k := range t.prices {
			if k.Model == name {
				found = append(found, k)
			}
		}
		if len(found) == 1 {
			return t.prices[found[0]], found[0], true
		}
	}
	return Price{}, Key{}, false
}
