// Command proxy-agent is an issue-triage agent on the official Anthropic Go SDK (or, with AGENT_API
// openai or openai-responses, the official OpenAI Go SDK on Chat Completions or the Responses API) that
// knows agentrewind only as a base URL (ANTHROPIC_BASE_URL, or OPENAI_BASE_URL; any placeholder key,
// the proxy holds the real one): it plans with the model, calls search_issues on the tracker's MCP
// server through the proxy (AGENTREWIND_MCP_TRACKER, with the official MCP go-sdk; without it, through
// the tool gateway) and add_label through the proxy's tool gateway, draws its run id from the proxy's
// entropy and writes INTENT, STEP_CLAIMED and SUSPEND ledger records. Its flaw is on purpose: it labels a crash in owned
// code "bug"; the one-line fix FixedPrompt makes it ask for needs-owner-review.
// `proxy-agent tracker [ADDR]` serves the stand-in tracker its tools call, MCP server included.
package main
