package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SystemPrompt is the prompt the agent runs with.
const SystemPrompt = "You are the triage bot of the editor team. Search for related issues, then label the new issue."

// FixedPrompt is the one-line fix a fork applies as its system-prompt override.
const FixedPrompt = SystemPrompt + " Check CODEOWNERS: a crash in owned code is labelled needs-owner-review."

// Issue is the issue the agent triages.
const Issue = "New issue #42: the editor crashes on save when the buffer has unsaved changes (src/editor/save.go)."

// maxTurns bounds the conversation.
const maxTurns = 6

// EnvTracker is where the agent reaches the tracker's MCP server through the proxy: the variable the
// operator sets for the AgentSession's spec.agent.mcpServers entry named tracker.
const EnvTracker = "AGENTREWIND_MCP_TRACKER"

// The model APIs the agent speaks (AGENT_API), each through its provider's official SDK.
const (
	APIAnthropic       = "anthropic"        // the Messages API, ANTHROPIC_BASE_URL (the default)
	APIOpenAI          = "openai"           // Chat Completions, OPENAI_BASE_URL
	APIOpenAIResponses = "openai-responses" // the Responses API, OPENAI_BASE_URL
)

// config is what the agent reads from its environment.
type config struct {
	api                                         string
	baseURL, proxyURL, apiKey, authToken, model string
	// trackerMCP, when set, is the tracker's MCP endpoint, which search_issues is called on; without
	// it, search_issues goes to the proxy's tool gateway like add_label.
	trackerMCP string
	// crashAfter, when set, is a step id: once the agent claimed it, it is killed (EnvCrashAfter).
	crashAfter string
}

// EnvCrashAfter names a step after whose claim the agent ends as a process killed by SIGKILL does, as
// running out of memory or a node going away would end it: how the demo and the end-to-end suite show
// a crashed run, which its ResumePlan judges RESUMABLE with the rest of the plan as its residual.
const EnvCrashAfter = "AGENT_CRASH_AFTER_STEP"

// crash ends the agent with the status of a SIGKILL (137): a container's first process cannot signal
// itself, the kernel ignores it. Tests replace it.
var crash = func() { os.Exit(128 + int(syscall.SIGKILL)) }

