// Package proxy is the rewind proxy's HTTP surface: provider-compatible model endpoints (Anthropic
// Messages, OpenAI Chat Completions and Responses), a tool gateway, entropy, ledger and
// checkpoint endpoints, health and metrics — all over one run of the replay engine in record, replay
// or fork mode. Every request is one boundary crossing of that run; the engine decides what is live,
// served or drifted. It owns wire handling only: no matching, redaction or verdict logic lives here.
package proxy
