package mcptest

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Client is a go-sdk client session that counts what the server sent it unasked.
type Client struct {
	*mcp.ClientSession
	// Progress counts progress notifications; Sampled the sampling requests it answered.
	Progress atomic.Int32
	Sampled  atomic.Int32
}

// Connect connects a go-sdk client over r (what the server writes) and w (what it reads). Sampling
// requests are answered "forty-two".
func Connect(t *testing.T, r io.ReadCloser, w io.WriteCloser) *Client {
	t.Helper()
	c := &Client{}
	cl := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { c.Progress.Add(1) },
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			c.Sampled.Add(1)
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "forty-two"}}, nil
		},
	})
	cs, err := cl.Connect(context.Background(), &mcp.IOTransport{Reader: r, Writer: w}, nil)
	if err != nil {
		t.Fatalf("connecting the SDK client: %v", err)
	}
	c.ClientSession = cs
	return c
}

// Text joins the text contents of a tool result.
func Text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "|")
}

// Add calls the add tool and returns its text, failing the test on an error.
func Add(t *testing.T, c *mcp.ClientSession, a, b int) string {
	t.Helper()
	res, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": a, "b": b}})
	if err != nil {
		t.Fatalf("add(%d, %d): %v", a, b, err)
	}
	return Text(res)
}
