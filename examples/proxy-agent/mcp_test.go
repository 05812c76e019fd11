package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/proxy"
)

// TestTheAgentsMCPSearchIsRecordedAndReplayedWithTheTrackerStopped: given the tracker's MCP server
// (AGENTREWIND_MCP_TRACKER, the proxy's /mcp/tracker), the agent searches over MCP with the official
// go-sdk client and labels through the tool gateway. The real proxy records the MCP session beside the
// model calls; with the tracker stopped, a replay (the server mounted by name only) and a fork at the
// labelling decision answer the search from the recording, and no request reaches the tracker.
func TestTheAgentsMCPSearchIsRecordedAndReplayedWithTheTrackerStopped(t *testing.T) {
	fake, upstream, tr := triageBackends(t)
	root := t.TempDir()
	models := map[string]string{"anthropic": upstream.URL}
	keys := map[string]string{"anthropic": providerKey}

	// The gateway has add_label only: a search that did not go over MCP would fail the run.
	rec := startProxy(t, proxy.Options{Mode: proxy.Record, Dir: filepath.Join(root, "run"), ID: "run", Upstreams: models, APIKeys: keys,
		Tools: map[string]string{"add_label": tr.url + "/label"}, MCPServers: map[string]string{"tracker": tr.url + "/mcp"}})
	recorded := runAgent(t, rec, EnvTracker, rec.url+"/mcp/tracker")
	if out := rec.stop(t); out.Err != nil || out.Record == nil || out.Record.HarnessErr != nil {
		t.Fatalf("record: %+v", out)
	}
	if !strings.Contains(recorded, "issue #42 labelled bug\n") {
		t.Fatalf("the recorded run printed %q, want the flawed label bug", recorded)
	}
	reached := tr.requests()
	if !slices.Contains(reached, "POST /mcp") || !slices.Contains(reached, "POST /label") || slices.Contains(reached, "POST /search") {
		t.Fatalf("requests that reached the tracker: %v; want the search over MCP and the label over HTTP", reached)
	}
	parent := open(t, filepath.Join(root, "run"))
	var tools []string
	var search session.Event
	for _, ev := range parent.Events {
		if ev.Kind == session.KindToolCall {
			tools = append(tools, ev.Name)
			if ev.Name == "tracker/tools/call" {
				search = ev
			}
		}
	}
	if diff := cmp.Diff([]string{"tracker/initialize", "tracker/tools/call", "add_label"}, tools); diff != "" {
		t.Fatalf("recorded tool events (-want +got):\n%s", diff)
	}
	var args struct {
		Name      string
		Arguments map[string]string
	}
	if err := json.Unmarshal(search.Args, &args); err != nil || search.CallSite != "mcp.tracker" || args.Name != "search_issues" || args.Arguments["query"] != "editor crash on save" ||
		!strings.Contains(string(search.Result), "crash on save with unsaved buffers") {
		t.Fatalf("the recorded MCP call: call site %s, args %s, result %s", search.CallSite, search.Args, search.Result)
	}
	checkLedger(t, parent)

	tr.srv.Close()
	before := len(tr.requests())

	rep := startProxy(t, proxy.Options{Mode: proxy.Replay, Session: parent, MCPServers: map[string]string{"tracker": ""}})
	replayed := runAgent(t, rep, EnvTracker, rep.url+"/mcp/tracker")
	out := rep.stop(t)
	if res, ok := proxy.ReplayResult("run", out.Replay, out.Err); !ok || !res.Passed || res.LiveCalls != 0 {
		t.Fatalf("replay result %+v (%v)", res, out.Err)
	}
	if diff := cmp.Diff(recorded, replayed); diff != "" {
		t.Fatalf("the replayed agent printed something else (-recorded +replayed):\n%s", diff)
	}

	// The labelling decision, where hack/demo/manifests/04-forkruns.yaml forks: after session_start,
	// the entropy, INTENT, the MCP initialize, the plan, the MCP search and its STEP_CLAIMED.
	decision := modelCalls(parent)[1].Step
	if decision != 7 {
		t.Errorf("the labelling decision is step %d, want 7 (the demo's ForkRun forks there)", decision)
	}
	fixed := FixedPrompt
	fork := startProxy(t, proxy.Options{Mode: proxy.Fork, Session: parent, Dir: filepath.Join(root, "child"), AtStep: decision,
		Overrides: replay.Overrides{System: &fixed}, Upstreams: models, APIKeys: keys, OnMiss: replay.OnMissStub, Goal: &goal,
		MCPServers: map[string]string{"tracker": ""}})
	forked := runAgent(t, fork, EnvTracker, fork.url+"/mcp/tracker")
	out = fork.stop(t)
	if out.Err != nil || out.Fork == nil || out.Fork.ReachedGoal == nil || !*out.Fork.ReachedGoal {
		t.Fatalf("the fork printed %q and did not reach add_label{needs-owner-review}: %+v", forked, out)
	}
	if n := len(tr.requests()) - before; n != 0 {
		t.Fatalf("%d requests reached the stopped tracker during the replay and the fork, want none: %v", n, tr.requests()[before:])
	}
	if fake.Requests() != 5 {
		t.Errorf("%d model calls, want the recording's 3 and the fork's 2 live ones", fake.Requests())
	}
}

// Without the tracker's MCP endpoint the agent searches through the tool gateway, as before.
func TestTheAgentSearchesThroughTheGatewayWithoutTheTrackersMCPServer(t *testing.T) {
	cfg, err := configFrom(func(k string) string { return map[string]string{"ANTHROPIC_BASE_URL": "http://proxy"}[k] })
	if err != nil || cfg.trackerMCP != "" {
		t.Fatalf("config %+v, %v: want no MCP endpoint", cfg, err)
	}
	var got []string
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = append(got, r.URL.Path) }))
	t.Cleanup(gw.Close)
	a := &agent{cfg: config{proxyURL: gw.URL}, http: gw.Client()}
	if _, err := a.callTool(t.Context(), "search_issues", json.RawMessage(`{"query":"q"}`)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/v1/tools/search_issues"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
