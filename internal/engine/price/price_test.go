package price

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

func usage(in, out, write, read int64) *session.Usage {
	return &session.Usage{InputTokens: in, OutputTokens: out, CacheCreationInputTokens: write, CacheReadInputTokens: read}
}

// TestCallPricesEveryTokenClass prices each class of token at its own rate: uncached input, output,
// cache writes and cache reads, the input count holding the cache counts.
func TestCallPricesEveryTokenClass(t *testing.T) {
	table := Default()
	for _, tc := range []struct {
		name            string
		provider, model string
		u               *session.Usage
		want            int64
	}{
		// 500 uncached x $3 + 100 out x $15 + 200 written x $3.75 + 300 read x $0.30, per million.
		{"anthropic, all four classes", "anthropic", "claude-sonnet-4-5", usage(1000, 100, 200, 300), 1500 + 1500 + 750 + 90},
		{"a dated snapshot is its alias", "anthropic", "claude-sonnet-4-5-20250929", usage(1000, 100, 200, 300), 3840},
		{"haiku", "anthropic", "claude-haiku-4-5", usage(2_000_000, 1_000_000, 0, 0), 2_000_000 + 5_000_000},
		{"opus 4.1", "anthropic", "claude-opus-4-1", usage(1_000_000, 0, 0, 1_000_000), 1_500_000},
		// OpenAI: prompt tokens include the cached ones, billed at the cached rate.
		{"openai cached input", "openai", "gpt-4o", usage(1_000_000, 1_000_000, 0, 400_000), 1_500_000 + 500_000 + 10_000_000},
		{"openai snapshot", "openai", "gpt-4o-2024-08-06", usage(1_000_000, 0, 0, 0), 2_500_000},
		{"a snapshot priced apart keeps its price", "openai", "gpt-4o-2024-05-13", usage(1_000_000, 0, 0, 0), 5_000_000},
		{"the Responses API bills like Chat Completions", "openai-responses", "o3", usage(1_000_000, 1_000_000, 0, 0), 10_000_000},
		{"no provider recorded, one provider lists the model", "", "gpt-4o-mini", usage(1_000_000, 1_000_000, 0, 0), 750_000},
		{"the SDK's generic provider names none", "generic", "gpt-4o-mini", usage(1_000_000, 1_000_000, 0, 0), 750_000},
		// 1 token at $0.05 per million is 0.05 micro-dollars: rounded to 0 alone, exact in a sum.
		{"below a micro-dollar rounds to nearest", "openai", "gpt-5-nano", usage(10, 0, 0, 0), 1},
		{"a stated cost is taken as stated", "anthropic", "fake-1", &session.Usage{InputTokens: 40, OutputTokens: 7, CostMicroUSD: 130}, 130},
		{"a call with no tokens costs nothing whatever its model", "openai", "gpt-9", usage(0, 0, 0, 0), 0},
		{"a call without usage costs nothing", "openai", "gpt-9", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := table.Call(tc.provider, tc.model, tc.u).MicroUSD()
			if !ok || got != tc.want {
				t.Errorf("cost %d (known %v), want %d", got, ok, tc.want)
			}
		})
	}
}

