// Package mcptest is a small MCP tool server built with the official Go SDK, for the tests of the MCP
// stand-in on both transports: tools that add, leak a secret, report progress, ask the client to
// sample and crash, and a hook that counts every call the real server serves.
package mcptest
