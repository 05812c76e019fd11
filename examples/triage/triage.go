package triage

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// SystemPrompt is the prompt the agent was recorded with.
const SystemPrompt = "You are a triage bot for the editor team. Label each new issue."

// PromptFix is the one-line fix: with it the model asks for an owner review.
const PromptFix = SystemPrompt + " Always check CODEOWNERS before labelling."

// DecideSite is the call site of the labelling decision.
const DecideSite = "decide"

// Goal is what a good run does: ask the code owners to review.
var Goal = replay.Goal{Tool: "add_label", ArgsMatch: json.RawMessage(`{"label":"needs-owner-review"}`)}

// Model is a deterministic stand-in for an LLM: its answer is a function of the prompt, and it reports
// token usage as a provider would. It counts its calls.
type Model struct{ Calls atomic.Int64 }

// Create implements replay.Model.
func (m *Model) Create(_ context.Context, req session.Request) (*session.Response, error) {
	m.Calls.Add(1)
	text := m.answer(req)
	content, _ := json.Marshal([]map[string]string{{"type": "text", "text": text}})
	return &session.Response{Content: content, StopReason: "end_turn",
		Usage: &session.Usage{InputTokens: int64(len(req.System)/4 + 40*len(req.Messages)), OutputTokens: int64(len(text) / 4), CostMicroUSD: 150}}, nil
}

func (m *Model) answer(req session.Request) string {
	var last string
	if n := len(req.Messages); n > 0 {
		_ = json.Unmarshal(req.Messages[n-1].Content, &last)
	}
	switch {
	case strings.HasPrefix(last, "New issue"):
		return "search: editor crash on save"
	case strings.HasPrefix(last, "Search results") && strings.Contains(req.System, "CODEOWNERS"):
		return "label: needs-owner-review"
	case strings.HasPrefix(last, "Search results"):
		return "label: bug"
	}
	return "done"
}

// Tools are the tracker's tools. Labels applied are collected so a caller can see what the agent did.
func Tools(applied *[]string) map[string]replay.Tool {
	return map[string]replay.Tool{
		"search_issues": func(_ context.Context, _ json.RawMessage) (any, error) {
			return []string{"#812 crash on save with unsaved buffers (closed, owner: @editor-core)"}, nil
		},
		"add_label": func(_ context.Context, args json.RawMessage) (any, error) {
			var a struct{ Label string }
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
			*applied = append(*applied, a.Label)
			return map[string]bool{"ok": true}, nil
		},
	}
}

// Agent is the triage agent with the given system prompt.
func Agent(system string) replay.Harness {
	return func(ctx context.Context, ac replay.AgentContext) error {
		id, err := ac.UUID(ctx)
		if err != nil {
			return err
		}
		now, err := ac.Clock(ctx)
		if err != nil {
			return err
		}
		req := session.Request{Model: "claude-sonnet-4-5", System: system,
			Messages: []session.Message{text("user", fmt.Sprintf("New issue %s (%s): the editor crashes when saving", id, now.Format("2006-01-02")))},
			Params:   map[string]json.RawMessage{"max_tokens": json.RawMessage("512")}}
		resp, err := ac.Model(ctx, req, replay.Site("plan"))
		if err != nil {
			return err
		}
		results, err := ac.Tool(ctx, "search_issues", map[string]string{"q": strings.TrimPrefix(answer(resp), "search: ")}, replay.Site("search"))
		if err != nil {
			return err
		}
		req.Messages = append(req.Messages, session.Message{Role: "assistant", Content: resp.Content}, text("user", "Search results: "+string(results)))
		if resp, err = ac.Model(ctx, req, replay.Site(DecideSite)); err != nil {
			return err
		}
		_, err = ac.Tool(ctx, "add_label", map[string]string{"issue": id, "label": strings.TrimPrefix(answer(resp), "label: ")}, replay.Site("label"))
		return err
	}
}

func text(role, s string) session.Message {
	b, _ := json.Marshal(s)
	return session.Message{Role: role, Content: b}
}

func answer(resp *session.Response) string {
	var blocks []struct{ Text string }
	if json.Unmarshal(resp.Content, &blocks) != nil || len(blocks) == 0 {
		return ""
	}
	return blocks[0].Text
}

// DecisionStep finds the step of the labelling decision in a recording.
func DecisionStep(events []session.Event) (int64, bool) {
	for _, ev := range events {
		if ev.Kind == session.KindModelCall && ev.CallSite == DecideSite {
			return ev.Step, true
		}
	}
	return 0, false
}
