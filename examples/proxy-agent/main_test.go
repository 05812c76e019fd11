package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/evidence"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
	"github.com/agentrewind/agentrewind/internal/fakellm"
	"github.com/agentrewind/agentrewind/internal/proxy"
)

// providerKey is the key the proxy holds; the agent only ever has a placeholder.
const providerKey = "sk-ant-proxy-held-3b9e1c7a5d"

// goal is what a good run does: ask the code owners to review.
var goal = replay.Goal{Tool: "add_label", ArgsMatch: json.RawMessage(`{"label":"needs-owner-review"}`)}

// tracker is the issue tracker behind the proxy's tool gateway and MCP endpoint; it counts the
// requests that reach it, by method and path.
type tracker struct {
	mu    sync.Mutex
	calls []string
	url   string
	srv   *httptest.Server
}

func newTracker(t *testing.T) *tracker {
	tr := &tracker{}
	backend := trackerHandler()
	tr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.mu.Lock()
		tr.calls = append(tr.calls, r.Method+" "+r.URL.Path)
		tr.mu.Unlock()
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(tr.srv.Close)
	tr.url = tr.srv.URL
	return tr
}

// requests are the requests that reached the tracker so far.
func (tr *tracker) requests() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string{}, tr.calls...)
}

func (tr *tracker) tools() map[string]string {
	return map[string]string{"search_issues": tr.url + "/search", "add_label": tr.url + "/label"}
}

func (tr *tracker) count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.calls)
}

// proxyRun is internal/proxy serving one run, as `agentrewind proxy` does.
type proxyRun struct {
	url    string
	cancel context.CancelFunc
	done   chan *proxy.Outcome
}

func startProxy(t *testing.T, opts proxy.Options) *proxyRun {
	t.Helper()
	opts.Keys = redact.StaticKeyProvider(bytes.Repeat([]byte{9}, 32))
	opts.Config.Environ = func() []string { return nil }
	s, err := proxy.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	run := &proxyRun{cancel: cancel, done: make(chan *proxy.Outcome, 1)}
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
	return run
}

