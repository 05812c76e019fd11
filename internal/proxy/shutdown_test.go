package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestShutdownCutsAnEndlessStreamAndCommits: at SIGTERM an upstream stream that never ends is cut after
// half the shutdown timeout; the run stops waiting for it within the timeout and commits a session
// that opens, holds the cut call as an error event with the events the agent got, and replays them to
// the agent byte for byte.
func TestShutdownCutsAnEndlessStreamAndCommits(t *testing.T) {
	started := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		parts := strings.SplitAfter(hBigSSE, "\n\n")
		_, _ = io.WriteString(w, parts[0]+parts[1]+parts[2])
		w.(http.Flusher).Flush()
		close(started)
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
				_, _ = io.WriteString(w, "event: ping\ndata: {\"type\":\"ping\"}\n\n")
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer func() {
		up.CloseClientConnections() // ends a stream no cut ended, which Close would wait for
		up.Close()
	}()
	const timeout = 2 * time.Second
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up.URL}, ShutdownTimeout: timeout})
	got := make(chan []byte, 1)
	go func() {
		resp, err := http.Post(r.ts.URL+"/v1/messages", "application/json", bytes.NewReader(hMsg(true, "x")))
		if err != nil {
			got <- nil
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- b
	}()
	<-started
	t0 := time.Now()
	r.cancel()
	var out *Outcome
	select {
	case out = <-r.out:
	case <-time.After(timeout + 5*time.Second):
		t.Fatalf("Run has not returned %s after the signal, with a shutdown timeout of %s", time.Since(t0), timeout)
	}
	// Run returns no sooner than the cut, and no later than the timeout after the signal plus the
	// commit, which syncs files: commitSlack is room for that on a loaded machine and disk.
	const commitSlack = 3 * time.Second
	if took := time.Since(t0); took > timeout+commitSlack || took < timeout/2 {
		t.Errorf("Run returned after %s: want the calls cut after %s and the session committed within %s of the signal", took, timeout/2, timeout+commitSlack)
	}
	if out.Err != nil {
		t.Fatalf("record: %v", out.Err)
	}
	var live []byte
	select {
	case live = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's stream has not ended 10s after the run did: the call was never cut")
	}
	r.ts.Close()
	ses := hOpen(t, dir)
	calls := eventsOf(ses, session.KindModelCall)
	if len(calls) != 1 || calls[0].Error == nil || calls[0].Error.Name != replay.ErrorNameCanceled || len(calls[0].Stream) < 3 {
		t.Fatalf("the cut call is recorded as %+v", calls)
	}
	p := hStart(t, Options{Mode: Replay, Session: ses})
	rep := hDo(t, p.ts.URL, "/v1/messages", nil, hMsg(true, "x"))
	p.stop()
	if !bytes.Equal(live, rep.body) {
		t.Errorf("the replay of the cut stream differs from what the agent got:%s", hDiff(string(live), string(rep.body)))
	}
}

// TestATrickledRequestBodyTimesOut: a body that does not arrive within the body read timeout is
// answered 408 in the provider's error shape and holds nothing up.
func TestATrickledRequestBodyTimesOut(t *testing.T) {
	_, up := hFake(t, "turns:\n- text: ok\n")
	r := hStart(t, Options{Mode: Record, Dir: filepath.Join(t.TempDir(), "s"), ID: "s", Upstreams: map[string]string{"anthropic": up},
		BodyReadTimeout: 200 * time.Millisecond})
	defer r.stop()
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte(`{"model":"claude-x","max_tokens":1,"messages":[`)) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.ts.URL+"/v1/messages", pr)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !bytes.Contains(b, []byte(`"type":"error"`)) {
		t.Errorf("a trickled body got %d %s, want 408 in the provider's error shape", resp.StatusCode, b)
	}
}
