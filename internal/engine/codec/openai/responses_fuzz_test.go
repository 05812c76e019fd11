package openai_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
)

// FuzzResponsesNormalizeRequest checks that whatever ResponsesCodec.NormalizeRequest accepts comes
// back from DenormalizeRequest as the same JSON, and normalizes again to the same neutral request.
func FuzzResponsesNormalizeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","instructions":"Be brief.","input":"Hi"}`,
		`{"model":"m","instructions":"","input":[]}`,
		`{"model":"m","instructions":null,"input":null,"previous_response_id":"resp_1"}`,
		`{"model":"m","input":[{"role":"user","content":"a"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"1"}],"tools":[{"type":"function","name":"f"}]}`,
		`{"model":"m","input":[{"type":"message","role":"assistant","id":"msg_1","content":[{"type":"output_text","text":"x"}]},{"role":"user","content":{"a":1}}]}`,
		`{"model":"m","input":[{"type":"user","role":"user"}]}`,
		`{"model":"m","input":"Hi","x":"\u003c\ud83d\ude00","temperature":0.20}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) { requestRoundTrip(t, openai.ResponsesCodec{}, body) })
}

// FuzzResponsesNormalizeStream checks that a Responses stream NormalizeStream accepts, rebuilt from
// its chunks, normalizes to the same chunks and response.
func FuzzResponsesNormalizeStream(f *testing.F) {
	for _, seed := range []string{
		"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"content\":[]}}\n\n" +
			"event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\"}}\n\n" +
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n\n",
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":3,\"item\":{\"type\":\"function_call\",\"arguments\":\"\"}}\n\n" +
			"event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":3,\"delta\":\"{}\"}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}}\n\n",
		"event: error\ndata: {\"type\":\"error\",\"message\":\"x\"}\n\ndata: [DONE]\n\n",
	} {
		f.Add([]byte(seed))
	}
	var c openai.ResponsesCodec
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, chunks, err := c.NormalizeStream(body)
		if err != nil {
			return
		}
		again, againChunks, err := c.NormalizeStream(c.RebuildStream(chunks))
		if err != nil {
			t.Fatalf("NormalizeStream of the rebuilt stream: %v", err)
		}
		if diff := cmp.Diff(chunks, againChunks); diff != "" {
			t.Fatalf("chunks changed over a rebuild (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(resp, again); diff != "" {
			t.Fatalf("response changed over a rebuild (-want +got):\n%s", diff)
		}
	})
}
