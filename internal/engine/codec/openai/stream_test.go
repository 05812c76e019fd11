package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/openai/openai-go/v3"

	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// sse joins event data into a text/event-stream body in the API's layout.
func sse(data ...string) string {
	var b strings.Builder
	for _, d := range data {
		b.WriteString("data: " + d + "\n\n")
	}
	return b.String()
}

// chunk is a chat.completion.chunk with the envelope every chunk of a stream repeats.
func chunk(id, choices, rest string) string {
	return `{"id":"` + id + `","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_s","choices":` + choices + rest + `}`
}

// Streams in the shape the API sends them (see the SDK's ChatCompletionChunk), obfuscation included.
var (
	textStream = sse(
		chunk("chatcmpl-text", `[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`, `,"usage":null,"obfuscation":"x1"`),
		chunk("chatcmpl-text", `[{"index":0,"delta":{"content":"Paris"},"logprobs":null,"finish_reason":null}]`, `,"usage":null,"obfuscation":"x2y"`),
		chunk("chatcmpl-text", `[{"index":0,"delta":{"content":" is sunny <and>"},"logprobs":null,"finish_reason":null}]`, `,"usage":null,"obfuscation":"x3"`),
		chunk("chatcmpl-text", `[{"index":0,"delta":{"content":" 18°C & calm."},"logprobs":null,"finish_reason":null}]`, `,"usage":null,"obfuscation":"x4yz"`),
		chunk("chatcmpl-text", `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`, `,"usage":null,"obfuscation":"x5"`),
		chunk("chatcmpl-text", `[]`, `,"usage":{"prompt_tokens":2050,"completion_tokens":10,"total_tokens":2060,"prompt_tokens_details":{"cached_tokens":2048,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"x6"`),
		"[DONE]",
	)

	// Two parallel tool calls whose argument deltas interleave and split the JSON anywhere.
	toolStream = sse(
		chunk("chatcmpl-tools", `[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_paris","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}]`, ``),
		chunk("chatcmpl-tools", `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"loc"}}]},"logprobs":null,"finish_reason":null}]`, ``),
		chunk("chatcmpl-tools", `[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_oslo","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]`, ``),
		chunk("chatcmpl-tools", `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ation\": \"Par"}},{"index":1,"function":{"arguments":"{\"location\""}}]},"logprobs":null,"finish_reason":null}]`, ``),
		chunk("chatcmpl-tools", `[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":": \"Oslo, Norway\", \"unit\": \"cel"}}]},"logprobs":null,"finish_reason":null}]`, ``),
		chunk("chatcmpl-tools", `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"is, France\", \"unit\": \"celsius\"}"}}]},"logprobs":null,"finish_reason":null}]`, ``),
		chunk("chatcmpl-tools", `[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"sius\"}"}}]},"logprobs":null,"finish_reason":null}]`, ``),
		chunk("chatcmpl-tools", `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]`, ``),
		"[DONE]",
	)

	// Two choices (n=2) whose chunks interleave, with log probabilities.
	twoChoiceStream = sse(
		chunk("chatcmpl-two", `[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":{"content":[],"refusal":null},"finish_reason":null}]`, ``),
		chunk("chatcmpl-two", `[{"index":1,"delta":{"role":"assistant","content":""},"logprobs":{"content":[],"refusal":null},"finish_reason":null}]`, ``),
		chunk("chatcmpl-two", `[{"index":0,"delta":{"content":"Yes"},"logprobs":{"content":[{"token":"Yes","logprob":-0.01,"bytes":[89,101,115],"top_logprobs":[]}],"refusal":null},"finish_reason":null}]`, ``),
		chunk("chatcmpl-two", `[{"index":1,"delta":{"content":"No"},"logprobs":{"content":[{"token":"No","logprob":-4.2,"bytes":[78,111],"top_logprobs":[]}],"refusal":null},"finish_reason":null}]`, ``),
		chunk("chatcmpl-two", `[{"index":0,"delta":{"content":"."},"logprobs":{"content":[{"token":".","logprob":0,"bytes":[46],"top_logprobs":[]}],"refusal":null},"finish_reason":null}]`, ``),
		chunk("chatcmpl-two", `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`, ``),
		chunk("chatcmpl-two", `[{"index":1,"delta":{},"logprobs":null,"finish_reason":"length"}]`, ``),
		"[DONE]",
	)

	refusalStream = sse(
		chunk("chatcmpl-refusal", `[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"logprobs":null,"finish_reason":null}]`, ``),
		chunk("chatcmpl-refusal", `[{"index":0,"delta":{"refusal":"I can't"},"logprobs":null,"finish_reason":null}]`, ``),
		chunk("chatcmpl-refusal", `[{"index":0,"delta":{"refusal":" help with that."},"logprobs":null,"finish_reason":null}]`, ``),
		chunk("chatcmpl-refusal", `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`, ``),
		"[DONE]",
	)

	errorStream = sse(
		chunk("chatcmpl-err", `[{"index":0,"delta":{"role":"assistant","content":"Partial"},"logprobs":null,"finish_reason":null}]`, ``),
		`{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`,
	)
)

