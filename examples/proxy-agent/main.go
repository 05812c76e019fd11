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

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
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

// config is what the agent reads from its environment.
type config struct {
	baseURL, proxyURL, apiKey, authToken, model string
	// trackerMCP, when set, is the tracker's MCP endpoint, which search_issues is called on; without
	// it, search_issues goes to the proxy's tool gateway like add_label.
	trackerMCP string
}

func configFrom(getenv func(string) string) (config, error) {
	c := config{baseURL: getenv("ANTHROPIC_BASE_URL"), proxyURL: getenv("AGENTREWIND_PROXY"),
		apiKey: getenv("ANTHROPIC_API_KEY"), authToken: getenv("ANTHROPIC_AUTH_TOKEN"), model: getenv("AGENT_MODEL"),
		trackerMCP: getenv(EnvTracker)}
	if c.baseURL == "" {
		return c, errors.New("ANTHROPIC_BASE_URL is not set: point it at agentrewind proxy")
	}
	if c.proxyURL == "" {
		c.proxyURL = c.baseURL
	}
	c.proxyURL = strings.TrimRight(c.proxyURL, "/")
	if c.model == "" {
		c.model = "claude-sonnet-4-5"
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
	opts := []option.RequestOption{option.WithBaseURL(cfg.baseURL)}
	switch {
	case cfg.apiKey != "":
		opts = append(opts, option.WithAPIKey(cfg.apiKey))
	case cfg.authToken != "":
		opts = append(opts, option.WithAuthToken(cfg.authToken))
	default:
		opts = append(opts, option.WithAPIKey("placeholder")) // the proxy holds the real key
	}
	a := &agent{cfg: cfg, client: sdk.NewClient(opts...), http: &http.Client{Timeout: 2 * time.Minute}}

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
		"goal": "triage issue #42", "steps": []map[string]string{{"id": "search", "text": "search related issues"}, {"id": "label", "text": "label the issue"}}}); err != nil {
		return err
	}
	// The tracker's MCP server, connected before the agent plans, as an agent connects to its servers.
	if cfg.trackerMCP != "" {
		if a.tracker, err = connectTracker(ctx, cfg.trackerMCP, a.http); err != nil {
			return err
		}
		defer a.tracker.Close()
	}

	params := sdk.MessageNewParams{Model: sdk.Model(cfg.model), MaxTokens: 1024,
		System:   []sdk.TextBlockParam{{Text: SystemPrompt}},
		Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(Issue))},
		Tools: []sdk.ToolUnionParam{
			tool("search_issues", "query"),
			tool("add_label", "label"),
		}}
	var labels []string
	var final string
	for turn := 0; turn < maxTurns; turn++ {
		msg, err := a.client.Messages.New(ctx, params)
		if err != nil {
			return fmt.Errorf("turn %d: %w", turn, err)
		}
		params.Messages = append(params.Messages, msg.ToParam())
		var results []sdk.ContentBlockParamUnion
		for _, block := range msg.Content {
			switch block.Type {
			case "text":
				final = block.Text
			case "tool_use":
				res, err := a.callTool(ctx, block.Name, block.Input)
				if err != nil {
					return fmt.Errorf("tool %s: %w", block.Name, err)
				}
				results = append(results, sdk.NewToolResultBlock(block.ID, string(res), false))
				step := map[string]string{"search_issues": "search", "add_label": "label"}[block.Name]
				if block.Name == "add_label" {
					var in struct{ Label string }
					_ = json.Unmarshal(block.Input, &in)
					labels = append(labels, in.Label)
				}
				if step != "" {
					if err := a.ledger(ctx, map[string]any{"schema": "agentrewind.io/ledger/v1", "op": "STEP_CLAIMED", "step": step}); err != nil {
						return err
					}
				}
			}
		}
		if msg.StopReason != sdk.StopReasonToolUse || len(results) == 0 {
			break
		}
		params.Messages = append(params.Messages, sdk.NewUserMessage(results...))
	}
	// Parked: the proxy stamps the checkpoint from the transcript it saw, whatever this record says.
	if err := a.ledger(ctx, map[string]any{"schema": "agentrewind.io/ledger/v1", "op": "SUSPEND"}); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "run %s: issue #42 labelled %s\n%s\n", id, strings.Join(labels, ","), final)
	return err
}

// tool is a tool taking one string argument.
func tool(name, arg string) sdk.ToolUnionParam {
	return sdk.ToolUnionParamOfTool(sdk.ToolInputSchemaParam{
		Properties: map[string]any{arg: map[string]string{"type": "string"}}, Required: []string{arg}}, name)
}

type agent struct {
	cfg     config
	client  sdk.Client
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
