package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestReplayServesTheLiveSpellingOfHTMLCharacters: text holding '<', '>', '&', U+2028 and U+2029 —
// spelled literally or escaped by the upstream (a Go gateway escapes them) — reaches the agent with the
// same bytes live and replayed, for both providers, JSON and streamed.
func TestReplayServesTheLiveSpellingOfHTMLCharacters(t *testing.T) {
	const literal = "a <b> & c \u2028 d \u2029"
	const escaped = `a \u003cb\u003e \u0026 c \u2028 d \u2029`
	for _, spelling := range []string{literal, escaped} {
		anthropicJSON := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"` + spelling +
			`"},{"type":"tool_use","id":"toolu_1","name":"t","input":{"q":"` + spelling + `"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`
		anthropicSSE := hSSE(
			"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`,
			"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+spelling+`"}}`,
			"content_block_stop", `{"type":"content_block_stop","index":0}`,
			"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`,
			"message_stop", `{"type":"message_stop"}`)
		openaiJSON := `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"` + spelling +
			`","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
		openaiSSE := "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"" + spelling +
			"\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
		for _, tc := range []struct {
			provider, path string
			stream         bool
			body           string
			req            []byte
		}{
			{"anthropic", "/v1/messages", false, anthropicJSON, hMsg(false, "x")},
			{"anthropic", "/v1/messages", true, anthropicSSE, hMsg(true, "x")},
			{"openai", "/v1/chat/completions", false, openaiJSON, hOpenAIMsg(false, "x")},
			{"openai", "/v1/chat/completions", true, openaiSSE, hOpenAIMsg(true, "x")},
		} {
			name := tc.provider + map[bool]string{false: "/json", true: "/stream"}[tc.stream] + map[bool]string{false: "/literal", true: "/escaped"}[spelling == escaped]
			t.Run(name, func(t *testing.T) {
				h := func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", map[bool]string{false: "application/json", true: "text/event-stream"}[tc.stream])
					_, _ = io.WriteString(w, tc.body)
				}
				live, rep, _ := hOnce(t, tc.provider, h, tc.path, tc.req)
				if live.status != http.StatusOK {
					t.Fatalf("live %d %s", live.status, live.body)
				}
				if !strings.Contains(string(live.body), "a <b> & c") {
					t.Errorf("the live answer does not spell the characters as the providers do: %s", live.body)
				}
				hSame(t, live, rep)
			})
		}
	}
}
