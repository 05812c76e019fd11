package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/mcpproxy/mcptest"
)

// mcpEnv is the variable the operator gives an agent for the MCP server "my-tracker".
const mcpEnv = EnvMCPPrefix + "MY_TRACKER"

// mcpTrackerServer is a go-sdk MCP server behind the SDK's streamable HTTP handler; calls counts the
// tool calls it served.
func mcpTrackerServer(t *testing.T) (url string, calls *atomic.Int32) {
	t.Helper()
	calls = &atomic.Int32{}
	srv := mcptest.NewServer(mcptest.Hooks{OnCall: func(string) { calls.Add(1) }})
	hs := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", calls
}

// mcpAgent asks the model one question through the Anthropic SDK, then adds 2 and 3 on the MCP server
// the operator told it of (mcpEnv) with the go-sdk client, as a real agent configured only by its
// environment would; it exits 1 when either fails.
func mcpAgent(t *testing.T) agentFunc {
	return func(env map[string]string) int {
		c := sdk.NewClient(option.WithBaseURL(env[EnvAnthropicBaseURL]), option.WithAPIKey(env[EnvAnthropicAPIKey]), option.WithMaxRetries(0))
		if _, err := c.Messages.New(context.Background(), sdk.MessageNewParams{Model: "claude-test", MaxTokens: 16,
			Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hello"))}}); err != nil {
			t.Errorf("the model call: %v", err)
			return 1
		}
		cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "agent", Version: "v1"}, nil)
		cs, err := cl.Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: env[mcpEnv], MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Errorf("connecting to %s=%q: %v", mcpEnv, env[mcpEnv], err)
			return 1
		}
		defer cs.Close()
		res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}})
		if err != nil || mcptest.Text(res) != "5" {
			t.Errorf("add(2, 3) through the proxy: %v, %v", res, err)
			return 1
		}
		return 0
	}
}

// proxyMCPArgs are the values of the proxy container's --mcp-server flags.
func proxyMCPArgs(job *batchv1.Job) []string {
	args := job.Spec.Template.Spec.InitContainers[0].Args
	var out []string
	for i, a := range args {
		if a == "--mcp-server" && i+1 < len(args) {
			out = append(out, args[i+1])
		}
	}
	return out
}

