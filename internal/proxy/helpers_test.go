package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// canary is a provider key no redaction pattern knows: only learning it keeps it out of a session.
const canary = "canary-7f3a9c2e5b1d4f60a8e2c9b7d31"

// weatherScript is the upstream's script: a question about the weather is answered with a weather
// tool call (naming the canary when the question holds it: an upstream echoing the proxy's key),
// the tool's result with a sentence whose wording depends on the system prompt; the other questions
// the tests ask are echoed.
var weatherScript = mustParse(`
turns:
  - name: check-for-the-key-holder
    when: {step: 1, message: "` + canary + `"}
    text: "Let me check, holder of ` + canary + `."
    toolCalls: [{name: weather, input: {city: Paris}}]
    usage: {outputTokens: 7}
  - name: check
    when: {step: 1, message: weather}
    text: Let me check.
    toolCalls: [{name: weather, input: {city: Paris}}]
    usage: {outputTokens: 7}
  - name: brief
    when: {step: 2, system: brief}
    text: Sunny.
    usage: {outputTokens: 7}
  - name: report
    when: {step: 2}
    text: It is sunny in Paris, 21 degrees.
    usage: {outputTokens: 7}
  - {when: {message: alpha}, text: "You said: alpha turn"}
  - {when: {message: beta}, text: "You said: beta turn"}
  - {when: {message: hello}, text: "You said: hello"}
  - {when: {message: again}, text: "You said: again"}
unmatched: {text: "You said something else."}
`)

func mustParse(doc string) fakellm.Script {
	s, err := fakellm.Parse([]byte(doc))
	if err != nil {
		panic(err)
	}
	return s
}

// fakeUpstream is the fake LLM (internal/fakellm) the proxy forwards to: its request counter is how
// the tests see what went upstream. A thin wrapper remembers the credential each request carried and
// can hold a stream after its first event until the client goes away.
type fakeUpstream struct {
	*fakellm.Server
	url  string
	mu   sync.Mutex
	keys []string
	// queries are the query strings the requests carried, in order.
	queries []string
	// hang makes the next streams stop after their first event until the proxy gives the call up.
	hang     atomic.Bool
	canceled chan struct{}
}

func newUpstream(t *testing.T, script fakellm.Script) *fakeUpstream {
	u := &fakeUpstream{Server: fakellm.New(script), canceled: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		key := r.Header.Get("X-Api-Key")
		if key == "" {
			key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		u.keys = append(u.keys, key)
		u.queries = append(u.queries, r.URL.RawQuery)
		u.mu.Unlock()
		if u.hang.Load() {
			w = &holdingWriter{ResponseWriter: w, r: r, u: u}
		}
		u.Server.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// calls is how many requests reached the upstream, on any path.
func (u *fakeUpstream) calls() int64 { return u.Requests() }

func (u *fakeUpstream) receivedQueries() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.queries...)
}

func (u *fakeUpstream) receivedKeys() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.keys...)
}

// holdingWriter flushes the first event of a stream and then waits for the client to go away.
type holdingWriter struct {
	http.ResponseWriter
	r       *http.Request
	u       *fakeUpstream
	flushed bool
}

func (h *holdingWriter) Flush() {
	_ = http.NewResponseController(h.ResponseWriter).Flush()
	if h.flushed {
		return
	}
	h.flushed = true
	select {
	case <-h.r.Context().Done():
		h.u.canceled <- struct{}{}
	case <-time.After(10 * time.Second):
	}
}

// running is a proxy run under test.
type running struct {
	url    string
	cancel context.CancelFunc
	done   chan *Outcome
	srv    *Server
}

// vaultKey seals and opens the vault in every run of a test.
var vaultKey = redact.StaticKeyProvider(bytes.Repeat([]byte{7}, 32))

func start(t *testing.T, opts Options) *running {
	t.Helper()
	if opts.Keys == nil {
		opts.Keys = vaultKey
	}
	opts.Config.Environ = func() []string { return nil }
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{cancel: cancel, done: make(chan *Outcome, 1), srv: s}
	go func() { run.done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case out := <-run.done:
		t.Fatalf("the proxy did not start: %v", out.Err)
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not become ready")
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	run.url = hs.URL
	t.Cleanup(cancel)
	return run
}

// stop is SIGTERM: the run closes and commits.
func (r *running) stop(t *testing.T) *Outcome {
	t.Helper()
	r.cancel()
	select {
	case out := <-r.done:
		return out
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not stop")
		return nil
	}
}

func (r *running) client(opts ...option.RequestOption) sdk.Client {
	return sdk.NewClient(append([]option.RequestOption{option.WithBaseURL(r.url), option.WithAPIKey("placeholder-key"),
		option.WithMaxRetries(0)}, opts...)...)
}

func openSession(t *testing.T, dir string) *session.Session {
	t.Helper()
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// view is what a program can read of an SDK value.
func view(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assertNoCanary fails if any file under dir holds the canary, raw, base64 or JSON-escaped.
func assertNoCanary(t *testing.T, dir string) {
	t.Helper()
	quoted, _ := json.Marshal(canary)
	forms := [][]byte{[]byte(canary), quoted[1 : len(quoted)-1],
		[]byte(base64.StdEncoding.EncodeToString([]byte(canary))), []byte(base64.URLEncoding.EncodeToString([]byte(canary))),
		[]byte(base64.RawStdEncoding.EncodeToString([]byte(canary)))}
	files := 0
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		files++
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range forms {
			if bytes.Contains(data, f) {
				t.Errorf("%s holds the canary key (%q)", path, f)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no file under %s", dir)
	}
}

func postJSON(t *testing.T, url string, body any, header ...string) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

func get(t *testing.T, url string, header ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// events of a kind in a session.
func eventsOf(s *session.Session, kind session.Kind) []session.Event {
	var out []session.Event
	for _, ev := range s.Events {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}
