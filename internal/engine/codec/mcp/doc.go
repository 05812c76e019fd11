// Package mcp is the pure part of recording Model Context Protocol traffic: it parses and writes
// JSON-RPC 2.0 frames, decides which requests are recorded and under which tool name and arguments,
// and turns what the engine answers (a recorded result, a recorded error, a drift) back into the
// JSON-RPC response a client expects. It does no I/O: the processes, pipes and HTTP around it live in
// internal/mcpproxy and internal/proxy.
//
// A recorded request is a tool_call event named "<server>/<method>" (e.g. "weather/tools/call") with
// the request's params, minus _meta, as its arguments and the JSON-RPC result as its result; a
// JSON-RPC error answer is the event's error (name JSONRPCError, message "[code] text"). The server's
// name is also the call site ("mcp.<server>"), so two servers' identical calls never answer each other.
package mcp
