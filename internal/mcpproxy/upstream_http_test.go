package mcpproxy

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
)

// TestHTTPServerTakesOnlyTheAnswerToItsRequest: a server whose reply is not the answer to the request
// the proxy sent (another id, a notification, a request, a body over the limit, a stray answer on the
// stream) fails the call as unavailable, naming what came, instead of that message being recorded
// and replayed as the call's result or passed to the client under an id it may be using.
func TestHTTPServerTakesOnlyTheAnswerToItsRequest(t *testing.T) {
	huge := `{"jsonrpc":"2.0","id":1,"result":{"text":"` + strings.Repeat("a", MaxFrameBytes) + `"}}`
	for _, tc := range []struct {
		name, contentType, body string
		want                    string // in the error; "" when the call must succeed
		wantResult              string
	}{
		{name: "its answer", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"result":{"ok":true}}`, wantResult: `{"ok":true}`},
		{name: "an error it could not tie to a request", contentType: "application/json", body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`, want: "parse"},
		{name: "another id", contentType: "application/json", body: `{"jsonrpc":"2.0","id":99,"result":{"secret":"x"}}`, want: "the answer to request 99, not the answer to request 1"},
		{name: "a string id", contentType: "application/json", body: `{"jsonrpc":"2.0","id":"1","result":{}}`, want: `the answer to request "1", not`},
		{name: "a notification", contentType: "application/json", body: `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`, want: "a notification (notifications/message)"},
		{name: "a request", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}`, want: "a request (sampling/createMessage)"},
		{name: "a body over the limit", contentType: "application/json", body: huge, want: "over 16777216 bytes"},
		{name: "a stray answer on the stream", contentType: "text/event-stream",
			body: "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
			want: "the server sent the answer to request 7 on the stream of request 1"},
		{name: "its answer on the stream after a notification", contentType: "text/event-stream",
			body:       "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"n\":5}}\n\n",
			wantResult: `{"n":5}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			var toClient []string
			ctx := WithObserver(context.Background(), Observer{ToClient: func(f []byte) { toClient = append(toClient, string(f)) }})
			result, err := (&HTTPServer{URL: srv.URL}).Call(ctx, "tools/call", []byte(`{"name":"add"}`))
			if tc.want == "" {
				if err != nil || string(result) != tc.wantResult {
					t.Fatalf("Call = %s, %v; want %s", result, err, tc.wantResult)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Call = %s, %v; want an error saying %q", result, err, tc.want)
			}
			var rpc *mcp.RPCError
			if !errors.As(err, &rpc) && !errors.Is(err, mcp.ErrServerUnavailable) {
				t.Errorf("error %v is neither the server's error answer nor ErrServerUnavailable", err)
			}
			for _, f := range toClient {
				if strings.Contains(f, `"id":7`) {
					t.Errorf("the stray answer reached the client: %s", f)
				}
			}
		})
	}
}
