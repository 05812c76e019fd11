package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
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

	"github.com/agentrewind/agentrewind/internal/engine/codec/anthropic"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// canary is a provider key no redaction pattern knows: only learning it keeps it out of a session.
const canary = "canary-7f3a9c2e5b1d4f60a8e2c9b7d31"

// fakeUpstream is a scripted Anthropic API: a question is answered with a weather tool call, a tool
// result with a sentence whose wording depends on the system prompt. It counts requests and can be
// told to fail the next ones.
type fakeUpstream struct {
	t     *testing.T
	url   string
	calls atomic.Int64
	mu    sync.Mutex
	keys  []string
	// faults are answered, in order, instead of the script.
	faults []fault
	// hang makes streams stop after message_start until the client goes away.
	hang     bool
	canceled chan struct{}
}

type fault struct {
	status     int
	retryAfter string
	body       string
}

func newUpstream(t *testing.T) *fakeUpstream {
	u := &fakeUpstream{t: t, canceled: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

func (u *fakeUpstream) fail(f fault) {
	u.mu.Lock()
	u.faults = append(u.faults, f)
	u.mu.Unlock()
}

func (u *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	u.calls.Add(1)
	u.mu.Lock()
	u.keys = append(u.keys, r.Header.Get("X-Api-Key"))
	var f *fault
	if len(u.faults) > 0 {
		f = &u.faults[0]
		u.faults = u.faults[1:]
	}
	u.mu.Unlock()
	if f != nil {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, f.body)
		return
	}
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path == "/v1/messages/count_tokens" {
		_, _ = fmt.Fprintf(w, `{"input_tokens":%d}`, len(body)/4)
		return
	}
	if r.URL.Path != "/v1/messages" {
		http.NotFound(w, r)
		return
	}
	req, err := anthropic.Codec{}.NormalizeRequest(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	msg := u.answer(req)
	if !streaming(req) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(msg)
		return
	}
	resp, err := anthropic.Codec{}.NormalizeResponse(msg)
	if err != nil {
		u.t.Error(err)
		return
	}
	chunks, err := anthropic.Codec{}.SynthesizeStream(resp)
	if err != nil {
		u.t.Error(err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i, c := range chunks {
		_, _ = w.Write(anthropic.Codec{}.RebuildStream([]session.Chunk{c}))
		_ = rc.Flush()
		if u.hang && i == 0 {
			select {
			case <-r.Context().Done():
				u.canceled <- struct{}{}
			case <-time.After(10 * time.Second):
				u.t.Error("the client never went away")
			}
			return
		}
	}
}

func (u *fakeUpstream) answer(req session.Request) []byte {
	n := u.calls.Load()
	last := req.Messages[len(req.Messages)-1]
	var content, stop string
	switch {
	case bytes.Contains(last.Content, []byte(`"tool_result"`)):
		text := "It is sunny in Paris, 21 degrees."
		if strings.Contains(req.System, "brief") {
			text = "Sunny."
		}
		content, stop = fmt.Sprintf(`[{"type":"text","text":%q}]`, text), "end_turn"
	case bytes.Contains(last.Content, []byte("weather")):
		check := "Let me check."
		if bytes.Contains(req.Messages[0].Content, []byte(canary)) {
			check = "Let me check, holder of " + canary + "."
		}
		content, stop = fmt.Sprintf(`[{"type":"text","text":%q},{"type":"tool_use","id":"toolu_01","name":"weather","input":{"city":"Paris"}}]`, check), "tool_use"
	default:
		content, stop = fmt.Sprintf(`[{"type":"text","text":%q}]`, "You said: "+strings.Trim(string(last.Content), `"`)), "end_turn"
	}
	return []byte(fmt.Sprintf(`{"id":"msg_%02d","type":"message","role":"assistant","model":"claude-test","content":%s,"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":7}}`,
		n, content, stop, 10+len(req.Messages)))
}

func (u *fakeUpstream) receivedKeys() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.keys...)
}

// failingUpstream fails the test if anything calls it.
func failingUpstream(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the upstream was called in replay: %s %s", r.Method, r.URL.Path)
		http.Error(w, "no", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
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

var _ = replay.Strict
