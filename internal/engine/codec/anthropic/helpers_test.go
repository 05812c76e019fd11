package anthropic_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// wireServer stands in for api.anthropic.com: it records every request body it receives and answers
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

func serveMessage(t *testing.T, body []byte) *wireServer {
	return serve(t, "application/json", body)
}

func serveStream(t *testing.T, body []byte) *wireServer {
	return serve(t, "text/event-stream", body)
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

// newMessage has the SDK decode body as the response of Messages.New.
func newMessage(t *testing.T, body []byte) *sdk.Message {
	t.Helper()
	srv := serveMessage(t, body)
	c := srv.client()
	msg, err := c.Messages.New(t.Context(), minimalParams())
	if err != nil {
		t.Fatalf("SDK could not decode the message: %v\n%s", err, body)
	}
	return msg
}

// streamed is what an SDK user sees of a stream: the events, the Message accumulated from them and
// the error the stream ended with.
type streamed struct {
	events []sdk.MessageStreamEventUnion
	acc    sdk.Message
	err    error
}

// consumeStream has the SDK decode body as the response of Messages.NewStreaming, accumulating every
// event as the SDK documents.
func consumeStream(t *testing.T, body []byte) streamed {
	t.Helper()
	srv := serveStream(t, body)
	c := srv.client()
	stream := c.Messages.NewStreaming(t.Context(), minimalParams())
	defer stream.Close()
	var out streamed
	for stream.Next() {
		ev := stream.Current()
		out.events = append(out.events, ev)
		if err := out.acc.Accumulate(ev); err != nil {
			t.Fatalf("SDK could not accumulate %s: %v", ev.Type, err)
		}
	}
	out.err = stream.Err()
	return out
}

func minimalParams() sdk.MessageNewParams {
	return sdk.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("Hello"))},
	}
}

// minimalMessage is a Message body to answer requests whose response does not matter.
var minimalMessage = []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`)

var minimalStream = []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")

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
// key order.
func assertJSONEqual(t *testing.T, got, want []byte) {
	t.Helper()
	if !reflect.DeepEqual(decodeJSON(t, got), decodeJSON(t, want)) {
		t.Fatalf("JSON differs\n got: %s\nwant: %s", got, want)
	}
}

// typedView renders what the SDK decoded into its exported fields. The SDK's response types have no
// MarshalJSON, so this is every typed value a program can read, and nothing of the raw JSON.
func typedView(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return string(b)
}

// assertSameMessage fails unless two SDK Messages hold the same typed values and the same raw JSON
// (up to formatting and key order).
func assertSameMessage(t *testing.T, got, want *sdk.Message) {
	t.Helper()
	if g, w := typedView(t, got), typedView(t, want); g != w {
		t.Fatalf("the SDK decoded different messages\n got: %s\nwant: %s", g, w)
	}
	assertJSONEqual(t, []byte(got.RawJSON()), []byte(want.RawJSON()))
}

// assertSameStream fails unless two SDK stream consumptions saw the same events in the same order,
// accumulated the same Message and ended alike.
func assertSameStream(t *testing.T, got, want streamed) {
	t.Helper()
	if len(got.events) != len(want.events) {
		t.Fatalf("the SDK saw %d events, want %d", len(got.events), len(want.events))
	}
	for i := range want.events {
		if g, w := typedView(t, got.events[i]), typedView(t, want.events[i]); g != w {
			t.Fatalf("event %d differs\n got: %s\nwant: %s", i, g, w)
		}
		assertJSONEqual(t, []byte(got.events[i].RawJSON()), []byte(want.events[i].RawJSON()))
	}
	assertSameMessage(t, &got.acc, &want.acc)
	assertSameStreamError(t, got.err, want.err)
}

func assertSameStreamError(t *testing.T, got, want error) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("stream error %v, want %v", got, want)
	}
	if want == nil {
		return
	}
	var g, w *sdk.Error
	if !errors.As(got, &g) || !errors.As(want, &w) {
		t.Fatalf("stream errors are not API errors: %v, %v", got, want)
	}
	if g.Type() != w.Type() || g.Message != w.Message {
		t.Fatalf("stream error %s %q, want %s %q", g.Type(), g.Message, w.Type(), w.Message)
	}
	assertJSONEqual(t, []byte(g.RawJSON()), []byte(w.RawJSON()))
}