// TestAnAgentsMCPServerIsRecordedAndReplayedWithoutCallingIt: spec.agent.mcpServers gives the recording's
// proxy the server (--mcp-server name=URL) and the agent its address on the proxy (AGENTREWIND_MCP_<NAME>);
// the real proxy records the agent's go-sdk calls. A replay's and a fork's proxies mount the server by
// name alone, with its URL nowhere in their pods, and the replay passes with the server never called.
func TestAnAgentsMCPServerIsRecordedAndReplayedWithoutCallingIt(t *testing.T) {
	e := newEnv(t)
	e.forkSecrets()
	e.startForkManager(nil)
	url, calls := mcpTrackerServer(t)
	servers := []v1alpha1.MCPServer{{Name: "my-tracker", URL: url}}

	s := newSession("mcprec", "mcprec")
	s.Spec.Agent = v1alpha1.AgentSpec{Image: agentImage, MCPServers: servers}
	s.Spec.ProviderKeys = v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: "llm-keys", Key: "anthropic"}}
	e.create(s)
	rec := e.waitJob("mcprec", recordPurpose)
	if d := diff([]string{"my-tracker=" + url}, proxyMCPArgs(rec)); d != "" {
		t.Errorf("the recording proxy's --mcp-server (-want +got):\n%s", d)
	}
	if got := envOf(rec.Spec.Template.Spec.Containers[0])[mcpEnv]; got.Value != "http://127.0.0.1:8787/mcp/my-tracker" {
		t.Errorf("the recording agent's %s = %+v, want the proxy's /mcp/my-tracker", mcpEnv, got)
	}
	_, upstream := fakeLLM(t, hiThere)
	if code, out := e.runForkPod(rec, mcpAgent(t), "--anthropic-upstream", upstream); code != 0 {
		t.Fatalf("the agent failed under the recording proxy:\n%s", out)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the MCP server served %d tool calls while recording, want the agent's 1", n)
	}
	e.runJob(e.waitJob("mcprec", "verify"))
	recorded := e.waitSession("mcprec", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified).Status.Recording
	// The tool events: the MCP initialize and the add, beside the model call.
	if *recorded.ModelCalls != 1 || *recorded.ToolCalls != 2 {
		t.Errorf("the recording holds %d model and %d tool calls, want 1 and 2 (my-tracker/initialize, my-tracker/tools/call)", *recorded.ModelCalls, *recorded.ToolCalls)
	}

	replay := newReplay("mcpreplay", "mcprec")
	replay.Spec.Agent.MCPServers = servers
	e.create(replay)
	fork := newFork("mcpfork", "mcprec", 1)
	fork.Spec.Agent.MCPServers = servers
	e.create(fork)
	for _, job := range []*batchv1.Job{e.waitJob("mcpreplay", "replay"), e.waitJob("mcpfork", "fork")} {
		if d := diff([]string{"my-tracker"}, proxyMCPArgs(job)); d != "" {
			t.Errorf("Job %s: the proxy's --mcp-server (-want +got):\n%s", job.Name, d)
		}
		if raw := fmt.Sprintf("%+v", job.Spec.Template.Spec); strings.Contains(raw, url) {
			t.Errorf("Job %s: the MCP server's URL is in the pod, where only a recording may call it", job.Name)
		}
		if got := envOf(job.Spec.Template.Spec.Containers[0])[mcpEnv]; got.Value != "http://127.0.0.1:8787/mcp/my-tracker" {
			t.Errorf("Job %s: the agent's %s = %+v", job.Name, mcpEnv, got)
		}
	}
	if code, out := e.runForkPod(e.waitJob("mcpreplay", "replay"), mcpAgent(t)); code != 0 {
		t.Fatalf("the agent failed under the replaying proxy:\n%s", out)
	}
	passed := e.waitForkRun("mcpreplay", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPassed)
	if n := calls.Load(); n != 1 {
		t.Errorf("the MCP server served %d tool calls after the replay, want the recording's 1 only", n)
	}
	if st := passed.Status; st.Divergences == nil || *st.Divergences != 0 || st.Usage.Live.TotalTokens == nil || *st.Usage.Live.TotalTokens != 0 {
		t.Errorf("the replay's status %+v, want no divergence and nothing spent live", st)
	}
}

// TestMCPServerEnvNames: the variable names a server as the agent's environment may spell it; the
// API's name pattern keeps two names from sharing one.
func TestMCPServerEnvNames(t *testing.T) {
	for name, want := range map[string]string{"tracker": "AGENTREWIND_MCP_TRACKER", "my-tracker": "AGENTREWIND_MCP_MY_TRACKER", "gh2": "AGENTREWIND_MCP_GH2"} {
		if got := MCPServerEnv(name); got != want {
			t.Errorf("MCPServerEnv(%q) = %s, want %s", name, got, want)
		}
	}
	for _, bad := range []string{"Tracker", "my_tracker", "a.b", "-x", "x-", strings.Repeat("a", 64)} {
		if _, err := mcpServerArgs([]v1alpha1.MCPServer{{Name: bad, URL: "http://h/mcp"}}, true); err == nil || !isSpecError(err) ||
			!strings.Contains(err.Error(), "spec.agent.mcpServers[0].name") {
			t.Errorf("mcpServerArgs with name %q: %v, want a spec error naming the field", bad, err)
		}
	}
	if _, err := mcpServerArgs([]v1alpha1.MCPServer{{Name: "t", URL: "http://user:pw@h/mcp"}}, false); err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("a URL with credentials: %v, want a spec error without the password", err)
	}
	// The operator's address wins over a variable of the same name in spec.agent.env.
	env := agentEnv([]corev1.EnvVar{{Name: EnvMCPPrefix + "T", Value: "http://elsewhere/mcp"}}, v1alpha1.MCPServer{Name: "t", URL: "http://h/mcp"})
	var got []string
	for _, v := range env {
		if strings.HasPrefix(v.Name, EnvMCPPrefix) {
			got = append(got, v.Name+"="+v.Value)
		}
	}
	if d := diff([]string{EnvMCPPrefix + "T=http://127.0.0.1:8787/mcp/t"}, got); d != "" {
		t.Errorf("the agent's MCP variables (-want +got):\n%s", d)
	}
}
