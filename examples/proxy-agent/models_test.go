package main

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/fakellm"
	"github.com/agentrewind/agentrewind/internal/proxy"
)

// TestTheAgentOnEachOpenAIAPIIsRecordedReplayedAndForked runs the agent on OpenAI's Chat Completions
// and Responses APIs (AGENT_API) through the proxy as on the Anthropic one: recorded in front of the
// fake model it labels bug; replayed, with the proxy told no provider (it takes the session's), it
// prints the same with no call upstream; forked at the labelling decision with the one-line fix it
// reaches add_label{needs-owner-review}.
func TestTheAgentOnEachOpenAIAPIIsRecordedReplayedAndForked(t *testing.T) {
	script, err := fakellm.Load("testdata/triage.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, api := range []string{APIOpenAI, APIOpenAIResponses} {
		t.Run(api, func(t *testing.T) {
			fake := fakellm.New(script)
			upstream := httptest.NewServer(fake)
			t.Cleanup(upstream.Close)
			ups := map[string]string{"openai": upstream.URL, "openai-responses": upstream.URL}
			tr := newTracker(t)
			root := t.TempDir()
			env := func(p *proxyRun) []string {
				return []string{"AGENT_API", api, "OPENAI_BASE_URL", p.url + "/v1", "OPENAI_API_KEY", "placeholder", "AGENT_MODEL", "gpt-test"}
			}

			rec := startProxy(t, proxy.Options{Mode: proxy.Record, Provider: api, Dir: filepath.Join(root, "run"), ID: "run", Upstreams: ups, Tools: tr.tools()})
			recorded := runAgent(t, rec, env(rec)...)
			if out := rec.stop(t); out.Err != nil || out.Record == nil || out.Record.HarnessErr != nil {
				t.Fatalf("record: %+v", out)
			}
			if !strings.Contains(recorded, "issue #42 labelled bug\n") || fake.Requests() != 3 || tr.count() != 2 {
				t.Fatalf("the recorded run printed %q after %d model and %d tool calls, want the flawed label bug after 3 and 2", recorded, fake.Requests(), tr.count())
			}
			parent := open(t, filepath.Join(root, "run"))
			if parent.Meta.Provider != api {
				t.Fatalf("the session records %q, want %s", parent.Meta.Provider, api)
			}
			checkLedger(t, parent)

			rep := startProxy(t, proxy.Options{Mode: proxy.Replay, Session: parent})
			replayed := runAgent(t, rep, env(rep)...)
			out := rep.stop(t)
			if res, ok := proxy.ReplayResult("run", out.Replay, out.Err); !ok || !res.Passed || res.LiveCalls != 0 {
				t.Fatalf("replay result %+v (%v)", res, out.Err)
			}
			if diff := cmp.Diff(recorded, replayed); diff != "" || fake.Requests() != 3 || tr.count() != 2 {
				t.Fatalf("the replay printed otherwise (-recorded +replayed):\n%s\nor went live: %d model and %d tool calls", diff, fake.Requests(), tr.count())
			}

			decision := modelCalls(parent)[1].Step
			fixed := FixedPrompt
			fork := startProxy(t, proxy.Options{Mode: proxy.Fork, Session: parent, Dir: filepath.Join(root, "child"), AtStep: decision,
				Overrides: replay.Overrides{System: &fixed}, Upstreams: ups, OnMiss: replay.OnMissStub, Goal: &goal})
			forked := runAgent(t, fork, env(fork)...)
			out = fork.stop(t)
			if out.Err != nil || out.Fork == nil {
				t.Fatalf("fork: %+v", out)
			}
			if fr := proxy.ForkResult("run", decision, out.Fork); fr.ReachedGoal == nil || !*fr.ReachedGoal {
				t.Fatalf("the fork did not reach the goal; it printed %q", forked)
			}
			if !strings.Contains(forked, "labelled needs-owner-review\n") || fake.Requests() != 5 {
				t.Fatalf("fork printed %q after %d model calls, want needs-owner-review after 5", forked, fake.Requests())
			}
		})
	}
}
