// Package mcpproxy stands in for an MCP server: it relays a client's JSON-RPC traffic to the real
// server (a child process over stdio, or an HTTP endpoint) and records the calls, or answers them from
// a recording with no server at all. What is recorded and how answers are built is decided in
// internal/engine/codec/mcp; this package owns the processes, pipes and HTTP requests, and reaches the
// recording only through replay.AgentContext.
package mcpproxy
