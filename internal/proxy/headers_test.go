package proxy

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	oaiopt "github.com/openai/openai-go/v3/option"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// headerTransport keeps the headers of the answers the agent's SDK reads, in order.
type headerTransport struct {
	mu   sync.Mutex
	seen []http.Header
}

func (ht *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		ht.mu.Lock()
		ht.seen = append(ht.seen, resp.Header.Clone())
		ht.mu.Unlock()
	}
	return resp, err
}

// passed are the headers of h the test looks at: what the upstream sets beside its answer.
func passed(h http.Header) map[string]string {
	out := map[string]string{}
	for _, name := range []string{"Request-Id", "X-Request-Id", "Anthropic-Ratelimit-Requests-Remaining", "X-Ratelimit-Remaining-Tokens",
		"Openai-Processing-Ms", "X-Ratelimit-Echo", "X-Should-Retry", "Retry-After-Ms", "Set-Cookie", "X-Internal-Route", "X-Ratelimit-Hop", "Keep-Alive"} {
		if v := h.Get(name); v != "" {
			out[name] = v
		}
	}
	return out
}

// TestTheAnswerHeadersSDKsReadArePassedRecordedAndReplayed: the upstream's request id, rate-limit
// headers, processing time and retry advice reach the agent's official SDK, JSON and streamed, and
// the SDK acts on them (x-should-retry: false stops its retries of a 429; Anthropic's error quotes
// the request id); they are recorded with the call, and a replay answers with them again. A cookie, an
// unknown header and one the answer declares hop-by-hop do not pass, and a header echoing the
// proxy's key carries the key's token.
func TestTheAnswerHeadersSDKsReadArePassedRecordedAndReplayed(t *testing.T) {
	script := "turns:\n- when: {message: limited}\n  text: never\n  faults: [{kind: rate_limit, retryAfter: 1}]\n- text: hello there\n"
	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			f := fakellm.New(mustParse(script))
			var requests atomic.Int64
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				h := w.Header()
				h.Set("Anthropic-Ratelimit-Requests-Remaining", "49")
				h.Set("X-Ratelimit-Remaining-Tokens", "9000")
				h.Set("Openai-Processing-Ms", "12")
				h.Set("X-Ratelimit-Echo", "key="+heldKey)
				h.Set("Set-Cookie", "session=abc")
				h.Set("X-Internal-Route", "pod-7")
				h.Set("Connection", "X-Ratelimit-Hop")
				h.Set("X-Ratelimit-Hop", "1")
				h.Set("X-Should-Retry", "false")
				h.Set("Retry-After-Ms", "5")
				f.ServeHTTP(w, r)
			}))
			t.Cleanup(up.Close)
			want := map[string]string{"Anthropic-Ratelimit-Requests-Remaining": "49", "X-Ratelimit-Remaining-Tokens": "9000",
				"Openai-Processing-Ms": "12", "X-Ratelimit-Echo": "key=" + redact.Token(heldKey), "X-Should-Retry": "false", "Retry-After-Ms": "5"}

			// agent makes a JSON call, a streamed one, and one the upstream limits; it returns the
			// headers of each answer and the request id the SDK's error quotes (Anthropic's only).
			agent := func(base string) ([]map[string]string, string) {
				ht := &headerTransport{}
				hc := &http.Client{Transport: ht}
				var errID string
				if provider == "anthropic" {
					c := sdk.NewClient(option.WithBaseURL(base), option.WithAPIKey("placeholder-key"), option.WithMaxRetries(2), option.WithHTTPClient(hc))
					ask := func(q string) sdk.MessageNewParams {
						return sdk.MessageNewParams{Model: "claude-test", MaxTokens: 64, Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(q))}}
					}
					if _, err := c.Messages.New(t.Context(), ask("hi")); err != nil {
						t.Fatal(err)
					}
					s := c.Messages.NewStreaming(t.Context(), ask("hi again"))
					for s.Next() {
					}
					if err := s.Err(); err != nil {
						t.Fatal(err)
					}
					_, err := c.Messages.New(t.Context(), ask("limited"))
					var apiErr *sdk.Error
					if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
						t.Fatalf("limited: %v", err)
					}
					errID = apiErr.RequestID
				} else {
					c := oai.NewClient(oaiopt.WithBaseURL(base+"/v1"), oaiopt.WithAPIKey("placeholder-key"), oaiopt.WithMaxRetries(2), oaiopt.WithHTTPClient(hc))
					ask := func(q string) oai.ChatCompletionNewParams {
						return oai.ChatCompletionNewParams{Model: "gpt-test", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage(q)}}
					}
					if _, err := c.Chat.Completions.New(t.Context(), ask("hi")); err != nil {
						t.Fatal(err)
					}
					s := c.Chat.Completions.NewStreaming(t.Context(), ask("hi again"))
					for s.Next() {
					}
					if err := s.Err(); err != nil {
						t.Fatal(err)
					}
					_, err := c.Chat.Completions.New(t.Context(), ask("limited"))
					var apiErr *oai.Error
					if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
						t.Fatalf("limited: %v", err)
					}
				}
				var out []map[string]string
				for _, h := range ht.seen {
					out = append(out, passed(h))
				}
				return out, errID
			}

			dir := filepath.Join(t.TempDir(), "run")
			rec := start(t, Options{Mode: Record, Provider: provider, Dir: dir, ID: "run",
				Upstreams: map[string]string{provider: up.URL}, APIKeys: map[string]string{provider: heldKey}})
			live, liveErrID := agent(rec.url)
			if o := rec.stop(t); o.Err != nil {
				t.Fatal(o.Err)
			}
			if n := requests.Load(); n != 3 || len(live) != 3 {
				t.Fatalf("%d upstream requests and %d answers; want 3: the SDK retries a 429 unless x-should-retry says no", n, len(live))
			}
			idHeader := map[string]string{"anthropic": "Request-Id", "openai": "X-Request-Id"}[provider]
			for i, got := range live {
				if got[idHeader] == "" || !strings.HasPrefix(got[idHeader], "req_") {
					t.Fatalf("answer %d has no %s: %v", i, idHeader, got)
				}
				w := map[string]string{idHeader: got[idHeader]}
				for k, v := range want {
					w[k] = v
				}
				if diff := cmp.Diff(w, got); diff != "" {
					t.Errorf("answer %d headers (-want +got):\n%s", i, diff)
				}
			}
			if provider == "anthropic" && liveErrID != live[2]["Request-Id"] {
				t.Errorf("the SDK's error quotes request id %q, want %q", liveErrID, live[2]["Request-Id"])
			}
			calls := eventsOf(openSession(t, dir), session.KindModelCall)
			if len(calls) != 3 || calls[0].Response == nil || calls[0].Response.Headers[strings.ToLower(idHeader)] != live[0][idHeader] ||
				calls[1].Response == nil || calls[1].Response.Headers["x-ratelimit-remaining-tokens"] != "9000" ||
				calls[0].Response.Headers["x-ratelimit-echo"] != "key="+redact.Token(heldKey) {
				t.Fatalf("recorded calls do not hold the answer headers: %+v", calls)
			}
			for _, c := range calls {
				if c.Response != nil && (c.Response.Headers["set-cookie"] != "" || c.Response.Headers["x-internal-route"] != "" || c.Response.Headers["x-ratelimit-hop"] != "") {
					t.Fatalf("recorded headers %v hold what never reaches the agent", c.Response.Headers)
				}
			}

			rep := start(t, Options{Mode: Replay, Session: openSession(t, dir)})
			replayed, repErrID := agent(rep.url)
			if o := rep.stop(t); o.Err != nil {
				t.Fatal(o.Err)
			}
			if diff := cmp.Diff(live, replayed); diff != "" || repErrID != liveErrID {
				t.Errorf("replayed headers (-live +replayed):\n%s\nerror request id %q, live %q", diff, repErrID, liveErrID)
			}
		})
	}
}