func TestStreamsRebuildForTheSDK(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantStop  string
		wantUsage *session.Usage
		// wantContent is the assembled first choice's message, as JSON.
		wantContent string
		check       func(t *testing.T, acc *sdk.ChatCompletion)
	}{
		{
			name:        "text with the include_usage chunk at the end",
			body:        textStream,
			wantStop:    "stop",
			wantUsage:   &session.Usage{InputTokens: 2050, OutputTokens: 10, CacheReadInputTokens: 2048},
			wantContent: `{"role":"assistant","content":"Paris is sunny <and> 18°C & calm.","refusal":null}`,
			check: func(t *testing.T, acc *sdk.ChatCompletion) {
				if acc.Choices[0].Message.Content != "Paris is sunny <and> 18°C & calm." || acc.Usage.PromptTokensDetails.CachedTokens != 2048 {
					t.Errorf("the SDK accumulated %q and %d cached tokens", acc.Choices[0].Message.Content, acc.Usage.PromptTokensDetails.CachedTokens)
				}
			},
		},
		{
			name:     "parallel tool calls with arguments split anywhere",
			body:     toolStream,
			wantStop: "tool_calls",
			wantContent: `{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"call_paris","type":"function","function":{"name":"get_weather","arguments":"{\"location\": \"Paris, France\", \"unit\": \"celsius\"}"}},` +
				`{"id":"call_oslo","type":"function","function":{"name":"get_weather","arguments":"{\"location\": \"Oslo, Norway\", \"unit\": \"celsius\"}"}}],"refusal":null}`,
			check: func(t *testing.T, acc *sdk.ChatCompletion) {
				wantToolCalls(t, acc.Choices[0].Message.ToolCalls, []toolCall{
					{"call_paris", "get_weather", map[string]any{"location": "Paris, France", "unit": "celsius"}},
					{"call_oslo", "get_weather", map[string]any{"location": "Oslo, Norway", "unit": "celsius"}},
				})
			},
		},
		{
			name:        "two interleaved choices with log probabilities",
			body:        twoChoiceStream,
			wantStop:    "stop",
			wantContent: `{"role":"assistant","content":"Yes."}`,
			check: func(t *testing.T, acc *sdk.ChatCompletion) {
				if len(acc.Choices) != 2 || acc.Choices[1].Message.Content != "No" || acc.Choices[1].FinishReason != "length" || len(acc.Choices[0].Logprobs.Content) != 2 {
					t.Errorf("the SDK accumulated %+v", acc.Choices)
				}
			},
		},
		{
			name:        "a refusal",
			body:        refusalStream,
			wantStop:    "stop",
			wantContent: `{"role":"assistant","content":null,"refusal":"I can't help with that."}`,
			check: func(t *testing.T, acc *sdk.ChatCompletion) {
				if acc.Choices[0].Message.Refusal != "I can't help with that." {
					t.Errorf("the SDK accumulated refusal %q", acc.Choices[0].Message.Refusal)
				}
			},
		},
		{
			name:        "an error event ends the stream where the server ended it",
			body:        errorStream,
			wantContent: `{"role":"assistant","content":"Partial"}`,
			check:       func(t *testing.T, acc *sdk.ChatCompletion) {},
		},
	}
	var c openai.Codec
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, chunks, err := c.NormalizeStream([]byte(tt.body))
			if err != nil {
				t.Fatalf("NormalizeStream: %v", err)
			}
			if got, want := len(chunks), strings.Count(tt.body, "data: "); got != want {
				t.Errorf("%d chunks for %d events", got, want)
			}
			assertChunkShape(t, chunks)
			assertJSONEqual(t, resp.Content, []byte(tt.wantContent))
			if resp.StopReason != tt.wantStop {
				t.Errorf("StopReason = %q, want %q", resp.StopReason, tt.wantStop)
			}
			if diff := cmp.Diff(tt.wantUsage, resp.Usage); diff != "" {
				t.Errorf("Usage (-want +got):\n%s", diff)
			}

			original := consumeStream(t, []byte(tt.body))
			tt.check(t, &original.acc.ChatCompletion)
			rebuilt := c.RebuildStream(chunks)
			assertSameStream(t, consumeStream(t, rebuilt), original)

			// The assembled response is the completion the SDK accumulates from the stream.
			final, err := c.DenormalizeResponse(resp)
			if err != nil {
				t.Fatalf("DenormalizeResponse: %v", err)
			}
			assertSameCompletion(t, newCompletion(t, final), &original.acc.ChatCompletion)

			again, againChunks, err := c.NormalizeStream(rebuilt)
			if err != nil {
				t.Fatalf("NormalizeStream of the rebuilt stream: %v", err)
			}
			if diff := cmp.Diff(chunks, againChunks); diff != "" {
				t.Fatalf("normalizing the rebuilt stream gives other chunks (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(resp, again); diff != "" {
				t.Fatalf("normalizing the rebuilt stream gives another response (-want +got):\n%s", diff)
			}
		})
	}
}

