// Package fakellm is a deterministic, scripted stand-in for the Anthropic Messages, OpenAI Chat
// Completions and OpenAI Responses APIs, the upstream the rewind proxy talks to in tests, benchmarks,
// the demo and the end-to-end suite. It owns the script format (script.go), how a request selects a
// turn (match.go), the providers' wire shapes, JSON and SSE (anthropic.go, openai.go, responses.go),
// and injected faults.
//
// Its answers depend only on the script and the request: no clock, no randomness, so the same script
// and the same request give byte-identical responses from any server. The one thing it remembers is
// which Responses API ids it minted, so that previous_response_id chains work as upstream. It must
// not call a real model or read credentials; it checks requests only as far as the providers' own
// 400s go.
package fakellm
