package openai_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// The replay engine writes a stream from the redacted response when the recorded one cannot be kept.
var _ replay.StreamSynthesizer = openai.Codec{}

func TestSynthesizedStreamsAccumulateToTheResponseInTheSDK(t *testing.T) {
	var c openai.Codec
	fromStream := func(body string) session.Response {
		resp, _, err := c.NormalizeStream([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	fromCompletion := func(body string) session.Response {
		resp, err := c.NormalizeResponse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	tests := []struct {
		name       string
		resp       session.Response
		wantChunks int
	}{
		{"text with usage details", fromCompletion(textCompletion), 4},
		{"parallel tool calls", fromCompletion(toolCallCompletion), 4},
		{"a refusal", fromCompletion(refusalCompletion), 4},
		{"two choices with log probabilities", fromCompletion(twoChoiceCompletion), 6},
		{"a streamed tool call response", fromStream(toolStream), 3},
		{"no envelope and no usage", session.Response{Content: []byte(`{"role":"assistant","content":"Hi"}`), StopReason: "stop"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := c.SynthesizeStream(tt.resp)
			if err != nil {
				t.Fatal(err)
			}
			if len(chunks) != tt.wantChunks {
				t.Errorf("%d chunks, want %d", len(chunks), tt.wantChunks)
			}
			assertChunkShape(t, chunks)
			body, err := c.DenormalizeResponse(tt.resp)
			if err != nil {
				t.Fatal(err)
			}
			streamed := consumeStream(t, c.RebuildStream(chunks))
			if streamed.err != nil {
				t.Fatalf("the SDK failed the stream: %v", streamed.err)
			}
			assertSameCompletion(t, &streamed.acc.ChatCompletion, newCompletion(t, body))

			again, _, err := c.NormalizeStream(c.RebuildStream(chunks))
			if err != nil {
				t.Fatal(err)
			}
			want := tt.resp
			if len(want.Raw) == 0 {
				again.Raw = nil // the stream has an envelope where the response had none; the SDK saw the same completion
			}
			if diff := cmp.Diff(want, again); diff != "" {
				t.Fatalf("the stream assembles to another response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSynthesizeStreamRejectsMessagesItCannotStream(t *testing.T) {
	for _, content := range []string{`[1]`, `"text"`, `{"role":"assistant","content":[{"type":"text","text":"x"}]}`, `{"tool_calls":[1]}`, `not json`} {
		_, err := openai.Codec{}.SynthesizeStream(session.Response{Content: []byte(content)})
		var ce *openai.CodecError
		if !errors.As(err, &ce) {
			t.Errorf("SynthesizeStream(%s) error = %v, want a *CodecError", content, err)
		}
	}
}
