package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	oaiopt "github.com/openai/openai-go/v3/option"

	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// openaiUpstream answers every chat completion with the same text, as JSON or as a stream.
func openaiUpstream(t *testing.T, calls *atomic.Int64) string {
	completion := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Bonjour, Paris.","refusal":null},"finish_reason":"stop","logprobs":null}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+canary {
			http.Error(w, "wrong path or key", http.StatusBadRequest)
			return
		}
		req, err := openai.Codec{}.NormalizeRequest(body)
		if err != nil || !streaming(req) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(completion)
			return
		}
		resp, _ := openai.Codec{}.NormalizeResponse(completion)
		chunks, err := openai.Codec{}.SynthesizeStream(resp)
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(openai.Codec{}.RebuildStream(chunks))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func chatAgent(t *testing.T, r *running) []string {
	t.Helper()
	c := oai.NewClient(oaiopt.WithBaseURL(r.url+"/v1"), oaiopt.WithAPIKey("placeholder-key"), oaiopt.WithMaxRetries(0))
	params := oai.ChatCompletionNewParams{Model: "gpt-test", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Greet Paris")}}
	got, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{view(t, got)}
	s := c.Chat.Completions.NewStreaming(t.Context(), params)
	var acc oai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
		out = append(out, view(t, s.Current()))
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "Bonjour, Paris." {
		t.Fatalf("accumulated %q", acc.Choices[0].Message.Content)
	}
	return append(out, view(t, acc.ChatCompletion))
}

func TestOpenAIChatCompletionsRecordAndReplayThroughTheSDK(t *testing.T) {
	root := t.TempDir()
	var calls atomic.Int64
	rec := start(t, Options{Mode: Record, Provider: "openai", Dir: filepath.Join(root, "run"), ID: "run",
		Upstreams: map[string]string{"openai": openaiUpstream(t, &calls)}, APIKeys: map[string]string{"openai": canary}})
	recorded := chatAgent(t, rec)
	if out := rec.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	if calls.Load() != 2 || !strings.Contains(recorded[0], "Bonjour, Paris.") {
		t.Fatalf("upstream calls %d, first answer %s", calls.Load(), recorded[0])
	}
	s := openSession(t, filepath.Join(root, "run"))
	if s.Meta.Provider != "openai" || len(eventsOf(s, session.KindModelCall)) != 2 {
		t.Fatalf("session provider %q", s.Meta.Provider)
	}
	rep := start(t, Options{Mode: Replay, Session: s})
	replayed := chatAgent(t, rep)
	if out := rep.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	if calls.Load() != 2 {
		t.Fatal("the replay went upstream")
	}
	if diff := cmp.Diff(recorded, replayed); diff != "" {
		t.Fatalf("the SDK decoded a different replay:\n%s", diff)
	}
	assertNoCanary(t, root)
}
