package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"gopkg.in/dnaeon/go-vcr.v4/pkg/cassette"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// benchRequest is the i-th model request of a long agent run: a system prompt, a short conversation
// and parameters, distinct per call.
func benchRequest(i int) session.Request {
	return session.Request{Model: "claude-sonnet-4-5", System: "You are a coding agent. Keep changes small and run the tests.",
		Messages: []session.Message{userMessage("Fix the failing test in pkg/store"),
			{Role: "assistant", Content: json.RawMessage(`[{"type":"text","text":"Reading the test."}]`)},
			userMessage(fmt.Sprintf("Tool result %d: ok", i))},
		Params: map[string]json.RawMessage{"max_tokens": json.RawMessage("1024"), "temperature": json.RawMessage("0.2")}}
}

const benchAnswer = `[{"type":"text","text":"Next I will run go test ./pkg/store."}]`

type constModel struct{}

func (constModel) Create(context.Context, session.Request) (*session.Response, error) {
	return &session.Response{Content: json.RawMessage(benchAnswer), Usage: &session.Usage{InputTokens: 900, OutputTokens: 20}}, nil
}

func benchHarness(n int) Harness {
	return func(ctx context.Context, ac AgentContext) error {
		for i := 0; i < n; i++ {
			if _, err := ac.Model(ctx, benchRequest(i), Site("step")); err != nil {
				return err
			}
		}
		return nil
	}
}

// BenchmarkReplay replays n recorded model calls through the matcher (agentrewind: fingerprint each
// live request, look it up, restore the answer) and through go-vcr (match each HTTP request against the
// cassette with its default matcher), at 1k and 10k calls so the scaling shows. Compare side by side.
func BenchmarkReplay(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		dir := filepath.Join(b.TempDir(), "bench")
		if _, err := Record(context.Background(), RecordOptions{Dir: dir, Model: constModel{}}, benchHarness(n)); err != nil {
			b.Fatal(err)
		}
		s, err := session.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("agentrewind/%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := Replay(context.Background(), ReplayOptions{Session: s}, benchHarness(n)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})

		bodies := make([][]byte, n)
		for i := range bodies {
			bodies[i], _ = json.Marshal(benchRequest(i))
		}
		b.Run(fmt.Sprintf("go-vcr/%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				c := cassette.New("bench")
				for _, body := range bodies {
					c.AddInteraction(&cassette.Interaction{
						Request: cassette.Request{Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Method: http.MethodPost, URL: "https://llm.invalid/v1/messages", Host: "llm.invalid",
							Body: string(body), ContentLength: int64(len(body)), Headers: http.Header{"Content-Type": {"application/json"}}},
						Response: cassette.Response{Code: 200, Status: "200 OK", Body: benchAnswer, Headers: http.Header{"Content-Type": {"application/json"}}},
					})
				}
				b.StartTimer()
				for _, body := range bodies {
					req, _ := http.NewRequest(http.MethodPost, "https://llm.invalid/v1/messages", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					interaction, err := c.GetInteraction(req)
					if err != nil {
						b.Fatal(err)
					}
					resp, err := interaction.GetHTTPResponse()
					if err != nil {
						b.Fatal(err)
					}
					var out session.Response
					data, _ := io.ReadAll(resp.Body)
					if err := json.Unmarshal([]byte(`{"content":`+string(data)+`}`), &out); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}
