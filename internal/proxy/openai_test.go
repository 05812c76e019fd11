package proxy

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	oaiopt "github.com/openai/openai-go/v3/option"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// greeterScript answers a greeting in French when the system prompt asks for it, in English otherwise.
var greeterScript = mustParse(`
chunkSize: 4
turns:
  - {name: french, when: {system: in French}, text: "Bonjour, Paris.", usage: {outputTokens: 3}}
  - {name: english, text: "Hello, Paris.", usage: {outputTokens: 3}}
`)

// greeting is what the greeter agent was answered: what the SDK decoded, and the text of each call.
type greeting struct {
	Decoded []string
	Texts   []string
}

// chatAgent greets Paris twice through openai-go, once as JSON and once streamed.
func chatAgent(t *testing.T, r *running) greeting {
	t.Helper()
	c := oai.NewClient(oaiopt.WithBaseURL(r.url+"/v1"), oaiopt.WithAPIKey("placeholder-key"), oaiopt.WithMaxRetries(0))
	params := oai.ChatCompletionNewParams{Model: "gpt-test", Messages: []oai.ChatCompletionMessageParamUnion{
		oai.SystemMessage("You are a greeter."), oai.UserMessage("Greet Paris")}}
	got, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	g := greeting{Decoded: []string{view(t, got)}, Texts: []string{got.Choices[0].Message.Content}}
	params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
	s := c.Chat.Completions.NewStreaming(t.Context(), params)
	var acc oai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
		g.Decoded = append(g.Decoded, view(t, s.Current()))
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	g.Decoded = append(g.Decoded, view(t, acc.ChatCompletion))
	g.Texts = append(g.Texts, acc.Choices[0].Message.Content)
	return g
}

// TestOpenAIChatCompletionsRecordReplayAndForkThroughTheSDK records the greeter against the fake
// LLM, replays it with no upstream (the fake's counter does not move), and forks it at the streamed
// call with a system prompt that makes the fake answer in French.
func TestOpenAIChatCompletionsRecordReplayAndForkThroughTheSDK(t *testing.T) {
	root := t.TempDir()
	up := newUpstream(t, greeterScript)
	rec := start(t, Options{Mode: Record, Provider: "openai", Dir: filepath.Join(root, "run"), ID: "run",
		Upstreams: map[string]string{"openai": up.url}, APIKeys: map[string]string{"openai": canary}})
	recorded := chatAgent(t, rec)
	if out := rec.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	if diff := cmp.Diff([]string{"Hello, Paris.", "Hello, Paris."}, recorded.Texts); diff != "" {
		t.Fatalf("recorded answers (-want +got):\n%s", diff)
	}
	if up.calls() != 2 {
		t.Fatalf("upstream calls = %d, want 2", up.calls())
	}
	for _, k := range up.receivedKeys() {
		if k != canary {
			t.Fatalf("the upstream got key %q, want the proxy's", k)
		}
	}
	s := openSession(t, filepath.Join(root, "run"))
	calls := eventsOf(s, session.KindModelCall)
	if s.Meta.Provider != "openai" || len(calls) != 2 {
		t.Fatalf("session provider %q, %d model calls", s.Meta.Provider, len(calls))
	}

	rep := start(t, Options{Mode: Replay, Session: s})
	replayed := chatAgent(t, rep)
	if out := rep.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	if up.calls() != 2 {
		t.Fatal("the replay went upstream")
	}
	if diff := cmp.Diff(recorded, replayed); diff != "" {
		t.Fatalf("the SDK decoded a different replay:\n%s", diff)
	}

	french := "You are a greeter. Answer in French."
	at := calls[1].Step
	fork := start(t, Options{Mode: Fork, Session: s, Dir: filepath.Join(root, "child"), AtStep: at,
		Overrides: replay.Overrides{System: &french}, Upstreams: map[string]string{"openai": up.url},
		APIKeys: map[string]string{"openai": canary}})
	forked := chatAgent(t, fork)
	out := fork.stop(t)
	if out.Err != nil || out.Fork == nil {
		t.Fatalf("fork: %+v", out)
	}
	if diff := cmp.Diff([]string{"Hello, Paris.", "Bonjour, Paris."}, forked.Texts); diff != "" {
		t.Fatalf("forked answers (-want +got): the prefix is served, the tail answers the override\n%s", diff)
	}
	if up.calls() != 3 {
		t.Fatalf("upstream calls after the fork = %d, want 3 (only the tail)", up.calls())
	}
	child := openSession(t, filepath.Join(root, "child"))
	if child.Meta.Parent != "run" || child.Meta.ForkedAtStep == nil || *child.Meta.ForkedAtStep != at || child.Meta.Provider != "openai" {
		t.Fatalf("child meta %+v, want parent run forked at %d", child.Meta, at)
	}
	if fr := ForkResult("run", at, out.Fork); fr.Provenance.Live != 1 || fr.TokensSpent.OutputTokens != 3 {
		t.Fatalf("fork result %+v", fr)
	}
	assertNoCanary(t, root)
}
