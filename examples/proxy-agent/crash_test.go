package main

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/evidence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
	"github.com/agentrewind/agentrewind/internal/fakellm"
	"github.com/agentrewind/agentrewind/internal/proxy"
)

// An agent killed after its search (AGENT_CRASH_AFTER_STEP=search) leaves a recording whose plan,
// judged with what ran it saw (killed), is RESUMABLE: the search is witnessed, the label is the
// residual, the re-entry point is after the search, and the run is suspended, so it is kept.
func TestAnAgentKilledAfterItsSearchIsResumableWithTheLabelLeft(t *testing.T) {
	fake, upstream, tr := triageBackends(t)
	killed := 0
	crash = func() { killed++ }
	t.Cleanup(func() { crash = func() { panic("crash called outside its test") } })

	dir := filepath.Join(t.TempDir(), "run")
	rec := startProxy(t, proxy.Options{Mode: proxy.Record, Dir: dir, ID: "run",
		Upstreams: map[string]string{"anthropic": upstream.URL}, APIKeys: map[string]string{"anthropic": providerKey}, Tools: tr.tools()})
	env := map[string]string{"ANTHROPIC_BASE_URL": rec.url, "ANTHROPIC_API_KEY": "placeholder", "AGENT_MODEL": "claude-test", EnvCrashAfter: "search"}
	var out bytes.Buffer
	if err := run(t.Context(), func(k string) string { return env[k] }, &out); !errors.Is(err, errCrashed) || killed != 1 {
		t.Fatalf("the agent: %v after %d crashes, want it to crash once after its search", err, killed)
	}
	if o := rec.stop(t); o.Err != nil {
		t.Fatalf("record: %+v", o)
	}
	if tr.count() != 1 || fake.Requests() != 1 {
		t.Fatalf("the crashed run made %d tool and %d model calls, want the search and the plan only", tr.count(), fake.Requests())
	}
	s := open(t, dir)
	policy := verdict.DefaultPolicy()
	g, err := evidence.Gather(s, nil, policy)
	if err != nil {
		t.Fatal(err)
	}
	g.Facts.Ledger = g.Facts.Ledger.Observed(ledger.RunEnd{How: ledger.EndKilled, Signal: "SIGKILL"})
	rep := verdict.Evaluate(g.Facts, policy)
	p := rep.Resume
	if p.Verdict != resume.Resumable || len(p.Residual) != 1 || p.Residual[0] != "label" || len(p.Verified) != 1 || p.ResumeAfterStep == nil {
		t.Fatalf("the killed run: %s, residual %v, verified %v, resume after %v: %s; want RESUMABLE with label left after the search",
			p.Verdict, p.Residual, p.Verified, p.ResumeAfterStep, p.Message)
	}
	if rep.Reachability.Reachability != resume.Reachable || rep.Reachability.Stop != ledger.StopKilled {
		t.Fatalf("reachability %+v, want reachable, stopped killed", rep.Reachability)
	}
}

// triageBackends are what a recording of the triage talks to: the fake model playing its script,
// served at upstream, and the tracker.
func triageBackends(t *testing.T) (*fakellm.Server, *httptest.Server, *tracker) {
	t.Helper()
	script, err := fakellm.Load("testdata/triage.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fake := fakellm.New(script)
	upstream := httptest.NewServer(fake)
	t.Cleanup(upstream.Close)
	return fake, upstream, newTracker(t)
}