// TestCallWithoutAPriceIsUnknownNeverZero: every way a call cannot be priced leaves the cost unknown,
// with the model named and why.
func TestCallWithoutAPriceIsUnknownNeverZero(t *testing.T) {
	ambiguous := New(map[Key]Price{{"a", "m"}: {Input: 1}, {"b", "m"}: {Input: 2}})
	for _, tc := range []struct {
		name            string
		table           *Table
		provider, model string
		u               *session.Usage
		unpriced        string
		why             string
	}{
		{"a model the table lacks", Default(), "openai", "gpt-9", usage(10, 1, 0, 0), "openai/gpt-9", "no price"},
		{"a model of another provider", Default(), "anthropic", "gpt-4o", usage(10, 1, 0, 0), "anthropic/gpt-4o", "no price"},
		{"no model recorded", Default(), "anthropic", "", usage(10, 1, 0, 0), "(no model recorded)", "no price"},
		{"no provider, two providers list the model", ambiguous, "", "m", usage(10, 1, 0, 0), "m", "no price"},
		{"a nil table", nil, "openai", "gpt-4o", usage(10, 1, 0, 0), "openai/gpt-4o", "no price"},
		{"cache reads without a cache-read price", Default(), "openai", "gpt-3.5-turbo", usage(10, 1, 0, 5), "openai/gpt-3.5-turbo", "no cache-read price"},
		{"cache writes without a cache-write price", New(map[Key]Price{{"anthropic", "x"}: {Input: 1, Output: 1, CacheWrite: None, CacheRead: 1}}), "anthropic", "x", usage(10, 1, 5, 0), "anthropic/x", "no cache-write price"},
		{"cache counts above the input", Default(), "anthropic", "claude-sonnet-4-5", usage(10, 1, 6, 5), "anthropic/claude-sonnet-4-5", "of only 10 input tokens"},
		{"a cache-read count above the input", Default(), "anthropic", "claude-sonnet-4-5", usage(10, 1, 0, 11), "anthropic/claude-sonnet-4-5", "of only 10 input tokens"},
		{"a negative count", Default(), "anthropic", "claude-sonnet-4-5", usage(10, -1, 0, 0), "anthropic/claude-sonnet-4-5", "negative"},
		{"a negative stated cost", Default(), "anthropic", "claude-sonnet-4-5", &session.Usage{InputTokens: 1, CostMicroUSD: -5}, "anthropic/claude-sonnet-4-5", "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.table.Call(tc.provider, tc.model, tc.u)
			if got, ok := c.MicroUSD(); ok {
				t.Fatalf("cost %d known, want unknown", got)
			}
			if diff := cmp.Diff([]string{tc.unpriced}, c.Unpriced()); diff != "" {
				t.Errorf("unpriced models (-want +got):\n%s", diff)
			}
			if !strings.Contains(c.Reason(), tc.why) {
				t.Errorf("reason %q does not say %q", c.Reason(), tc.why)
			}
		})
	}
}

// TestCostAddsExactlyAndStaysUnknown: a sum rounds once, one unpriced call makes the total unknown,
// the unpriced list is sorted and bounded, and an overflow is unknown rather than wrapped.
func TestCostAddsExactlyAndStaysUnknown(t *testing.T) {
	table := Default()
	var c Cost
	for range 1000 {
		c.Add(table.Call("openai", "gpt-5-nano", usage(1, 0, 0, 0))) // 0.05 micro-dollars each
	}
	if got, ok := c.MicroUSD(); !ok || got != 50 {
		t.Errorf("1000 calls of 0.05 micro-dollars cost %d (known %v), want 50", got, ok)
	}
	c.Add(table.Call("openai", "gpt-9", usage(1, 0, 0, 0)))
	c.Add(table.Call("anthropic", "claude-x", usage(1, 0, 0, 0)))
	c.Add(table.Call("openai", "gpt-9", usage(5, 0, 0, 0)))
	if _, ok := c.MicroUSD(); ok {
		t.Errorf("a total with unpriced calls is known")
	}
	if diff := cmp.Diff([]string{"anthropic/claude-x", "openai/gpt-9"}, c.Unpriced()); diff != "" {
		t.Errorf("unpriced (-want +got):\n%s", diff)
	}

	var many Cost
	for i := range 40 {
		many.Add(table.Call("openai", fmt.Sprintf("m%02d", i), usage(1, 0, 0, 0)))
	}
	if n := len(many.Unpriced()); n != maxMisses || !strings.Contains(many.Reason(), "and 24 more models") {
		t.Errorf("40 unpriced models list %d and say %q", n, many.Reason())
	}

	huge := table.Call("anthropic", "claude-opus-4-1", usage(math.MaxInt64, math.MaxInt64, 0, 0))
	if _, ok := huge.MicroUSD(); ok || !strings.Contains(huge.Reason(), "beyond") {
		t.Errorf("an overflowing cost is %q, want unknown", huge.Reason())
	}
	var sum Cost
	big := table.Call("anthropic", "claude-opus-4-1", usage(0, math.MaxInt64/100_000_000, 0, 0))
	for range 3 {
		sum.Add(big)
	}
	if _, ok := sum.MicroUSD(); ok {
		t.Errorf("a sum past 64 bits is known")
	}
}

