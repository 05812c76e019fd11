package openai_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// wireServer stands in for api.openai.com: it records every request body it receives and answers
// each with the same body and content type.
type wireServer struct {
	url    string
	mu     sync.Mutex
	bodies [][]byte
}

func serve(t *testing.T, contentType string, body []byte) *wireServer {
	t.Helper()
	s := &wireServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.mu.Unlock()
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// lastBody is the body of the last request the server received.
func (s *wireServer) lastBody(t *testing.T) []byte {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) == 0 {
		t.Fatal("the server received no request")
	}
	return s.bodies[len(s.bodies)-1]
}

// client is a real SDK client pointed at a test server, without retries so a failure shows at once.
func (s *wireServer) client() sdk.Client {
	return sdk.NewClient(option.WithBaseURL(s.url), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

// newCompletion has the SDK decode body as the response of Chat.Completions.New.
func newCompletion(t *testing.T, body []byte) *sdk.ChatCompletion {
	t.Helper()
	srv := serve(t, "application/json", body)
	c := srv.client()
	cc, err := c.Chat.Completions.New(t.Context(), minimalParams())
	if err != nil {
		t.Fatalf("SDK could not decode the completion: %v\n%s", err, body)
	}
	return cc
}

// streamed is what an SDK user sees of a stream: the chunks, the completion the
// ChatCompletionAccumulator assembled from them and the error the stream ended with.
type streamed struct {
	chunks []sdk.ChatCompletionChunk
	acc    sdk.ChatCompletionAccumulator
	err    error
}

// consumeStream has the SDK decode body as the response of Chat.Completions.NewStreaming, adding every
// chunk to a ChatCompletionAccumulator as the SDK documents.
func consumeStream(t *testing.T, body []byte) *streamed {
	t.Helper()
	srv := serve(t, "text/event-stream", body)
	c := srv.client()
	stream := c.Chat.Completions.NewStreaming(t.Context(), minimalParams())
	defer stream.Close()
	out := &streamed{}
	for stream.Next() {
		ch := stream.Current()
		out.chunks = append(out.chunks, ch)
		if !out.acc.AddChunk(ch) {
			t.Fatalf("the SDK's accumulator refused chunk %d: %s", len(out.chunks)-1, ch.RawJSON())
		}
	}
	out.err = stream.Err()
	return out
}

func minimalParams() sdk.ChatCompletionNewParams {
	return sdk.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Hello")},
	}
}

// minimalCompletion is a body to answer requests whose response does not matter.
var minimalCompletion = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)

var minimalStream = []byte("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")

// decodeJSON decodes a document keeping numbers as written, so equality compares them exactly.
func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// assertJSONEqual fails unless got and want are the same JSON value, whatever their formatting and
// key order, printing the difference.
func assertJSONEqual(t *testing.T, got, want []byte) {
	t.Helper()
	if diff := cmp.Diff(decodeJSON(t, want), decodeJSON(t, got)); diff != "" {
		t.Fatalf("JSON differs (-want +got):\n%s", diff)
	}
}

// typedOnly compares the values the SDK decoded into its exported fields, not the JSON metadata it
// keeps beside them (raw text and presence), which a ChatCompletionAccumulator does not fill in.
var typedOnly = cmp.FilterPath(func(p cmp.Path) bool {
	sf, ok := p.Last().(cmp.StructField)
	return ok && sf.Name() == "JSON"
}, cmp.Ignore())

// assertSameCompletion fails unless two SDK completions hold the same typed values. An empty list and
// none are the same: the API sends "annotations": [], which the SDK's accumulator never fills in.
func assertSameCompletion(t *testing.T, got, want *sdk.ChatCompletion) {
	t.Helper()
	if diff := cmp.Diff(want, got, typedOnly, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("the SDK holds different completions (-want +got):\n%s", diff)
	}
}

// assertSameStream fails unless two SDK stream consumptions saw the same chunks, raw JSON included,
// in the same order, accumulated the same completion and ended alike.
func assertSameStream(t *testing.T, got, want *streamed) {
	t.Helper()
	if len(got.chunks) != len(want.chunks) {
		t.Fatalf("the SDK saw %d chunks, want %d", len(got.chunks), len(want.chunks))
	}
	for i := range want.chunks {
		if diff := cmp.Diff(want.chunks[i], got.chunks[i], typedOnly); diff != "" {
			t.Fatalf("chunk %d differs (-want +got):\n%s", i, diff)
		}
		assertJSONEqual(t, []byte(got.chunks[i].RawJSON()), []byte(want.chunks[i].RawJSON()))
	}
	assertSameCompletion(t, &got.acc.ChatCompletion, &want.acc.ChatCompletion)
	if (got.err == nil) != (want.err == nil) || (got.err != nil && got.err.Error() != want.err.Error()) {
		t.Fatalf("stream error %v, want %v", got.err, want.err)
	}
}
