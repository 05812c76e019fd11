package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	oaiopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentrewind/agentrewind/internal/engine/inspect"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// endingAfter passes an answer on until its n-th server-sent event, then ends the body cleanly: the
// upstream that closes a stream early without saying why (a gateway's timeout, a crashed worker's
// proxy) rather than dropping the connection.
type endingAfter struct {
	http.ResponseWriter
	n      int
	events int
	done   bool
}

func (e *endingAfter) Write(b []byte) (int, error) {
	if e.done {
		return len(b), nil
	}
	for _, part := range bytes.SplitAfter(b, []byte("\n\n")) {
		if len(part) == 0 {
			continue
		}
		if _, err := e.ResponseWriter.Write(part); err != nil {
			return 0, err
		}
		if bytes.HasSuffix(part, []byte("\n\n")) {
			if e.events++; e.events == e.n {
				e.done = true
				break
			}
		}
	}
	return len(b), nil
}

func (e *endingAfter) Flush() { _ = http.NewResponseController(e.ResponseWriter).Flush() }

// streamAgent streams one answer through a provider's official SDK and returns the events it decoded
// and the error it ended with.
func streamAgent(t *testing.T, provider, base string) ([]string, error) {
	t.Helper()
	var events []string
	switch provider {
	case "anthropic":
		c := sdk.NewClient(option.WithBaseURL(base), option.WithAPIKey("placeholder-key"), option.WithMaxRetries(0))
		s := c.Messages.NewStreaming(t.Context(), sdk.MessageNewParams{Model: "claude-test", MaxTokens: 64,
			Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("tell a long story"))}})
		for s.Next() {
			events = append(events, view(t, s.Current()))
		}
		return events, s.Err()
	case "openai":
		c := oai.NewClient(oaiopt.WithBaseURL(base+"/v1"), oaiopt.WithAPIKey("placeholder-key"), oaiopt.WithMaxRetries(0))
		s := c.Chat.Completions.NewStreaming(t.Context(), oai.ChatCompletionNewParams{Model: "gpt-test",
			Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("tell a long story")}})
		for s.Next() {
			events = append(events, view(t, s.Current()))
		}
		return events, s.Err()
	default:
		c := oai.NewClient(oaiopt.WithBaseURL(base+"/v1"), oaiopt.WithAPIKey("placeholder-key"), oaiopt.WithMaxRetries(0))
		s := c.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: "gpt-test",
			Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("tell a long story")}})
		for s.Next() {
			events = append(events, view(t, s.Current()))
		}
		return events, s.Err()
	}
}

// TestAStreamTheUpstreamCutOffIsRecordedAsTruncatedAndReplayedSo: a stream that ends before its last
// event — its body ended early, or its connection dropped — through each provider's official SDK: the
// agent gets the events that came and then an error, never a clean end it would take for the whole
// answer; the call is recorded as StreamTruncated with those events and the text they assemble to;
// inspect's timeline says so; and a replay serves the same events and ends the same way.
func TestAStreamTheUpstreamCutOffIsRecordedAsTruncatedAndReplayedSo(t *testing.T) {
	script := "chunkSize: 4\nturns:\n- text: \"once upon a time there was a proxy\"\n"
	for _, provider := range []string{"anthropic", "openai", "openai-responses"} {
		for _, how := range []string{"body ended", "connection dropped"} {
			t.Run(provider+"/"+how, func(t *testing.T) {
				s := script
				if how == "connection dropped" {
					s += "  faults: [{kind: cut, cutAfter: 5}]\n"
				}
				f := fakellm.New(mustParse(s))
				up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if how == "body ended" {
						w = &endingAfter{ResponseWriter: w, n: 5}
					}
					f.ServeHTTP(w, r)
				}))
				t.Cleanup(up.Close)
				dir := filepath.Join(t.TempDir(), "run")
				rec := start(t, Options{Mode: Record, Provider: provider, Dir: dir, ID: "run", Upstreams: map[string]string{provider: up.URL}})
				live, liveErr := streamAgent(t, provider, rec.url)
				if out := rec.stop(t); out.Err != nil {
					t.Fatal(out.Err)
				}
				if liveErr == nil || len(live) == 0 {
					t.Fatalf("the agent got %d events and error %v: a cut stream must end in an error after what came", len(live), liveErr)
				}
				calls := eventsOf(openSession(t, dir), session.KindModelCall)
				if len(calls) != 1 {
					t.Fatalf("%d model calls recorded", len(calls))
				}
				ev := calls[0]
				if !ev.Truncated() || !strings.Contains(ev.Error.Message, "cut off after 5 events") || len(ev.Stream) == 0 {
					t.Fatalf("recorded error %+v with %d chunks, want StreamTruncated after 5 events with its chunks", ev.Error, len(ev.Stream))
				}
				if ev.Response == nil || !strings.Contains(string(ev.Response.Content), "once") {
					t.Fatalf("recorded response %+v, want the text the events assemble to", ev.Response)
				}
				if what := inspect.What(&ev); !strings.Contains(what, "stream truncated") {
					t.Fatalf("inspect shows %q for the call, want it marked truncated", what)
				}
				rep := start(t, Options{Mode: Replay, Session: openSession(t, dir)})
				replayed, repErr := streamAgent(t, provider, rep.url)
				out := rep.stop(t)
				if out.Err != nil {
					t.Fatalf("the replay of a truncated call drifted: %v", out.Err)
				}
				if diff := cmp.Diff(live, replayed); diff != "" || repErr == nil {
					t.Fatalf("the replay ended with %v; events (-live +replayed):\n%s", repErr, diff)
				}
			})
		}
	}
}

// TestAStreamWhoseBodyBreaksAfterItsLastEventIsWhole: the upstream sent every event, message_stop
// included, and then its body broke (a Content-Length it did not keep): the answer is recorded whole,
// without an error, and the agent's SDK reads it to its end.
func TestAStreamWhoseBodyBreaksAfterItsLastEventIsWhole(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(hBigSSE)+50))
		_, _ = io.WriteString(w, hBigSSE)
	}))
	t.Cleanup(up.Close)
	dir := filepath.Join(t.TempDir(), "run")
	rec := start(t, Options{Mode: Record, Dir: dir, ID: "run", Upstreams: map[string]string{"anthropic": up.URL}})
	events, err := streamAgent(t, "anthropic", rec.url)
	if out := rec.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	if err != nil || len(events) == 0 {
		t.Fatalf("the agent got %d events and %v", len(events), err)
	}
	ev := eventsOf(openSession(t, dir), session.KindModelCall)[0]
	if ev.Error != nil || ev.Response == nil || ev.Response.StopReason == "" {
		t.Fatalf("recorded error %+v, response %+v: want the whole answer", ev.Error, ev.Response)
	}
}
