package inspect

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

func TestTokenCountingTiers(t *testing.T) {
	req := &session.Request{Model: "m", System: "12345678", Messages: []session.Message{{Role: "user", Content: json.RawMessage(`"abcd"`)}}}
	exact := &session.Event{Kind: session.KindModelCall, Request: req, Usage: &session.Usage{InputTokens: 42}}
	unmeasured := &session.Event{Kind: session.KindModelCall, Request: req}
	known := func(model, text string) (int, bool) { return len(text), model == "m" }
	cases := []struct {
		name string
		ev   *session.Event
		tok  Tokenizer
		want TokenCount
	}{
		{"recorded usage is exact", exact, known, TokenCount{Tokens: 42}},
		{"a tokenizer that knows the model", unmeasured, known, TokenCount{Tokens: 14}},
		{"characters over four is an estimate", unmeasured, nil, TokenCount{Tokens: 4, Estimate: true}},
		{"a tokenizer that does not know the model falls back", unmeasured, func(string, string) (int, bool) { return 0, false }, TokenCount{Tokens: 4, Estimate: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := CountTokens(tc.ev, tc.tok); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestContextAtAndDiffContext(t *testing.T) {
	msg := func(role, text string) session.Message {
		b, _ := json.Marshal(text)
		return session.Message{Role: role, Content: b}
	}
	events := []session.Event{
		{Step: 0, Kind: session.KindSessionStart},
		{Step: 1, Kind: session.KindModelCall, Request: &session.Request{Messages: []session.Message{msg("user", "a"), msg("user", "b")}}, Usage: &session.Usage{InputTokens: 10}},
		{Step: 2, Kind: session.KindToolCall},
		// The same first message with other formatting is not a change; "b" was dropped, "c" added.
		{Step: 3, Kind: session.KindModelCall, Request: &session.Request{Messages: []session.Message{{Role: "user", Content: json.RawMessage(` "a" `)}, msg("user", "c")}}},
	}
	got, err := ContextAt(events, 3)
	if err != nil || len(got) != 2 {
		t.Fatalf("ContextAt(3) = %v, %v", got, err)
	}
	var se *StepError
	if _, err := ContextAt(events, 2); !errors.As(err, &se) || se.Got != session.KindToolCall {
		t.Fatalf("ContextAt(2): %v", err)
	}
	if _, err := ContextAt(events, 9); !errors.As(err, &se) || se.Got != "" {
		t.Fatalf("ContextAt(9): %v", err)
	}
	d, err := DiffContext(events, 1, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Added) != 1 || string(d.Added[0].Content) != `"c"` || len(d.Removed) != 1 || string(d.Removed[0].Content) != `"b"` {
		t.Fatalf("diff added %v removed %v", d.Added, d.Removed)
	}
	// Step 1 is exact (10) and step 3 estimated (ceil(len(` "a" "c"`)/4) = 2): the delta is an estimate.
	if d.TokenDelta != -8 || !d.TokenDeltaIsEstimate {
		t.Fatalf("token delta %d estimate %v", d.TokenDelta, d.TokenDeltaIsEstimate)
	}
}
