// Package sdkagent is an agent in its own Go module that records, replays and forks itself in-process
// through agentrewind's public SDK (github.com/agentrewind/agentrewind/pkg/rewind): the proof that a Go
// agent outside this repository needs nothing internal.
package sdkagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentrewind/agentrewind/pkg/rewind"
)

// Agent asks the model for a greeting in the given tone, looks the user up with a tool, and sends the
// greeting with a second tool call.
func Agent(system string) rewind.Harness {
	return func(ctx context.Context, ac rewind.AgentContext) error {
		id, err := ac.UUID(ctx)
		if err != nil {
			return err
		}
		user, err := ac.Tool(ctx, "lookup_user", map[string]string{"request": id}, rewind.Site("lookup"))
		if err != nil {
			return err
		}
		resp, err := ac.Model(ctx, rewind.Request{Model: "m", System: system,
			Messages: []rewind.Message{{Role: "user", Content: mustJSON("greet " + string(user))}}}, rewind.Site("greet"))
		if err != nil {
			return err
		}
		var text string
		_ = json.Unmarshal(resp.Content, &text)
		_, err = ac.Tool(ctx, "send", map[string]string{"text": text}, rewind.Site("send"))
		return err
	}
}

// Model is a scripted model: it answers in the tone its system prompt asks for.
type Model struct{ Calls int }

// Create implements rewind.Model.
func (m *Model) Create(_ context.Context, req rewind.Request) (*rewind.Response, error) {
	m.Calls++
	tone := "Hello"
	if strings.Contains(req.System, "warm") {
		tone = "Welcome back, friend"
	}
	return &rewind.Response{Content: mustJSON(tone), StopReason: "end_turn", Usage: &rewind.Usage{InputTokens: 12, OutputTokens: 3}}, nil
}

// Tools are the agent's live tools.
func Tools() map[string]rewind.Tool {
	return map[string]rewind.Tool{
		"lookup_user": func(context.Context, json.RawMessage) (any, error) { return "ada", nil },
		"send":        func(_ context.Context, args json.RawMessage) (any, error) { return fmt.Sprintf("sent %s", args), nil },
	}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
