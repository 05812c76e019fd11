package ui

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestForkViewMarksDriftOnlyBeforeTheForkPoint: a fork whose served prefix asked something else than
// its parent drifted there; that is Divergence (red on the page), there is no fork point, and the
// rows start at the drift so it is in view.
func TestForkViewMarksDriftOnlyBeforeTheForkPoint(t *testing.T) {
	root := t.TempDir()
	forkTriageDrifted(t, root, "triage-drift", recordTriage(t, root))
	ts := serve(t, root, Options{})
	f := getJSON[ForkView](t, ts, "/api/sessions/triage-drift/fork")
	if f.Divergence == nil || f.Divergence.Step != planStep || f.ForkPoint != nil || f.From != planStep {
		t.Fatalf("fork view of a drifted fork: %+v", f)
	}
	var diverged []int64
	for _, r := range f.Rows {
		if r.Diverged {
			diverged = append(diverged, r.Step)
		}
	}
	if !cmp.Equal(diverged, []int64{planStep}) || f.Rows[0].Step != planStep {
		t.Errorf("drift rows %v, first row %d", diverged, f.Rows[0].Step)
	}
}

func TestChangesOfNamesWhatTheForkChanged(t *testing.T) {
	model := func(m, system string, params map[string]json.RawMessage, msgs ...string) *session.Event {
		req := &session.Request{Model: m, System: system, Params: params}
		for _, s := range msgs {
			req.Messages = append(req.Messages, userText(s))
		}
		return &session.Event{Kind: session.KindModelCall, CallSite: "decide", Request: req}
	}
	tool := func(name, args string) *session.Event {
		return &session.Event{Kind: session.KindToolCall, CallSite: "label", Name: name, Args: json.RawMessage(args)}
	}
	p := map[string]json.RawMessage{"max_tokens": json.RawMessage(`256`), "temperature": json.RawMessage(`0`)}
	for _, tc := range []struct {
		name          string
		parent, child *session.Event
		want          []string
	}{
		{"the system prompt", model("m", "a", p, "hi"), model("m", "b", p, "hi"), []string{"system prompt"}},
		{"the model", model("claude-sonnet-4-5", "a", p, "hi"), model("claude-opus-4-1", "a", p, "hi"), []string{"model claude-sonnet-4-5 → claude-opus-4-1"}},
		{"a parameter, not its spacing", model("m", "a", p, "hi"),
			model("m", "a", map[string]json.RawMessage{"max_tokens": json.RawMessage(` 256 `), "temperature": json.RawMessage(`0.7`), "top_p": json.RawMessage(`1`)}, "hi"),
			[]string{"params.temperature", "params.top_p"}},
		{"the messages", model("m", "a", p, "hi"), model("m", "a", p, "hi", "more"), []string{"messages"}},
		{"a tool's arguments", tool("add_label", `{"label":"bug"}`), tool("add_label", `{"label": "needs-owner-review"}`), []string{"tool arguments"}},
		{"the same arguments spaced otherwise", tool("add_label", `{"label":"bug"}`), tool("add_label", `{ "label" : "bug" }`), []string{}},
		{"another tool", tool("add_label", `{}`), tool("close", `{}`), []string{"tool add_label → close"}},
		{"another kind", model("m", "a", p), tool("close", `{}`), []string{"kind model_call → tool_call"}},
		{"the fork made fewer calls", model("m", "a", p), nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, changesOf(tc.parent, tc.child)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// freeModel answers like triageModel but states no cost: the recording carries tokens only, as the
// proxy records a provider's answer.
type freeModel struct{ triageModel }

func (m *freeModel) Create(ctx context.Context, req session.Request) (*session.Response, error) {
	resp, err := m.triageModel.Create(ctx, req)
	if resp != nil {
		resp.Usage.CostMicroUSD = 0
	}
	return resp, err
}

// TestTimelinePricesEveryModelCall: rows, the step view and the summary show each model call's cost
// at the price table, "unknown" (with the model) for one without a price, never $0, and the prices
// the server is given.
func TestTimelinePricesEveryModelCall(t *testing.T) {
	root := t.TempDir()
	if _, err := replay.Record(context.Background(), replay.RecordOptions{Config: replay.Config{Now: steadyClock()}, Dir: filepath.Join(root, "free"), ID: "free",
		Model: &freeModel{}, Tools: triageTools()}, triageAgent(triageSystem)); err != nil {
		t.Fatal(err)
	}
	parent := recordTriage(t, root)
	forkTriage(t, root, parent)

	ts := serve(t, root, Options{})
	page := getJSON[Page](t, ts, "/api/sessions/free/events")
	for _, r := range page.Rows {
		switch {
		case r.Kind == string(session.KindModelCall) && (r.CostMicroUSD != nil || !strings.Contains(r.CostUnknown, "fake-1: no price")):
			t.Errorf("step %d: cost %v, unknown %q: want unknown for the unpriced fake-1", r.Step, r.CostMicroUSD, r.CostUnknown)
		case r.Kind != string(session.KindModelCall) && (r.CostMicroUSD != nil || r.CostUnknown != ""):
			t.Errorf("step %d (%s) has a cost", r.Step, r.Kind)
		}
	}
	if sum := getJSON[Summary](t, ts, "/api/sessions/free"); sum.Cost.MicroUSD != nil || !strings.Contains(sum.Cost.Unknown, "fake-1") {
		t.Errorf("summary cost %+v, want unknown", sum.Cost)
	}
	if st := getJSON[StepView](t, ts, "/api/sessions/free/steps/7"); st.CostMicroUSD != nil || st.CostUnknown == "" {
		t.Errorf("step view cost %v %q, want unknown", st.CostMicroUSD, st.CostUnknown)
	}

	// Stated costs are taken as stated: the triage model states 130 and 260 micro-dollars; the
	// fork's live decide call 390 (120 tokens in, three messages).
	if sum := getJSON[Summary](t, ts, "/api/sessions/triage"); sum.Cost.MicroUSD == nil || *sum.Cost.MicroUSD != 130+390 {
		t.Errorf("triage cost %+v, want 520", sum.Cost)
	}
	if sum := getJSON[Summary](t, ts, "/api/sessions/triage-fix"); sum.LiveCost == nil || sum.LiveCost.MicroUSD == nil || *sum.LiveCost.MicroUSD != 390 {
		t.Errorf("the fork's live cost %+v, want 390", sum.LiveCost)
	}

	// The server's prices: fake-1 at $1 in and $2 out per million tokens.
	priced := serve(t, root, Options{Prices: price.Default().With(map[price.Key]price.Price{{Provider: "acme", Model: "fake-1"}: {Input: 1_000_000, Output: 2_000_000}})})
	sum := getJSON[Summary](t, priced, "/api/sessions/free")
	// 40 + 120 input and 7 + 7 output tokens: 160 x $1 + 14 x $2 per million.
	if sum.Cost.MicroUSD == nil || *sum.Cost.MicroUSD != 160+28 || sum.Cost.Unknown != "" {
		t.Errorf("priced cost %+v", sum.Cost)
	}
	f := getJSON[ForkView](t, priced, "/api/sessions/triage-fix/fork")
	if c := f.Rows[0].Child; c == nil || c.CostMicroUSD == nil || *c.CostMicroUSD != 390 {
		t.Errorf("the fork view's row costs %+v", f.Rows[0].Child)
	}
}
