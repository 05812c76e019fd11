package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// fakeModel is a deterministic model: its answer is a function of the request, and it counts calls so
// a test can prove a replay made none.
type fakeModel struct {
	calls  atomic.Int64
	answer func(req session.Request) string
}

func (m *fakeModel) Create(_ context.Context, req session.Request) (*session.Response, error) {
	m.calls.Add(1)
	text := m.answer(req)
	return &session.Response{
		Content:    json.RawMessage(fmt.Sprintf(`[{"type":"text","text":%q}]`, text)),
		StopReason: "end_turn",
		Usage:      &session.Usage{InputTokens: int64(len(req.System) + len(req.Messages)*10), OutputTokens: int64(len(text)), CostMicroUSD: 7},
	}, nil
}

// Stream answers in three-character chunks.
func (m *fakeModel) Stream(ctx context.Context, req session.Request, emit func(json.RawMessage) error) (*session.Response, error) {
	resp, err := m.Create(ctx, req)
	if err != nil {
		return nil, err
	}
	text := m.answer(req)
	for i := 0; i < len(text); i += 3 {
		chunk, _ := json.Marshal(map[string]string{"delta": text[i:min(i+3, len(text))]})
		if err := emit(chunk); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// textOf returns the text of a fake response.
func textOf(resp *session.Response) string {
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(resp.Content, &blocks)
	if len(blocks) == 0 {
		return ""
	}
	return blocks[0].Text
}

func userMessage(text string) session.Message {
	b, _ := json.Marshal(text)
	return session.Message{Role: "user", Content: b}
}

func lastUser(req session.Request) string {
	if len(req.Messages) == 0 {
		return ""
	}
	var s string
	_ = json.Unmarshal(req.Messages[len(req.Messages)-1].Content, &s)
	return s
}

// fakeClock is a deterministic clock that advances a millisecond per reading.
type fakeClock struct{ now atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.now.Store(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC).UnixMilli())
	return c
}

func (c *fakeClock) Now() time.Time { return time.UnixMilli(c.now.Add(1)) }

// liveEntropy returns a config whose live entropy differs on every call, so a replay that did not use
// the recorded values would be caught.
func liveEntropy() Config {
	var n atomic.Int64
	clock := newFakeClock()
	return Config{
		Now:     clock.Now,
		Random:  func() float64 { return float64(n.Add(1)) / 1000 },
		NewUUID: func() string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n.Add(1)) },
	}
}

// counter counts how often tools ran.
type counter struct{ n atomic.Int64 }

func (c *counter) tool(result func(args json.RawMessage) any) Tool {
	return func(_ context.Context, args json.RawMessage) (any, error) {
		c.n.Add(1)
		return result(args), nil
	}
}

// triageModel is the sample agent's model: it labels an issue "bug" unless its system prompt tells it
// to check code owners first, in which case it asks for an owner review.
func triageModel() *fakeModel {
	return &fakeModel{answer: func(req session.Request) string {
		user := lastUser(req)
		switch {
		case strings.HasPrefix(user, "Issue"):
			return "search: crash on save"
		case strings.HasPrefix(user, "Search results"):
			if strings.Contains(req.System, "CODEOWNERS") {
				return "label: needs-owner-review"
			}
			return "label: bug"
		default:
			return "done"
		}
	}}
}

// triageAgent is the sample agent: draw an id, ask the model, search, ask again, label the issue.
func triageAgent(system string) Harness {
	return func(ctx context.Context, ac AgentContext) error {
		id, err := ac.UUID(ctx)
		if err != nil {
			return err
		}
		if _, err := ac.Clock(ctx); err != nil {
			return err
		}
		req := session.Request{Model: "fake-1", System: system, Messages: []session.Message{userMessage("Issue " + id + ": the editor crashes when saving")},
			Params: map[string]json.RawMessage{"max_tokens": json.RawMessage("256")}}
		resp, err := ac.Model(ctx, req, Site("plan"))
		if err != nil {
			return err
		}
		query := strings.TrimPrefix(textOf(resp), "search: ")
		results, err := ac.Tool(ctx, "search_issues", map[string]string{"q": query})
		if err != nil {
			return err
		}
		req.Messages = append(req.Messages, session.Message{Role: "assistant", Content: resp.Content}, userMessage("Search results: "+string(results)))
		resp, err = ac.Model(ctx, req, Site("decide"))
		if err != nil {
			return err
		}
		label := strings.TrimPrefix(textOf(resp), "label: ")
		_, err = ac.Tool(ctx, "add_label", map[string]string{"issue": id, "label": label})
		return err
	}
}

func triageTools(c *counter) map[string]Tool {
	return map[string]Tool{
		"search_issues": c.tool(func(json.RawMessage) any { return []string{"#12 crash on save (closed)"} }),
		"add_label":     c.tool(func(json.RawMessage) any { return map[string]bool{"ok": true} }),
	}
}

// failingTools are live tools by the given names that fail the test if one runs: a replay answers
// every tool call from the recording. With failingModel, it makes a "zero live calls" check able to
// fail.
func failingTools(t *testing.T, names ...string) map[string]Tool {
	tools := map[string]Tool{}
	for _, name := range names {
		tools[name] = func(context.Context, json.RawMessage) (any, error) {
			t.Errorf("the live tool %s ran", name)
			return nil, errors.New("no live tool calls in a replay")
		}
	}
	return tools
}
