package fakellm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// TestTwoServersWithTheSameScriptAnswerByteIdentically replays the same requests, JSON and streamed,
// for both providers, against two servers: every body and request id must be the same, and a
// different script must change the ids.
func TestTwoServersWithTheSameScriptAnswerByteIdentically(t *testing.T) {
	requests := []struct{ path, body string }{
		{"/v1/messages", `{"model":"m","max_tokens":9,"system":"sys","messages":[{"role":"user","content":"go"}]}`},
		{"/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"system":"sys","messages":[{"role":"user","content":"go"}]}`},
		{"/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"go"}]}`},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"go"}]}`},
		{"/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"go"}]}`},
		{"/v1/messages", `{"model":"m"}`},
		{"/nowhere", `{}`},
	}
	run := func(script fakellm.Script) []string {
		_, url := start(t, script)
		var out []string
		for _, r := range requests {
			status, header, body := post(t, url, r.path, r.body)
			out = append(out, fmt.Sprintf("%d %v %s", status, header, body))
		}
		return out
	}
	first, second := run(agentScript(t)), run(agentScript(t))
	if d := cmp.Diff(first, second); d != "" {
		t.Errorf("two servers answered differently (-first +second):\n%s", d)
	}
	changed := agentScript(t)
	changed.Turns[0].Text = "Something else."
	other := run(changed)
	if strings.Contains(first[0], "Date") {
		t.Errorf("the answer has a Date header, which differs between runs: %s", first[0])
	}
	// The message id opens the body: {"id":"msg_<24 hex>","type":"message",...
	id := func(answer string) string { return answer[strings.Index(answer, "{"):][:36] }
	if id(other[0]) == id(first[0]) || !strings.Contains(id(first[0]), `"id":"msg_`) {
		t.Errorf("a different script kept the message id %s", id(first[0]))
	}
}

func TestConcurrentRequestsAreAllCountedAndFaultedExactlyAsScripted(t *testing.T) {
	const n = 40
	script := fakellm.Script{
		Faults: []fakellm.Fault{{Kind: fakellm.FaultServerError, After: 10, Times: 5}},
		Turns:  []fakellm.Turn{{Text: "ok"}},
	}
	fake, url := start(t, script)
	client := anthropicClient(url)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for range n {
		wg.Go(func() {
			_, err := client.Messages.New(context.Background(), anthropicParams("", anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))))
			if err != nil {
				if apiErr, ok := errors.AsType[*anthropic.Error](err); !ok || apiErr.StatusCode != 500 {
					t.Errorf("unexpected error %v", err)
				}
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != 5 || fake.Requests() != n || fake.RequestsTo(fakellm.AnthropicMessages) != n {
		t.Errorf("%d failed of %d counted (%d to messages); want exactly 5 of %d", failed, fake.Requests(), fake.RequestsTo(fakellm.AnthropicMessages), n)
	}
	last := fake.LastRequests(0)
	faulted := 0
	for _, r := range last {
		if r.Fault == fakellm.FaultServerError {
			faulted++
		}
	}
	if len(last) != n || faulted != 5 {
		t.Errorf("%d requests remembered with %d faulted, want %d and 5", len(last), faulted, n)
	}
}

func TestLastRequestsKeepsOnlyTheNewestInOrder(t *testing.T) {
	fake, url := start(t, fakellm.Script{KeepRequests: 3, Turns: []fakellm.Turn{{Text: "ok"}}})
	for i := range 5 {
		post(t, url, "/v1/chat/completions", fmt.Sprintf(`{"model":"m%d","messages":[{"role":"user","content":"x"}]}`, i))
	}
	var got []string
	for _, r := range fake.LastRequests(0) {
		got = append(got, string(r.Body[:13]))
	}
	if d := cmp.Diff([]string{`{"model":"m2"`, `{"model":"m3"`, `{"model":"m4"`}, got); d != "" {
		t.Errorf("kept (-want +got):\n%s", d)
	}
	if last := fake.LastRequests(1); len(last) != 1 || !bytes.HasPrefix(last[0].Body, []byte(`{"model":"m4"`)) || last[0].Status != 200 {
		t.Errorf("LastRequests(1) = %+v, want the m4 request answered 200", last)
	}
}

// TestSlowFaultDelaysTheAnswerAndGivesUpWhenTheClientDoes: the first request is answered after its
// 300ms delay; the second, delayed 10s, is given up by its client once the server has it, and the
// server records it as 499 without waiting the delay out.
func TestSlowFaultDelaysTheAnswerAndGivesUpWhenTheClientDoes(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{{Text: "late", Faults: []fakellm.Fault{
		{Kind: fakellm.FaultSlow, Delay: fakellm.Duration{Duration: 300 * time.Millisecond}, Times: 1},
		{Kind: fakellm.FaultSlow, Delay: fakellm.Duration{Duration: 10 * time.Second}, After: 1},
	}}}}
	fake, url := start(t, script)
	client := anthropicClient(url)
	params := anthropicParams("", anthropic.NewUserMessage(anthropic.NewTextBlock("hi")))

	began := time.Now()
	msg, err := client.Messages.New(t.Context(), params)
	if err != nil || msg.Content[0].Text != "late" {
		t.Fatalf("slow answer: %v", err)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Errorf("the slow answer came after %v, want at least 300ms", took)
	}
	// The client gives up once the server has counted its request, not at a deadline set in
	// advance, which a loaded machine can pass before the request reaches the server.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	gaveUp := make(chan error, 1)
	go func() {
		_, err := client.Messages.New(ctx, params)
		gaveUp <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for fake.Requests() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("a client that gives up got %v, want its cancellation", err)
	}
	for len(fake.LastRequests(0)) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if last := fake.LastRequests(1); len(last) != 1 || last[0].Status != 499 || last[0].Fault != fakellm.FaultSlow {
		t.Errorf("the abandoned request was recorded as %+v, want status 499 with the slow fault", last)
	}
}

func TestSlowFaultPacesStreamEvents(t *testing.T) {
	script := fakellm.Script{ChunkSize: 1, Turns: []fakellm.Turn{{Text: "abcd",
		Faults: []fakellm.Fault{{Kind: fakellm.FaultSlow, EventDelay: fakellm.Duration{Duration: 40 * time.Millisecond}}}}}}
	_, url := start(t, script)
	client := anthropicClient(url)
	// began precedes the request: the server cannot send its first event before it, and sleeps 40ms
	// before each later one, so however late the client reads, the last comes 9×40ms after began or
	// later. (Measured from the first event read instead, a late read of that one shortens the span.)
	began := time.Now()
	stream := client.Messages.NewStreaming(t.Context(), anthropicParams("", anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))))
	defer stream.Close()
	var at []time.Duration
	for stream.Next() {
		at = append(at, time.Since(began))
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// 10 events (the ping, which the SDK skips, included): the last comes 9 delays after the first.
	if len(at) != 9 || at[len(at)-1] < 9*40*time.Millisecond {
		t.Errorf("%d events at %v since the request; want 9 (ping skipped), the last at least 9×40ms after it", len(at), at)
	}
}

func TestScriptTurnErrorAnswersInTheProviderShape(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{{Error: &fakellm.ErrorAnswer{Status: 529, Message: "Overloaded"}}}}
	_, url := start(t, script)
	client := anthropicClient(url)
	_, err := client.Messages.New(t.Context(), anthropicParams("", anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))))
	if apiErr, ok := errors.AsType[*anthropic.Error](err); !ok || apiErr.StatusCode != 529 || apiErr.Type() != "overloaded_error" || apiErr.Message != "Overloaded" {
		t.Errorf("scripted 529: %v; want an overloaded_error saying Overloaded", err)
	}
	status, _, body := post(t, url, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	if want := `{"error":{"message":"Overloaded","type":"server_error","param":null,"code":null}}`; status != 529 || string(body) != want {
		t.Errorf("OpenAI shape: %d %s, want 529 %s", status, body, want)
	}
}

func TestParseRefusesWhatItCannotAnswer(t *testing.T) {
	for _, tc := range []struct{ name, script, want string }{
		{"unknown field", "turns: [{txt: hi}]", `unknown field "txt"`},
		{"no turns", "chunkSize: 3", "no turns and no unmatched answer"},
		{"tool without name", "turns: [{toolCalls: [{input: {a: 1}}]}]", "turns[0].toolCalls[0] has no name"},
		{"input not an object", "turns: [{toolCalls: [{name: f, input: [1]}]}]", "turns[0].toolCalls[0].input is not a JSON object"},
		{"bad stop", "turns: [{text: x, stopReason: done}]", `turns[0].stopReason "done"`},
		{"bad fault", "turns: [{text: x, faults: [{kind: explode}]}]", `turns[0].faults[0].kind "explode"`},
		{"slow without delay", "faults: [{kind: slow}]\nturns: [{text: x}]", "a slow fault needs a positive delay"},
		{"bad duration", "faults: [{kind: slow, delay: soon}]\nturns: [{text: x}]", "soon"},
		{"error and text", "turns: [{text: x, error: {status: 500}}]", "answers with an error and also with text"},
		{"error status", "unmatched: {error: {status: 200}}", "unmatched.error.status 200"},
	} {
		_, err := fakellm.Parse([]byte(tc.script))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Parse said %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	s, err := fakellm.Parse([]byte(`{"turns":[{"when":{"step":2},"toolCalls":[{"name":"f","input":{"b":1,"a":[true]}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Turns[0].When.Step != 2 || string(s.Turns[0].ToolCalls[0].Input) != `{"a":[true],"b":1}` { // YAML sorts keys
		t.Errorf("JSON script parsed to %+v", s.Turns[0])
	}
}

func TestTheServerKeepsItsOwnCopyOfTheScript(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{{Text: "before"}}}
	_, url := start(t, script)
	script.Turns[0].Text = "after"
	if _, _, body := post(t, url, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`); !strings.Contains(string(body), `"content":"before"`) {
		t.Errorf("after the caller changed its script the server answered %s", body)
	}
}

func TestNewPanicsOnAnInvalidScript(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "no turns") {
			t.Errorf("New recovered %v, want a panic naming the problem", r)
		}
	}()
	fakellm.New(fakellm.Script{})
}

// The server is an http.Handler that needs no listener of its own.
var _ http.Handler = (*fakellm.Server)(nil)