// stop is the proxy's SIGTERM: the run closes and commits its session.
func (r *proxyRun) stop(t *testing.T) *proxy.Outcome {
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

// runAgent runs the agent's main logic against the proxy with the environment a Job would give it,
// plus extra.
func runAgent(t *testing.T, p *proxyRun, extra ...string) string {
	t.Helper()
	env := map[string]string{"ANTHROPIC_BASE_URL": p.url, "ANTHROPIC_API_KEY": "placeholder", "AGENT_MODEL": "claude-test"}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	var out bytes.Buffer
	if err := run(t.Context(), func(k string) string { return env[k] }, &out); err != nil {
		t.Fatalf("the agent failed: %v", err)
	}
	return out.String()
}

func open(t *testing.T, dir string) *session.Session {
	t.Helper()
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTheAgentIsRecordedReplayedAndForkedThroughTheProxy is the proxy's promise for an unmodified
// SDK agent: record it in front of the fake LLM; replay it with no upstream at all (the fake's
// counter and the tracker do not move) and the agent prints the same; fork it at the labelling
// decision with the one-line system-prompt fix and the child reaches add_label{needs-owner-review},
// which the recording did not.
func TestTheAgentIsRecordedReplayedAndForkedThroughTheProxy(t *testing.T) {
	script, err := fakellm.Load("testdata/triage.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fake := fakellm.New(script)
	var keyMu sync.Mutex
	var keys []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keyMu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		keyMu.Unlock()
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(upstream.Close)
	tr := newTracker(t)
	root := t.TempDir()

	rec := startProxy(t, proxy.Options{Mode: proxy.Record, Dir: filepath.Join(root, "run"), ID: "run",
		Upstreams: map[string]string{"anthropic": upstream.URL}, APIKeys: map[string]string{"anthropic": providerKey}, Tools: tr.tools()})
	recorded := runAgent(t, rec)
	if out := rec.stop(t); out.Err != nil || out.Record == nil || out.Record.HarnessErr != nil {
		t.Fatalf("record: %+v", out)
	}
	if !strings.Contains(recorded, "issue #42 labelled bug\n") {
		t.Fatalf("the recorded run printed %q, want the flawed label bug", recorded)
	}
	if fake.Requests() != 3 || tr.count() != 2 {
		t.Fatalf("the recording made %d model and %d tool calls, want 3 and 2", fake.Requests(), tr.count())
	}
	for _, k := range keys {
		if k != providerKey {
			t.Fatalf("the upstream got key %q, want the proxy's", k)
		}
	}
	parent := open(t, filepath.Join(root, "run"))
	if replay.Trace(parent.Events).Reached(goal) {
		t.Fatal("the recording already reached the goal")
	}
	checkLedger(t, parent)

	// Replay: no upstream and no tool backend at all; the counters must not move.
	rep := startProxy(t, proxy.Options{Mode: proxy.Replay, Session: parent})
	replayed := runAgent(t, rep)
	out := rep.stop(t)
	if res, ok := proxy.ReplayResult("run", out.Replay, out.Err); !ok || !res.Passed || res.LiveCalls != 0 {
		t.Fatalf("replay result %+v (%v)", res, out.Err)
	}
	if diff := cmp.Diff(recorded, replayed); diff != "" {
		t.Fatalf("the replayed agent printed something else (-recorded +replayed):\n%s", diff)
	}
	if fake.Requests() != 3 || tr.count() != 2 {
		t.Fatalf("the replay went live: %d model and %d tool calls, want 3 and 2", fake.Requests(), tr.count())
	}

	// Fork at the labelling decision (the second model call) with the one-line fix. Tools never run
	// live in a fork: a call the recording does not hold (the new label) gets a stub.
	decision := modelCalls(parent)[1].Step
	fixed := FixedPrompt
	fork := startProxy(t, proxy.Options{Mode: proxy.Fork, Session: parent, Dir: filepath.Join(root, "child"), AtStep: decision,
		Overrides: replay.Overrides{System: &fixed}, Upstreams: map[string]string{"anthropic": upstream.URL},
		APIKeys: map[string]string{"anthropic": providerKey}, OnMiss: replay.OnMissStub, Goal: &goal})
	forked := runAgent(t, fork)
	out = fork.stop(t)
	if out.Err != nil || out.Fork == nil {
		t.Fatalf("fork: %+v", out)
	}
	// The Job result says the goal was reached: what a ForkRun's outcome is read from.
	if fr := proxy.ForkResult("run", decision, out.Fork); fr.ReachedGoal == nil || !*fr.ReachedGoal {
		t.Fatalf("the fork's result does not say the goal was reached: %+v", fr)
	}
	child := open(t, filepath.Join(root, "child"))
	if !replay.Trace(child.Events).Reached(goal) {
		t.Fatalf("the fork did not reach add_label{needs-owner-review}; it printed %q", forked)
	}
	if child.Meta.Parent != "run" || child.Meta.ForkedAtStep == nil || *child.Meta.ForkedAtStep != decision {
		t.Fatalf("child meta parent %q forkedAtStep %v, want run at %d", child.Meta.Parent, child.Meta.ForkedAtStep, decision)
	}
	// The prefix (the run id, the plan, the search) was served; only the decision and what followed went live.
	if first := strings.SplitN(forked, ":", 2)[0]; first != strings.SplitN(recorded, ":", 2)[0] {
		t.Fatalf("the fork drew another run id: %q vs %q", first, strings.SplitN(recorded, ":", 2)[0])
	}
	if !strings.Contains(forked, "labelled needs-owner-review\n") || fake.Requests() != 5 || tr.count() != 2 {
		t.Fatalf("fork printed %q after %d model and %d tool calls, want 5 and 2", forked, fake.Requests(), tr.count())
	}
}

func modelCalls(s *session.Session) []session.Event {
	var out []session.Event
	for _, ev := range s.Events {
		if ev.Kind == session.KindModelCall {
			out = append(out, ev)
		}
	}
	return out
}

// checkLedger asserts the agent's INTENT and step claims were recorded as its own, its checkpoint
// became the recorder's ANCHOR of the last turn, and the run, which ended with both steps' tools
// answered, is COMPLETE: the recorder witnessed the steps, the agent's claims alone would not do.
func checkLedger(t *testing.T, s *session.Session) {
	t.Helper()
	var ops []string
	for _, ev := range s.Events {
		if ev.Kind != session.KindLedger {
			continue
		}
		var rec struct {
			Op        string
			Step      string
			TurnIndex *int
		}
		_ = json.Unmarshal(ev.Ledger, &rec)
		op := rec.Op + " " + rec.Step
		switch {
		case rec.Op == "ANCHOR":
			if ev.Author != session.AuthorRecorder || rec.TurnIndex == nil || *rec.TurnIndex != 2 {
				t.Fatalf("ANCHOR %s by %s, want the recorder's stamp of turn 2", ev.Ledger, ev.Author)
			}
		case rec.Op == "END":
			// How the run ended is the recorder's word, never the agent's.
			if ev.Author != session.AuthorRecorder {
				t.Fatalf("END %s by %s, want the recorder's", ev.Ledger, ev.Author)
			}
		case ev.Author != session.AuthorAgent:
			t.Fatalf("%s is authored %s, want the agent", ev.Ledger, ev.Author)
		}
		ops = append(ops, strings.TrimSpace(op))
	}
	if diff := cmp.Diff([]string{"INTENT", "STEP_CLAIMED search", "STEP_CLAIMED label", "ANCHOR", "END"}, ops); diff != "" {
		t.Fatalf("ledger (-want +got):\n%s", diff)
	}
	policy := verdict.DefaultPolicy()
	g, err := evidence.Gather(s, nil, policy)
	if err != nil {
		t.Fatal(err)
	}
	plan := verdict.Evaluate(g.Facts, policy).Resume
	if plan.Verdict != resume.Complete || len(plan.Residual) != 0 || len(plan.Verified) != 2 {
		t.Fatalf("the finished run is judged %s, residual %v, %d verified: %s; want COMPLETE with both steps verified", plan.Verdict, plan.Residual, len(plan.Verified), plan.Message)
	}
}
