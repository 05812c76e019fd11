package proxy

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestUpstreamRedirectsAreAnswersNotFollowed: a model upstream or a tool backend that redirects gets
// no second request from the proxy — the key it holds never reaches the other host — and the agent
// sees the 3xx as sent, recorded as an error event that a replay answers the same way.
func TestUpstreamRedirectsAreAnswersNotFollowed(t *testing.T) {
	var elsewhere atomic.Int64
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		t.Errorf("the redirect was followed: %s %s with x-api-key %q", r.Method, r.URL, r.Header.Get("X-Api-Key"))
	}))
	defer evil.Close()
	// localhost, not 127.0.0.1: another host for any redirect policy that strips credentials by host.
	target := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()

	for _, tc := range []struct {
		name, path string
		body       []byte
	}{
		{"model", "/v1/messages", hMsg(false, "hi")},
		{"model stream", "/v1/messages", hMsg(true, "hi")},
		{"tool", "/v1/tools/fetch", []byte(`{"url":"x"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": redirector.URL},
				APIKeys: map[string]string{"anthropic": hProvKey}, Tools: map[string]string{"fetch": redirector.URL + "/tool"}})
			live := hDo(t, r.ts.URL, tc.path, map[string]string{"x-api-key": "placeholder-key"}, tc.body)
			if o := r.stop(); o.Err != nil {
				t.Fatalf("record: %v", o.Err)
			}
			if live.status != http.StatusTemporaryRedirect || !strings.HasPrefix(live.header.Get("Location"), target) {
				t.Fatalf("the agent got %d Location %q, want the upstream's 307 to %s", live.status, live.header.Get("Location"), target)
			}
			ses := hOpen(t, dir)
			var recorded *session.SerializedError
			for _, ev := range ses.Events {
				if ev.Kind == session.KindModelCall || ev.Kind == session.KindToolCall {
					recorded = ev.Error
				}
			}
			if recorded == nil {
				t.Fatal("the redirected call is recorded without an error")
			}
			if f, ok := failureFrom(recorded); !ok || f.Status != http.StatusTemporaryRedirect {
				t.Fatalf("the redirect is not recorded as the upstream's error: %+v", recorded)
			}
			p := hStart(t, Options{Mode: Replay, Session: ses})
			rep := hDo(t, p.ts.URL, tc.path, nil, tc.body)
			p.stop()
			if rep.status != live.status || rep.header.Get("Location") != live.header.Get("Location") || string(rep.body) != string(live.body) {
				t.Errorf("replay answers %d %q %q, live %d %q %q", rep.status, rep.header.Get("Location"), rep.body,
					live.status, live.header.Get("Location"), live.body)
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
}