// TestLinesPriceLikeTheirEvents: pricing a run's lines (what a Job's result carries) gives what
// pricing its events one by one gives, for random runs of priced, unpriced, stated and invalid calls.
func TestLinesPriceLikeTheirEvents(t *testing.T) {
	table := Default()
	models := []struct{ provider, model string }{
		{"anthropic", "claude-sonnet-4-5"}, {"anthropic", "claude-sonnet-4-5-20250929"}, {"openai", "gpt-4o"},
		{"openai-responses", "gpt-4o"}, {"openai", "gpt-9"}, {"", "o3"}, {"anthropic", ""}, {"openai", "gpt-3.5-turbo"},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for run := range 300 {
		var events []session.Event
		for i := range r.IntN(30) {
			m := models[r.IntN(len(models))]
			ev := session.Event{Step: int64(i), Kind: session.KindModelCall, Provider: m.provider, Request: &session.Request{Model: m.model}}
			in := r.Int64N(5000)
			ev.Usage = usage(in, r.Int64N(900), r.Int64N(in/2+1), r.Int64N(in/2+1))
			switch r.IntN(10) {
			case 0:
				ev.Usage = nil
			case 1:
				ev.Usage.CostMicroUSD = 1 + r.Int64N(500)
			case 2:
				ev.Usage.CacheReadInputTokens = in + 1 // invalid
			case 3:
				ev.Kind = session.KindToolCall
			}
			events = append(events, ev)
		}
		want := table.Events(events, nil)
		lines := Lines(events, nil)
		// Through JSON, as a result carries them.
		doc, err := json.Marshal(lines)
		if err != nil {
			t.Fatal(err)
		}
		var back []Line
		if err := json.Unmarshal(doc, &back); err != nil {
			t.Fatal(err)
		}
		got := table.Lines(back)
		wv, wk := want.MicroUSD()
		gv, gk := got.MicroUSD()
		if wv != gv || wk != gk || !cmp.Equal(want.Unpriced(), got.Unpriced()) {
			t.Fatalf("run %d: lines price to %d (known %v, unpriced %v), events to %d (known %v, unpriced %v)\n%s",
				run, gv, gk, got.Unpriced(), wv, wk, want.Unpriced(), doc)
		}
	}
}

// TestLinesBoundTheModels: past MaxLines models the rest go into one Other line, which is unpriced.
func TestLinesBoundTheModels(t *testing.T) {
	var events []session.Event
	for i := range MaxLines + 10 {
		events = append(events, session.Event{Kind: session.KindModelCall, Provider: "openai", Request: &session.Request{Model: fmt.Sprintf("m%03d", i)}, Usage: usage(1, 1, 0, 0)})
	}
	lines := Lines(events, nil)
	if len(lines) != MaxLines+1 || !lines[MaxLines].Other || lines[MaxLines].Calls != 10 {
		t.Fatalf("%d lines, the last %+v", len(lines), lines[len(lines)-1])
	}
	table := Default().With(map[Key]Price{})
	for i := range MaxLines + 10 {
		table = table.With(map[Key]Price{{"openai", fmt.Sprintf("m%03d", i)}: {Input: 1, Output: 1}})
	}
	c := table.Lines(lines)
	if diff := cmp.Diff([]string{"(other models)"}, c.Unpriced()); diff != "" {
		t.Errorf("unpriced (-want +got):\n%s", diff)
	}
}

// TestLinesKeepWhatTheyAreAsked: only the model calls keep accepts are added up.
func TestLinesKeepWhatTheyAreAsked(t *testing.T) {
	events := []session.Event{
		{Kind: session.KindModelCall, Provider: "openai", Request: &session.Request{Model: "gpt-4o"}, Usage: usage(1_000_000, 0, 0, 0), Provenance: session.ProvenanceLive},
		{Kind: session.KindModelCall, Provider: "openai", Request: &session.Request{Model: "gpt-4o"}, Usage: usage(2_000_000, 0, 0, 0), Provenance: session.ProvenanceRecorded},
	}
	live := func(ev *session.Event) bool { return ev.Provenance == session.ProvenanceLive }
	want := []Line{{Provider: "openai", Model: "gpt-4o", Calls: 1, Usage: *usage(1_000_000, 0, 0, 0)}}
	if diff := cmp.Diff(want, Lines(events, live)); diff != "" {
		t.Errorf("live lines (-want +got):\n%s", diff)
	}
	if got, _ := Default().Events(events, live).MicroUSD(); got != 2_500_000 {
		t.Errorf("live cost %d, want 2500000", got)
	}
}

// TestDefaultPricesTheModelsTheRepositoryMentions: the built-in table prices the real models the
// examples, tests and docs use, and every price in it is whole.
func TestDefaultPricesTheModelsTheRepositoryMentions(t *testing.T) {
	table := Default()
	for _, k := range []Key{
		{"anthropic", "claude-sonnet-4-5"}, {"anthropic", "claude-sonnet-4-5-20250929"}, {"anthropic", "claude-opus-4-1"}, {"anthropic", "claude-haiku-4-5"},
		{"openai", "gpt-4o"}, {"openai", "gpt-4o-2024-08-06"}, {"openai", "gpt-4o-mini"}, {"openai", "gpt-4.1-2025-04-14"},
		{"openai", "o1"}, {"openai", "o3"}, {"openai", "gpt-3.5-turbo"},
	} {
		if _, _, ok := table.Lookup(k.Provider, k.Model); !ok {
			t.Errorf("no price for %s", k)
		}
	}
	for _, k := range table.Keys() {
		p, _, _ := table.Lookup(k.Provider, k.Model)
		if p.Input <= 0 || p.Output <= 0 || p.CacheWrite < None || p.CacheRead < None || p.Output < p.Input {
			t.Errorf("%s: %+v", k, p)
		}
		// Claude 3 Haiku's cache rates were set apart from the rule the later models follow.
		if k.Provider == "anthropic" && k.Model != "claude-3-haiku" && (p.CacheWrite != p.Input*5/4 || p.CacheRead != p.Input/10) {
			t.Errorf("%s: cache rates %+v are not 1.25x and 0.1x the input rate", k, p)
		}
	}
	for _, name := range []string{"fake-1", "claude-test", "gpt-test"} {
		if _, _, ok := table.Lookup("", name); ok {
			t.Errorf("the test model %s has a price", name)
		}
	}
}

func TestParseReadsAPriceFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want map[Key]Price
	}{
		{"yaml", `
anthropic:
  claude-sonnet-4-5: {input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.30}
openai:
  gpt-4o: {input: 2.50, output: "10", cacheRead: "1.25"}
  my-gpt: {input: 0.000001, output: 1e-2}
`, map[Key]Price{
			{"anthropic", "claude-sonnet-4-5"}: {Input: 3_000_000, Output: 15_000_000, CacheWrite: 3_750_000, CacheRead: 300_000},
			// An OpenAI cache write is billed as input.
			{"openai", "gpt-4o"}: {Input: 2_500_000, Output: 10_000_000, CacheWrite: 2_500_000, CacheRead: 1_250_000},
			{"openai", "my-gpt"}: {Input: 1, Output: 10_000, CacheWrite: 1, CacheRead: None},
		}},
		{"json", `{"acme":{"m-1":{"input":"1","output":"2"}}}`, map[Key]Price{{"acme", "m-1"}: {Input: 1_000_000, Output: 2_000_000, CacheWrite: None, CacheRead: None}}},
		{"empty", ``, map[Key]Price{}},
		{"empty map", `{}`, map[Key]Price{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseRefusesNamingTheField: every bad price file is refused with the field it is about.
func TestParseRefusesNamingTheField(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`openai: {gpt-4o: {input: 2.5}}`, "openai.gpt-4o.output: required"},
		{`openai: {gpt-4o: {input: 2.5, output: 10, inptu: 3}}`, "openai.gpt-4o.inptu: not a price"},
		{`openai: {gpt-4o: {input: 0.0000001, output: 10}}`, "openai.gpt-4o.input: 1e-7 has more than six decimals"},
		{`openai: {gpt-4o: {input: -1, output: 10}}`, "openai.gpt-4o.input: -1 is negative"},
		{`openai: {gpt-4o: {input: "1e400", output: 10}}`, `openai.gpt-4o.input: "1e400" is not a decimal`},
		{`openai: {gpt-4o: {input: "0x10", output: 10}}`, `openai.gpt-4o.input: "0x10" is not a decimal`},
		{`openai: {gpt-4o: {input: "1/3", output: 10}}`, `openai.gpt-4o.input: "1/3" is not a decimal`},
		{`openai: {gpt-4o: {input: true, output: 10}}`, "openai.gpt-4o.input: true is not a number"},
		{`openai: {gpt-4o: {input: 2000000, output: 10}}`, "more than $1,000,000 per million tokens"},
		{`OpenAI: {gpt-4o: {input: 1, output: 10}}`, `"OpenAI": a provider is lower-case`},
		{`openai: {" gpt": {input: 1, output: 10}}`, `openai." gpt": a model is`},
		{`openai: [gpt-4o]`, "want provider: {model: {input: …, output: …}}"},
		{`openai: {gpt-4o: 3}`, "want provider: {model: {input: …, output: …}}"},
		{"openai: {gpt-4o: {input: 1\n", "price file:"},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestParseFlag(t *testing.T) {
	for _, tc := range []struct {
		flag string
		key  Key
		want Price
		err  string
	}{
		{flag: "anthropic/claude-sonnet-4-5=3,15,3.75,0.30", key: Key{"anthropic", "claude-sonnet-4-5"}, want: Price{Input: 3_000_000, Output: 15_000_000, CacheWrite: 3_750_000, CacheRead: 300_000}},
		{flag: "openai/gpt-4o=2.5,10,,1.25", key: Key{"openai", "gpt-4o"}, want: Price{Input: 2_500_000, Output: 10_000_000, CacheWrite: 2_500_000, CacheRead: 1_250_000}},
		{flag: "acme/org/model=1,2", key: Key{"acme", "org/model"}, want: Price{Input: 1_000_000, Output: 2_000_000, CacheWrite: None, CacheRead: None}},
		{flag: "gpt-4o=1,2", err: "want provider/model=input,output"},
		{flag: "openai/gpt-4o", err: "want provider/model=input,output"},
		{flag: "openai/gpt-4o=1", err: "1 prices"},
		{flag: "openai/gpt-4o=1,2,3,4,5", err: "5 prices"},
		{flag: "openai/gpt-4o=1,x", err: `openai/gpt-4o.output: "x" is not a decimal`},
		{flag: "openai/gpt-4o=,2", err: `openai/gpt-4o.input: "" is not a decimal`},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			key, p, err := ParseFlag(tc.flag)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || key != tc.key || p != tc.want {
				t.Errorf("%v %+v %v, want %v %+v", key, p, err, tc.key, tc.want)
			}
		})
	}
}

// TestWithOverridesAndAdds: an override replaces the built-in price of its model alone, and a new
// model is added; the table it came from is unchanged.
func TestWithOverridesAndAdds(t *testing.T) {
	base := Default()
	table := base.With(map[Key]Price{{"openai", "gpt-4o"}: {Input: 1, Output: 2, CacheWrite: 1, CacheRead: None}, {"acme", "m"}: {Input: 7, Output: 7}})
	if p, _, _ := table.Lookup("openai", "gpt-4o"); p.Input != 1 {
		t.Errorf("override not applied: %+v", p)
	}
	if p, _, _ := base.Lookup("openai", "gpt-4o"); p.Input != 2_500_000 {
		t.Errorf("the base table changed: %+v", p)
	}
	if _, _, ok := table.Lookup("acme", "m"); !ok {
		t.Errorf("an added model is missing")
	}
	if _, _, ok := table.Lookup("anthropic", "claude-haiku-4-5"); !ok {
		t.Errorf("a model not overridden is missing")
	}
}
