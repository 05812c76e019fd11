package mcptest

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Secret is what the secret_lookup tool answers with; tests declare it and check it is never stored.
const Secret = "hunter2-correct-horse-battery"

// Hooks observe the server: OnCall sees every tool call it serves, OnCrash is the crash tool.
type Hooks struct {
	OnCall  func(tool string)
	OnCrash func()
}

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

type slowArgs struct {
	Steps int `json:"steps"`
}

type askArgs struct {
	Question string `json:"question"`
}

type lookupArgs struct {
	Key string `json:"key"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// NewServer is the test server.
func NewServer(h Hooks) *mcp.Server {
	called := func(name string) {
		if h.OnCall != nil {
			h.OnCall(name)
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "v1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "adds two integers"},
		func(_ context.Context, _ *mcp.CallToolRequest, in addArgs) (*mcp.CallToolResult, any, error) {
			called("add")
			return text(fmt.Sprint(in.A + in.B)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "secret_lookup", Description: "answers with a credential"},
		func(_ context.Context, _ *mcp.CallToolRequest, in lookupArgs) (*mcp.CallToolResult, any, error) {
			called("secret_lookup")
			return text(in.Key + "=" + Secret), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "reports progress, then finishes"},
		func(ctx context.Context, req *mcp.CallToolRequest, in slowArgs) (*mcp.CallToolResult, any, error) {
			called("slow")
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= in.Steps; i++ {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(in.Steps)}); err != nil {
						return nil, nil, err
					}
				}
			}
			return text(fmt.Sprintf("done after %d steps", in.Steps)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "asks the client's model (sampling)"},
		func(ctx context.Context, req *mcp.CallToolRequest, in askArgs) (*mcp.CallToolResult, any, error) {
			called("ask")
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 64,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Question}}}})
			if err != nil {
				return nil, nil, err
			}
			t, _ := res.Content.(*mcp.TextContent)
			if t == nil {
				return nil, nil, fmt.Errorf("the client sampled %T, not text", res.Content)
			}
			return text("the model said: " + t.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Description: "waits until the call is canceled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			called("wait")
			<-ctx.Done()
			called("wait canceled")
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "dies mid-call"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			called("crash")
			if h.OnCrash != nil {
				h.OnCrash()
			}
			return nil, nil, fmt.Errorf("crash: no crash hook")
		})
	return s
}

// Environment of a re-executed test binary that is to be the stdio server.
const (
	EnvChild = "AGENTREWIND_MCPTEST_SERVER"
	EnvLog   = "AGENTREWIND_MCPTEST_LOG"
)

// ChildEnv is the environment that makes a test binary run as the stdio server (RunIfChild), logging
// "start" and "call <tool>" lines to log.
func ChildEnv(log string) []string {
	return append(os.Environ(), EnvChild+"=1", EnvLog+"="+log)
}

// RunIfChild runs the stdio server and exits when the process was started with ChildEnv; call it
// first in TestMain.
func RunIfChild() {
	if os.Getenv(EnvChild) != "1" {
		return
	}
	logLine("start")
	// A careless server logs its credential, in pieces and without a last newline: the proxy must
	// redact it out of its own stderr.
	fmt.Fprint(os.Stderr, "mcptest: starting with token "+Secret[:7])
	fmt.Fprintln(os.Stderr, Secret[7:])
	s := NewServer(Hooks{OnCall: func(tool string) {
		logLine("call " + tool)
		if tool == "secret_lookup" {
			fmt.Fprint(os.Stderr, "mcptest: answered db="+Secret[:3])
			fmt.Fprintln(os.Stderr, Secret[3:])
		}
	}, OnCrash: func() { os.Exit(3) }})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	fmt.Fprint(os.Stderr, "mcptest: bye "+Secret)
	os.Exit(0)
}

func logLine(s string) {
	f, err := os.OpenFile(os.Getenv(EnvLog), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(s + "\n")
}

// Log reads a child's log: how many times it started and the tools it served, in order.
func Log(path string) (starts int, calls []string) {
	data, _ := os.ReadFile(path)
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		switch {
		case l == "start":
			starts++
		case strings.HasPrefix(l, "call "):
			calls = append(calls, strings.TrimPrefix(l, "call "))
		}
	}
	return starts, calls
}
