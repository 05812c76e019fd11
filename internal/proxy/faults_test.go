package proxy

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fakellm"
)

func TestUpstream429And500ArePassedThroughRecordedAndReplayed(t *testing.T) {
	root := t.TempDir()
	// The first model request gets a 429, the second a 500.
	script := weatherScript
	script.Faults = []fakellm.Fault{{Kind: fakellm.FaultRateLimit, Times: 1, RetryAfter: 7}, {Kind: fakellm.FaultServerError, After: 1, Times: 1}}
	up := newUpstream(t, script)
	rec := start(t, Options{Mode: Record, Dir: filepath.Join(root, "run"), ID: "run", Upstreams: map[string]string{"anthropic": up.url}})
	check := func(r *running) {
		t.Helper()
		c := r.client()
		_, err := c.Messages.New(t.Context(), question("hello"))
		var e *sdk.Error
		if !errors.As(err, &e) || e.StatusCode != 429 || string(e.Type()) != "rate_limit_error" || e.Message != "fakellm: scripted rate limit" ||
			e.Response.Header.Get("Retry-After") != "7" {
			t.Fatalf("429: %v", err)
		}
		s := c.Messages.NewStreaming(t.Context(), question("hello"))
		for s.Next() {
		}
		if !errors.As(s.Err(), &e) || e.StatusCode != 500 || e.Message != "fakellm: scripted server error" {
			t.Fatalf("500: %v", s.Err())
		}
		if msg := ask(t, r, "hello"); !strings.HasPrefix(msg.Content[0].Text, "You said: ") || !strings.Contains(msg.Content[0].Text, "hello") {
			t.Fatalf("after the faults: %s", msg.RawJSON())
		}
	}
	check(rec)
	rec.stop(t)
	s := openSession(t, filepath.Join(root, "run"))
	calls := eventsOf(s, session.KindModelCall)
	if len(calls) != 3 || calls[0].Error == nil || calls[0].Error.Name != upstreamErrorName || !strings.Contains(calls[0].Error.Message, `"status":429`) ||
		calls[1].Error == nil || !strings.Contains(calls[1].Error.Message, `"status":500`) || calls[2].Error != nil {
		t.Fatalf("recorded calls: %+v", calls)
	}
	before := up.calls()
	check(start(t, Options{Mode: Replay, Session: s}))
	if up.calls() != before {
		t.Fatal("the replay went upstream")
	}
}

func TestAClientLeavingMidStreamLeavesAnIntactSession(t *testing.T) {
	root := t.TempDir()
	up := newUpstream(t, weatherScript)
	up.hang.Store(true)
	rec := start(t, Options{Mode: Record, Dir: filepath.Join(root, "run"), ID: "run", Upstreams: map[string]string{"anthropic": up.url}})
	ctx, cancel := context.WithCancel(t.Context())
	c := rec.client()
	s := c.Messages.NewStreaming(ctx, question("hello"))
	if !s.Next() || s.Current().Type != "message_start" {
		t.Fatalf("first event: %v", s.Err())
	}
	cancel()
	s.Close()
	select {
	case <-up.canceled: // the proxy gave up the upstream call when the agent left
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy kept the upstream call after the agent left")
	}
	up.hang.Store(false)
	if msg := ask(t, rec, "again"); msg.Content[0].Type != "text" {
		t.Fatal("the proxy did not serve the next call")
	}
	out := rec.stop(t)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	sess := openSession(t, filepath.Join(root, "run")) // verifies the committed log
	calls := eventsOf(sess, session.KindModelCall)
	if len(calls) != 2 || calls[0].Error == nil || len(calls[0].Stream) != 1 || calls[1].Error != nil {
		t.Fatalf("recorded calls: %+v", calls)
	}
}

func TestMalformedOversizedAndUnknownRequestsGetTheProvidersErrors(t *testing.T) {
	up := newUpstream(t, weatherScript)
	r := start(t, Options{Mode: Record, Dir: filepath.Join(t.TempDir(), "run"), Upstreams: map[string]string{"anthropic": up.url}})
	c := r.client()
	var e *sdk.Error

	_, err := c.Messages.New(t.Context(), question("hi"), option.WithJSONDel("messages"))
	if !errors.As(err, &e) || e.StatusCode != 400 || string(e.Type()) != "invalid_request_error" || !strings.Contains(e.Message, "messages") {
		t.Fatalf("malformed: %v", err)
	}
	_, err = c.Messages.New(t.Context(), question(strings.Repeat("x", MaxBodyBytes+1)))
	if !errors.As(err, &e) || e.StatusCode != 413 || string(e.Type()) != "request_too_large" {
		t.Fatalf("oversized: %v", err)
	}
	err = c.Post(t.Context(), "v1/nowhere", map[string]any{}, nil)
	if !errors.As(err, &e) || e.StatusCode != 404 || string(e.Type()) != "not_found_error" || !strings.Contains(e.Message, "/v1/nowhere") {
		t.Fatalf("unknown path: %v", err)
	}
	if up.calls() != 0 {
		t.Fatalf("%d refused requests went upstream", up.calls())
	}
	_, metrics := get(t, r.url+"/metrics")
	for _, want := range []string{
		`agentrewind_proxy_requests_total{endpoint="anthropic.messages",mode="record",outcome="client_error"} 2`,
		`agentrewind_proxy_requests_total{endpoint="unknown",mode="record",outcome="client_error"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s:\n%s", want, metrics)
		}
	}
}

func TestTwoConcurrentLanesReplayTheirOwnAnswers(t *testing.T) {
	root := t.TempDir()
	up := newUpstream(t, weatherScript)
	lane := func(r *running, name string, got map[string]string, mu *sync.Mutex, wg *sync.WaitGroup) {
		defer wg.Done()
		c := r.client(option.WithHeader(HeaderLane, name))
		var out []string
		for i := 0; i < 3; i++ {
			msg, err := c.Messages.New(context.Background(), question(name+" turn"))
			if err != nil {
				t.Error(err)
				return
			}
			_, rnd := get(t, r.url+"/v1/entropy/random", HeaderLane, name)
			out = append(out, msg.Content[0].Text, string(rnd))
		}
		mu.Lock()
		got[name] = strings.Join(out, "|")
		mu.Unlock()
	}
	runBoth := func(r *running) map[string]string {
		got := map[string]string{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		wg.Add(2)
		go lane(r, "alpha", got, &mu, &wg)
		go lane(r, "beta", got, &mu, &wg)
		wg.Wait()
		return got
	}
	rec := start(t, Options{Mode: Record, Dir: filepath.Join(root, "run"), ID: "run", Upstreams: map[string]string{"anthropic": up.url}})
	recorded := runBoth(rec)
	rec.stop(t)
	s := openSession(t, filepath.Join(root, "run"))
	lanes := map[string]int{}
	for _, ev := range s.Events {
		if ev.Kind.IsBoundary() {
			lanes[ev.Lane]++
		}
	}
	if lanes["0/alpha"] != 6 || lanes["0/beta"] != 6 {
		t.Fatalf("boundary events by lane: %v", lanes)
	}
	rep := start(t, Options{Mode: Replay, Session: s})
	replayed := runBoth(rep)
	if out := rep.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	for name, want := range recorded {
		if replayed[name] != want {
			t.Errorf("lane %s replayed %q, recorded %q", name, replayed[name], want)
		}
	}
	status, body := get(t, rep.url+"/v1/entropy/random", HeaderLane, "bad lane")
	if status != http.StatusServiceUnavailable && status != http.StatusBadRequest {
		t.Fatalf("bad lane: %d %s", status, body)
	}
}
