package fakellm_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// start serves script on a test server and returns the fake and its base URL.
func start(t *testing.T, script fakellm.Script) (*fakellm.Server, string) {
	t.Helper()
	fake := fakellm.New(script)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv.URL
}

// agentScript is testdata/agent.yaml: a coding agent whose step 2 depends on its system prompt.
func agentScript(t *testing.T) fakellm.Script {
	t.Helper()
	s, err := fakellm.Load("testdata/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// anthropicClient is the official SDK pointed at the fake, without retries so a fault shows at once.
func anthropicClient(url string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(url), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

// anthropicParams is a request with the given system prompt (none when empty) and messages.
func anthropicParams(system string, messages ...anthropic.MessageParam) anthropic.MessageNewParams {
	p := anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 1024, Messages: messages}
	if system != "" {
		p.System = []anthropic.TextBlockParam{{Text: system}}
	}
	return p
}

// anthropicStep1 and anthropicStep2 are the agent's first two calls.
func anthropicStep1() []anthropic.MessageParam {
	return []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Make the failing test pass."))}
}

func anthropicStep2() []anthropic.MessageParam {
	return append(anthropicStep1(),
		anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]string{"path": "main.go"}, "read_file")),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "package main\n", false)))
}

// post sends body to url+path and returns the status, headers and body of the answer.
func post(t *testing.T, url, path, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}