func configFrom(getenv func(string) string) (config, error) {
	c := config{api: getenv("AGENT_API"), proxyURL: getenv("AGENTREWIND_PROXY"), model: getenv("AGENT_MODEL"), trackerMCP: getenv(EnvTracker),
		crashAfter: getenv(EnvCrashAfter)}
	base, model := "ANTHROPIC_BASE_URL", "claude-sonnet-4-5"
	switch c.api {
	case "", APIAnthropic:
		c.api = APIAnthropic
		c.baseURL, c.apiKey, c.authToken = getenv(base), getenv("ANTHROPIC_API_KEY"), getenv("ANTHROPIC_AUTH_TOKEN")
	case APIOpenAI, APIOpenAIResponses:
		base, model = "OPENAI_BASE_URL", "gpt-4.1-mini"
		c.baseURL, c.apiKey = getenv(base), getenv("OPENAI_API_KEY")
	default:
		return c, fmt.Errorf("AGENT_API %q: use %s, %s or %s", c.api, APIAnthropic, APIOpenAI, APIOpenAIResponses)
	}
	if c.baseURL == "" {
		return c, fmt.Errorf("%s is not set: point it at agentrewind proxy", base)
	}
	if c.proxyURL == "" {
		// The SDKs' base URLs: the proxy itself for Anthropic's, its /v1 for OpenAI's.
		c.proxyURL = strings.TrimSuffix(strings.TrimRight(c.baseURL, "/"), "/v1")
	}
	c.proxyURL = strings.TrimRight(c.proxyURL, "/")
	if c.model == "" {
		c.model = model
	}
	return c, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "tracker" {
		addr := "127.0.0.1:9090"
		if len(os.Args) > 2 {
			addr = os.Args[2]
		}
		srv := &http.Server{Addr: addr, Handler: trackerHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { <-ctx.Done(); _ = srv.Close() }()
		fmt.Fprintln(os.Stderr, "proxy-agent tracker listening on", addr)
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "proxy-agent tracker:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "proxy-agent:", err)
		os.Exit(1)
	}
}

// run triages Issue and writes what it did to out.
func run(ctx context.Context, getenv func(string) string, out io.Writer) error {
	cfg, err := configFrom(getenv)
	if err != nil {
		return err
	}
	a := &agent{cfg: cfg, http: &http.Client{Timeout: 2 * time.Minute}}
	conv := newConversation(cfg)

	drawn, err := a.get(ctx, "/v1/entropy/uuid")
	if err != nil {
		return err
	}
	var entropy struct{ UUID string }
	if err := json.Unmarshal(drawn, &entropy); err != nil || entropy.UUID == "" {
		return fmt.Errorf("the proxy drew no uuid: %s", drawn)
	}
	id := entropy.UUID
	if err := a.ledger(ctx, map[string]any{"schema": "agentrewind.io/ledger/v1", "op": "INTENT", "runId": id,
		"goal": "triage issue #42", "steps": []map[string]any{
			// The tools whose answers complete each step: the recorder sees them, so it verifies the
			// step without the agent's word.
			{"id": "search", "text": "search related issues", "tools": []string{"search_issues"}},
			{"id": "label", "text": "label the issue", "tools": []string{"add_label"}}}}); err != nil {
		return err
	}
	// The tracker's MCP server, connected before the agent plans, as an agent connects to its servers.
	if cfg.trackerMCP != "" {
		if a.tracker, err = connectTracker(ctx, cfg.trackerMCP, a.http); err != nil {
			return err
		}
		defer a.tracker.Close()
	}

	var labels []string
	var final string
	for turn := 0; turn < maxTurns; turn++ {
		text, calls, ended, err := conv.next(ctx)
		if err != nil {
			return fmt.Errorf("turn %d: %w", turn, err)
		}
		if text != "" {
			final = text
		}
		results := make([]string, len(calls))
		for i, call := range calls {
			res, err := a.callTool(ctx, call.name, call.input)
			if err != nil {
				return fmt.Errorf("tool %s: %w", call.name, err)
			}
			results[i] = string(res)
			step := map[string]string{"search_issues": "search", "add_label": "label"}[call.name]
			if call.name == "add_label" {
				var in struct{ Label string }
				_ = json.Unmarshal(call.input, &in)
				labels = append(labels, in.Label)
			}
			if step != "" {
				if err := a.ledger(ctx, map[string]any{"schema": "agentrewind.io/ledger/v1", "op": "STEP_CLAIMED", "step": step}); err != nil {
					return err
				}
				if step == cfg.crashAfter {
					crash()
					return errCrashed
				}
			}
		}
		if ended || len(calls) == 0 {
			break
		}
		conv.answer(calls, results)
	}
	// An anchor of the finished conversation, to fork or rewind to later: the proxy stamps it from
	// the transcript it saw. It does not park the run, which ends here.
	if _, err := a.post(ctx, "/v1/checkpoint", []byte("{}")); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "run %s: issue #42 labelled %s\n%s\n", id, strings.Join(labels, ","), final)
	return err
}

// errCrashed is what run returns where a test's crash returned instead of killing the agent.
var errCrashed = errors.New("crashed on purpose (" + EnvCrashAfter + ")")

type agent struct {
	cfg     config
	http    *http.Client
	tracker *mcp.ClientSession // the tracker's MCP server, when the agent was given one
}

// connectTracker opens an MCP session with the tracker's server at endpoint (the proxy's
// /mcp/tracker) over streamable HTTP.
func connectTracker(ctx context.Context, endpoint string, hc *http.Client) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "proxy-agent", Version: "v1.0.0"}, nil)
	// No standalone event stream: the tracker sends nothing unasked, and the proxy offers none.
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to the tracker's MCP server (%s): %w", EnvTracker, err)
	}
	return cs, nil
}

// callTool runs one of the model's tool calls: search_issues on the tracker's MCP server when the
// agent has one, every other call through the proxy's tool gateway.
func (a *agent) callTool(ctx context.Context, name string, input json.RawMessage) ([]byte, error) {
	if name != "search_issues" || a.tracker == nil {
		return a.post(ctx, "/v1/tools/"+name, input)
	}
	res, err := a.tracker.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: input})
	if err != nil {
		return nil, err
	}
	var text []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	if res.IsError {
		return nil, fmt.Errorf("the tracker answered an error: %s", strings.Join(text, " "))
	}
	return []byte(strings.Join(text, "\n")), nil
}

func (a *agent) ledger(ctx context.Context, record map[string]any) error {
	b, err := json.Marshal(record)
	if err != nil {
		return err
	}
	_, err = a.post(ctx, "/v1/ledger", b)
	return err
}

func (a *agent) get(ctx context.Context, path string) ([]byte, error) {
	return a.do(ctx, http.MethodGet, path, nil)
}

func (a *agent) post(ctx context.Context, path string, body []byte) ([]byte, error) {
	return a.do(ctx, http.MethodPost, path, body)
}

func (a *agent) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.cfg.proxyURL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}
