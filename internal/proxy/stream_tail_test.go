package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	oaiopt "github.com/openai/openai-go/v3/option"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestAStreamTheAgentClosesAfterItsLastEventIsRecordedWhole: the OpenAI SDK closes the response at
// [DONE], while the upstream may keep the connection open a moment longer before its body ends. The
// answer was complete when the agent hung up, so the recording holds it whole, with its usage; a
// client that leaves after the terminal event must not turn a finished answer into a cut one.
func TestAStreamTheAgentClosesAfterItsLastEventIsRecordedWhole(t *testing.T) {
	lingering := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, data := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`,
			`[DONE]`,
		} {
			_, _ = io.WriteString(w, "data: "+data+"\n\n")
		}
		w.(http.Flusher).Flush()
		select { // the body ends well after the agent has left
		case <-r.Context().Done():
		case <-time.After(300 * time.Millisecond):
		}
	}))
	t.Cleanup(lingering.Close)

	dir := filepath.Join(t.TempDir(), "run")
	rec := start(t, Options{Mode: Record, Provider: "openai", Dir: dir, ID: "run",
		Upstreams: map[string]string{"openai": lingering.URL}, APIKeys: map[string]string{"openai": canary}})
	c := oai.NewClient(oaiopt.WithBaseURL(rec.url+"/v1"), oaiopt.WithAPIKey("placeholder-key"), oaiopt.WithMaxRetries(0))
	s := c.Chat.Completions.NewStreaming(t.Context(), oai.ChatCompletionNewParams{Model: "gpt-test",
		Messages:      []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Greet")},
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}})
	var acc oai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	_ = s.Close() // the agent hangs up at [DONE]
	if out := rec.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	calls := eventsOf(openSession(t, dir), session.KindModelCall)
	if len(calls) != 1 {
		t.Fatalf("%d model calls recorded, want 1", len(calls))
	}
	ev := calls[0]
	if ev.Error != nil || ev.Usage == nil || ev.Usage.OutputTokens != 3 {
		t.Fatalf("the finished answer was recorded as error %+v, usage %+v; want no error and 3 output tokens", ev.Error, ev.Usage)
	}
}
