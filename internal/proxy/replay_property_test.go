package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// corpusScript answers every Messages request with the same text; the message id fakellm derives
// from the request makes each answer distinct.
var corpusScript = fakellm.Script{Turns: []fakellm.Turn{{Text: "I will run go test ./pkg/store and fix what fails."}}}

// corpusBodies are n distinct Anthropic Messages requests, as an agent's SDK posts them: a system
// prompt and one user turn numbered i.
func corpusBodies(n int) [][]byte {
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"You are a coding agent. Keep changes small and run the tests.",`+
			`"messages":[{"role":"user","content":[{"type":"text","text":"Task %05d: fix the failing test in pkg/store"}]}]}`, i)
	}
	return bodies
}

// startFake serves a fakellm on loopback and returns it with its base URL.
func startFake(tb testing.TB) (*fakellm.Server, string) {
	tb.Helper()
	fake := fakellm.New(corpusScript)
	srv := httptest.NewServer(fake)
	tb.Cleanup(srv.Close)
	return fake, srv.URL
}

// proxyRun is a proxy run on loopback; startProxy is helpers_test's start for tests and benchmarks.
type proxyRun struct {
	url    string
	cancel context.CancelFunc
	done   chan *Outcome
	close  func()
}

func startProxy(tb testing.TB, opts Options) *proxyRun {
	tb.Helper()
	opts.Config.Environ = func() []string { return nil }
	s, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &proxyRun{cancel: cancel, done: make(chan *Outcome, 1)}
	go func() { run.done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case out := <-run.done:
		tb.Fatalf("the proxy did not start: %v", out.Err)
	case <-time.After(30 * time.Second):
		tb.Fatal("the proxy did not become ready")
	}
	hs := httptest.NewServer(s.Handler())
	run.url, run.close = hs.URL, hs.Close
	tb.Cleanup(hs.Close)
	tb.Cleanup(cancel)
	return run
}

// stop closes the run (SIGTERM), waits for the engine to commit, and returns its outcome.
func (r *proxyRun) stop(tb testing.TB) *Outcome {
	tb.Helper()
	r.cancel()
	select {
	case out := <-r.done:
		r.close()
		return out
	case <-time.After(60 * time.Second):
		tb.Fatal("the proxy did not stop")
		return nil
	}
}

// postBody posts a Messages request body to base and returns the full response body; anything but
// a 200 fails.
func postBody(tb testing.TB, c *http.Client, base string, body []byte) []byte {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("POST %s/v1/messages: %d %s", base, resp.StatusCode, out)
	}
	return out
}

// recordCorpus records bodies through the proxy to fake and returns the committed session and what
// the client was answered, call by call.
func recordCorpus(tb testing.TB, fakeURL string, bodies [][]byte) (*session.Session, [][]byte) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "corpus")
	rec := startProxy(tb, Options{Mode: Record, Dir: dir, ID: "corpus", Upstreams: map[string]string{"anthropic": fakeURL}})
	c := &http.Client{}
	answers := make([][]byte, len(bodies))
	for i, body := range bodies {
		answers[i] = postBody(tb, c, rec.url, body)
	}
	if out := rec.stop(tb); out.Err != nil || out.Record == nil || out.Record.HarnessErr != nil {
		tb.Fatalf("record: %+v", out)
	}
	s, err := session.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return s, answers
}

// TestReplayOfAThousandCallsIsServedWithoutUpstreamAndByteIdentical is the property the replay
// benchmarks rest on: every replayed call is answered from the recording, byte for byte, and the
// upstream — configured and counting — is never called.
func TestReplayOfAThousandCallsIsServedWithoutUpstreamAndByteIdentical(t *testing.T) {
	const n = 1000
	fake, fakeURL := startFake(t)
	bodies := corpusBodies(n)
	s, recorded := recordCorpus(t, fakeURL, bodies)
	if got := fake.RequestsTo(fakellm.AnthropicMessages); got != n {
		t.Fatalf("recording made %d upstream calls, want %d", got, n)
	}
	// What the proxy answered while recording is what the upstream answered, byte for byte.
	direct := &http.Client{}
	for _, i := range []int{0, n / 2, n - 1} {
		if diff := cmp.Diff(string(postBody(t, direct, fakeURL, bodies[i])), string(recorded[i])); diff != "" {
			t.Fatalf("call %d: the proxy recorded a different answer than the upstream gives (-upstream +recorded):\n%s", i, diff)
		}
	}
	before := fake.Requests()

	// The fake stays configured as the upstream: a replay that went live would show in its counter.
	rep := startProxy(t, Options{Mode: Replay, Session: s, Upstreams: map[string]string{"anthropic": fakeURL}})
	c := &http.Client{}
	for i, body := range bodies {
		if diff := cmp.Diff(string(recorded[i]), string(postBody(t, c, rep.url, body))); diff != "" {
			t.Fatalf("call %d: the replay served a different body (-recorded +replayed):\n%s", i, diff)
		}
	}
	out := rep.stop(t)
	if got := fake.Requests() - before; got != 0 {
		t.Fatalf("the replay made %d upstream calls, want 0", got)
	}
	res, ok := ReplayResult("corpus", out.Replay, out.Err)
	if !ok || !res.Passed || res.LiveCalls != 0 {
		t.Fatalf("replay result %+v (err %v), want passed with 0 live calls", res, out.Err)
	}
}
