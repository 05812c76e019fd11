package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestABackendURLNeverReachesTheRecordingOrTheAgent: a tool's or an upstream's URL may carry a key in
// its query. When the backend cannot be reached, or times out, the call's error is recorded in the
// session and answered to the agent: neither may hold the URL, which Go's HTTP client writes into
// every transport error.
func TestABackendURLNeverReachesTheRecordingOrTheAgent(t *testing.T) {
	const token = "backendQueryKey51c2e8"
	for _, backend := range unansweringBackends(t, "/call?key="+token) {
		for _, call := range []struct {
			name, path, body string
			opts             func(string) Options
		}{
			{"tool", "/v1/tools/probe", `{"q":1}`, func(u string) Options { return Options{Tools: map[string]string{"probe": u}} }},
			{"model", "/v1/messages", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`,
				func(u string) Options { return Options{Upstreams: map[string]string{"anthropic": u}} }},
		} {
			t.Run(backend.name+"/"+call.name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "rec")
				opts := call.opts(backend.url)
				opts.Mode, opts.Dir, opts.ID = Record, dir, "rec"
				opts.Client = &http.Client{Timeout: 200 * time.Millisecond}
				rec := start(t, opts)
				resp, err := http.Post(rec.url+call.path, "application/json", strings.NewReader(call.body))
				if err != nil {
					t.Fatal(err)
				}
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					t.Fatalf("a call to a backend that cannot answer succeeded: %d %s", resp.StatusCode, answer)
				}
				if strings.Contains(string(answer), token) {
					t.Errorf("the agent's answer shows the backend's URL: %s", answer)
				}
				if out := rec.stop(t); out.Err != nil {
					t.Fatal(out.Err)
				}
				assertNotIn(t, dir, token)
			})
		}
	}
}

// unansweringBackends are two URLs (with pathAndQuery) whose server never answers: one where nothing
// listens, one that accepts the request and hangs until the client gives up.
func unansweringBackends(t *testing.T, pathAndQuery string) []struct{ name, url string } {
	t.Helper()
	released := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-released:
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(released) }) // runs first: Close waits for the handler
	return []struct{ name, url string }{
		{"unreachable", "http://127.0.0.1:1" + pathAndQuery},
		{"timing out", hung.URL + pathAndQuery},
	}
}
