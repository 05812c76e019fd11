package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// The operator's upstreams reach the proxy of a Fork Job as the proxy's own flags; a replay, which
// never goes upstream, gets none.
func TestForkProxyCallsTheOperatorsUpstreams(t *testing.T) {
	r := &ForkRunReconciler{Deps: Deps{
		Stores: &Stores{Config: StoreConfig{Endpoint: "http://store:7070", Bucket: "b"}},
		Jobs:   JobSettings{Upstreams: Upstreams{Anthropic: "http://llm-gateway.llm.svc:8080", OpenAI: "https://openai-gateway.example"}},
	}}
	s := &v1alpha1.AgentSession{Spec: v1alpha1.AgentSessionSpec{SessionID: "parent"}}
	s.Namespace = "ns"
	fork := &v1alpha1.ForkRun{Spec: v1alpha1.ForkRunSpec{Mode: v1alpha1.ModeFork}}
	args, err := r.proxyArgs(fork, s, r.Stores.LocationOf(s), forkStart{step: 3})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(args, " ")
	for _, want := range []string{"--anthropic-upstream http://llm-gateway.llm.svc:8080", "--openai-upstream https://openai-gateway.example"} {
		if !strings.Contains(joined, want) {
			t.Errorf("fork proxy args %q lack %q", joined, want)
		}
	}
	replayRun := &v1alpha1.ForkRun{Spec: v1alpha1.ForkRunSpec{Mode: v1alpha1.ModeReplay}}
	args, err = r.proxyArgs(replayRun, s, r.Stores.LocationOf(s), forkStart{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasSuffix(a, "-upstream") }) {
		t.Errorf("a replay's proxy got an upstream: %q", args)
	}
	if got := (Upstreams{}).proxyArgs(); len(got) != 0 {
		t.Errorf("no upstreams configured gave proxy args %q; the proxy's defaults should stand", got)
	}
}

// A base URL that would leak a credential into pod specs, or that the proxy cannot append paths to,
// is refused with the flag to fix, and the password never appears in the error.
func TestUpstreamsRefuseUnusableBaseURLs(t *testing.T) {
	for _, tc := range []struct {
		u        Upstreams
		wantFlag string
	}{
		{Upstreams{Anthropic: "ftp://gateway"}, "--anthropic-upstream"},
		{Upstreams{OpenAI: "http://user:hunter2@gateway:8080"}, "--openai-upstream"},
		{Upstreams{OpenAI: "http://user:hunter2@gateway:badport"}, "--openai-upstream"},
		{Upstreams{Anthropic: "http://gateway/?key=x"}, "--anthropic-upstream"},
		{Upstreams{Anthropic: "gateway:8080"}, "--anthropic-upstream"},
		{Upstreams{Anthropic: "http:///path"}, "--anthropic-upstream"},
	} {
		err := tc.u.Check()
		if err == nil || !strings.HasPrefix(err.Error(), tc.wantFlag+":") {
			t.Errorf("%+v: error %v, want one naming %s", tc.u, err, tc.wantFlag)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%+v: the error repeats the password: %v", tc.u, err)
		}
	}
	if err := (Upstreams{Anthropic: "http://10.96.0.80:8080", OpenAI: "https://gateway.example/openai"}).Check(); err != nil {
		t.Errorf("usable base URLs refused: %v", err)
	}
}

// The agent's tool backends reach the proxy of a recording as --tool flags; the proxies of forks and
// replays, which answer tool calls from the recording, get none, so they can call no tool. A backend
// URL with credentials is a spec error, never a pod spec, whatever admitted it.
func TestToolBackendsReachOnlyProxiesThatCallLive(t *testing.T) {
	tools := []v1alpha1.ToolBackend{{Name: "search_issues", URL: "http://tracker.demo.svc:8090/search"}, {Name: "add_label", URL: "https://tracker.example/label?team=editor"}}
	want := "--tool search_issues=http://tracker.demo.svc:8090/search --tool add_label=https://tracker.example/label?team=editor"
	deps := Deps{Scheme: apiServer.Scheme, Stores: &Stores{Config: StoreConfig{Endpoint: "http://store:7070", Bucket: "b"}}, Jobs: JobSettings{Image: "engine:1"}}

	rec := recordingSession("rec")
	rec.Namespace, rec.UID, rec.Spec.Agent.Tools = "ns", "uid-1", tools
	sessions := &AgentSessionReconciler{Deps: deps}
	job, err := sessions.recordJob(rec, deps.Stores.LocationOf(rec))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(job.Spec.Template.Spec.InitContainers[0].Args, " "); !strings.Contains(got, want) {
		t.Errorf("recording proxy args %q lack %q", got, want)
	}

	runs := &ForkRunReconciler{Deps: deps}
	parent := &v1alpha1.AgentSession{Spec: v1alpha1.AgentSessionSpec{SessionID: "parent"}}
	parent.Namespace, parent.Name = "ns", "parent"
	for _, mode := range []v1alpha1.ForkMode{v1alpha1.ModeFork, v1alpha1.ModeReplay} {
		fr := &v1alpha1.ForkRun{Spec: v1alpha1.ForkRunSpec{Mode: mode, Agent: v1alpha1.AgentSpec{Image: "agent:1", Tools: tools}}}
		fr.Namespace, fr.Name, fr.UID = "ns", "run-"+strings.ToLower(string(mode)), "uid-2"
		job, err := runs.forkRunJob(fr, parent, fr.Spec.Agent, forkStart{step: 3})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(job.Spec.Template.Spec.InitContainers[0].Args, " "); strings.Contains(got, "--tool") {
			t.Errorf("%s proxy args %q: a proxy that answers tools from the recording got a backend", mode, got)
		}
	}

	rec.Spec.Agent.Tools = []v1alpha1.ToolBackend{{Name: "search_issues", URL: "http://user:hunter2@tracker/search"}}
	_, err = sessions.recordJob(rec, deps.Stores.LocationOf(rec))
	var se *specError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "spec.agent.tools[0].url") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a backend with credentials: error %v, want a spec error naming spec.agent.tools[0].url without the password", err)
	}
}
