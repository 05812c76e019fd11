package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// relatedIssues is what the tracker finds for any query: the crash the new issue repeats, in code
// @editor-core owns.
const relatedIssues = `{"issues":[{"number":812,"title":"crash on save with unsaved buffers","owner":"@editor-core"}]}`

// trackerHandler is a stand-in issue tracker (`proxy-agent tracker [ADDR]` serves it). Its MCP server
// at /mcp (streamable HTTP) has the tool search_issues, which the agent calls through the proxy's
// /mcp/tracker; its HTTP tool backends are POST /search, the same search, and POST /label, which
// answers the labels the issue now has, behind the proxy's tool gateway.
func trackerHandler() http.Handler {
	mux := http.NewServeMux()
	server := trackerMCPServer()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		// Stateless: every request stands alone, so a tracker restarted between two calls loses nothing.
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	mux.HandleFunc("POST /search", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, relatedIssues)
	})
	mux.HandleFunc("POST /label", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Label string `json:"label"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || in.Label == "" {
			http.Error(w, `{"error":"send {\"label\": \"...\"}"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issue": 42, "labels": []string{in.Label}})
	})
	return mux
}

// searchArgs are search_issues's arguments, as the model sends them.
type searchArgs struct {
	Query string `json:"query" jsonschema:"what to look for in the tracker's issues"`
}

// trackerMCPServer is the tracker's MCP server: search_issues, answering the related issues as text.
func trackerMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tracker", Version: "v1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "search_issues", Description: "searches the tracker's issues"},
		func(context.Context, *mcp.CallToolRequest, searchArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: relatedIssues}}}, nil, nil
		})
	return s
}