// assertChunkShape checks every chunk is an event with JSON data or the terminator, offsets left to
// the caller.
func assertChunkShape(t *testing.T, chunks []session.Chunk) {
	t.Helper()
	for i, ch := range chunks {
		var d struct {
			Data json.RawMessage `json:"data"`
			Done bool            `json:"done"`
		}
		if err := json.Unmarshal(ch.Data, &d); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if ch.OffsetMs != 0 {
			t.Errorf("chunk %d has offset %d; offsets are the caller's", i, ch.OffsetMs)
		}
		if d.Done == (len(d.Data) > 0) {
			t.Errorf("chunk %d is neither data nor the terminator: %s", i, ch.Data)
		}
	}
}

func TestChunksHoldEachEventsDataAsSent(t *testing.T) {
	_, chunks, err := openai.Codec{}.NormalizeStream([]byte(textStream))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(chunks[2].Data), ` is sunny <and>`) {
		t.Errorf("chunk data was escaped: %s", chunks[2].Data)
	}
	assertJSONEqual(t, chunks[len(chunks)-1].Data, []byte(`{"done":true}`))
	assertJSONEqual(t, chunks[1].Data, []byte(`{"data":`+chunk("chatcmpl-text", `[{"index":0,"delta":{"content":"Paris"},"logprobs":null,"finish_reason":null}]`, `,"usage":null,"obfuscation":"x2y"`)+`}`))
}

// The SSE format allows layouts the API does not use; the SDK decodes them alike, and so must the codec.
func TestStreamLayoutsTheSDKAcceptsNormalizeAlike(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{
			name: "CRLF line endings",
			body: strings.ReplaceAll(toolStream, "\n", "\r\n"),
		},
		{
			name: "comments, id and retry fields, no space after the colon, extra blank lines",
			body: ": keep-alive\n\n\n" + strings.ReplaceAll(toolStream, "data: ", ": note\nid: 7\nretry: 10\ndata:"),
		},
		{
			name: "data split over several lines",
			body: strings.Replace(toolStream, `data: {"id":"chatcmpl-tools",`, "data: {\ndata:   \"id\": \"chatcmpl-tools\",", 1),
		},
	}
	var c openai.Codec
	wantResp, wantChunks, err := c.NormalizeStream([]byte(toolStream))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, chunks, err := c.NormalizeStream([]byte(tt.body))
			if err != nil {
				t.Fatalf("NormalizeStream: %v", err)
			}
			if diff := cmp.Diff(wantChunks, chunks); diff != "" {
				t.Fatalf("chunks differ from the canonical layout's (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantResp, resp); diff != "" {
				t.Fatalf("response differs from the canonical layout's (-want +got):\n%s", diff)
			}
			assertSameStream(t, consumeStream(t, []byte(tt.body)), consumeStream(t, []byte(toolStream)))
		})
	}
}

func TestStreamsCutBetweenEventsAssembleWhatArrived(t *testing.T) {
	cut := toolStream[:strings.Index(toolStream, `data: {"id":"chatcmpl-tools","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_s","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"sius`)]
	resp, chunks, err := openai.Codec{}.NormalizeStream([]byte(cut))
	if err != nil {
		t.Fatalf("NormalizeStream: %v", err)
	}
	if len(chunks) != 6 || resp.StopReason != "" {
		t.Fatalf("got %d chunks and stop reason %q, want 6 and none", len(chunks), resp.StopReason)
	}
	var msg struct {
		ToolCalls []struct {
			Function struct {
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(resp.Content, &msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.ToolCalls) != 2 || msg.ToolCalls[1].Function.Arguments != `{"location": "Oslo, Norway", "unit": "cel` {
		t.Fatalf("tool calls = %+v, want the second cut off where the stream was", msg.ToolCalls)
	}
}
