package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestAgentInputASessionCannotHoldIsRefused: JSON from the agent that session.Open would refuse — a
// repeated key at any depth, an escaped repeat of a key — is answered 400 in the provider's error
// shape on every endpoint that records it, and the session commits and opens.
func TestAgentInputASessionCannotHoldIsRefused(t *testing.T) {
	_, up := hFake(t, "turns:\n- text: ok\n")
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up},
		Tools: map[string]string{"probe": up + "/tool"}})
	for _, tc := range []struct{ path, body string }{
		{"/v1/messages", `{"model":"claude-x","max_tokens":1,"messages":[{"role":"user","content":"a"}],"metadata":{"user_id":"u","user_id":"v"}}`},
		{"/v1/messages", `{"model":"claude-x","max_tokens":1,"max_tokens":2,"messages":[{"role":"user","content":"a"}]}`},
		{"/v1/messages/count_tokens", `{"model":"claude-x","messages":[{"role":"user","content":"a","content":"b"}]}`},
		{"/v1/tools/probe", `{"q":1,"q":2}`},
		{"/v1/tools/probe", `{"q":{"a":1,"\u0061":2}}`},
		{"/v1/ledger", `{"op":"START","op":"INTENT"}`},
		{"/v1/ledger", `{"op":"INTENT","x":{"k":1,"k":1}}`},
	} {
		res := hDo(t, r.ts.URL, tc.path, map[string]string{"x-api-key": "agent-key-xyz"}, []byte(tc.body))
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if res.status != http.StatusBadRequest || json.Unmarshal(res.body, &e) != nil || e.Type != "error" ||
			e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "duplicate key") {
			t.Errorf("POST %s %s: %d %s, want 400 invalid_request_error naming the duplicate key", tc.path, tc.body, res.status, res.body)
		}
	}
	if o := r.stop(); o.Err != nil {
		t.Fatal(o.Err)
	}
	ses := hOpen(t, dir)
	for _, ev := range ses.Events {
		// The recorder frames the run: session_start, its END and session_end.
		if ev.Kind != session.KindSessionStart && ev.Kind != session.KindSessionEnd && ev.CallSite != "recorder" {
			t.Errorf("a refused request was recorded: %s at step %d", ev.Kind, ev.Step)
		}
	}
}

// TestUpstreamOutputASessionCannotHoldIsAnUpstreamError: an upstream answer the session could not hold
// as the agent would get it — a repeated key (in a JSON tool input, in tool input assembled from
// argument deltas, in a tool backend's result), invalid UTF-8 — is a 502 in the provider's error shape,
// recorded as an error event; the session opens and a replay answers the same.
func TestUpstreamOutputASessionCannotHoldIsAnUpstreamError(t *testing.T) {
	dupJSON := strings.Replace(hBigJSON, `"nested":{"z":1`, `"nested":{"z":1,"z":2`, 1)
	badUTF8 := strings.Replace(hBigJSON, "second", "sec\xff\xfeond", 1)
	dupDeltas := strings.Replace(hBigSSE, `\"k\": 1}`, `\"k\": 1, \"k\": 2}`, 1)
	for _, tc := range []struct {
		name, path string
		stream     bool
		json, sse  string
		want       string
	}{
		{"json duplicate key", "/v1/messages", false, dupJSON, "", `duplicate key \"z\"`},
		{"json invalid UTF-8", "/v1/messages", false, badUTF8, "", "UTF-8"},
		{"tool result duplicate key", "/v1/tools/probe", false, `{"r":1,"r":2}`, "", `duplicate key \"r\"`},
		{"tool result invalid UTF-8", "/v1/tools/probe", false, "{\"r\":\"\xff\"}", "", "UTF-8"},
		{"streamed tool input duplicate key", "/v1/messages", true, "", dupDeltas, `duplicate key \"k\"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := func(w http.ResponseWriter, r *http.Request) {
				if tc.stream {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, tc.sse)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.json)
			}
			live, rep, ev := hOnce(t, "anthropic", h, tc.path, hMsg(tc.stream, "x"))
			if ev.Error == nil || ev.Response != nil || ev.Result != nil {
				t.Fatalf("recorded as %+v, want an error event without an answer", ev)
			}
			if !tc.stream && (live.status != http.StatusBadGateway || !strings.Contains(string(live.body), tc.want) ||
				!strings.Contains(string(live.body), `"type":"api_error"`)) {
				t.Errorf("live answer %d %s, want a 502 api_error naming %s", live.status, live.body, tc.want)
			}
			hSame(t, live, rep)
		})
	}
}

// TestBrokenLiveStreamsAreRecordedAsTheAgentGotThem: a streamed answer that breaks — an event that is
// not JSON, invalid UTF-8 in an event, a body that is not an event stream, a stream that does not open
// the provider's way — never vanishes from the recording: the call is an error event holding the
// events the agent got, and a replay gives the agent the same bytes and status.
func TestBrokenLiveStreamsAreRecordedAsTheAgentGotThem(t *testing.T) {
	parts := strings.SplitAfter(hBigSSE, "\n\n")
	head := strings.Join(parts[:4], "")
	openaiHead := "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"hi\"},\"finish_reason\":null}]}\n\n"
	for _, tc := range []struct {
		name, provider, ct, body string
		status, events           int // the live status and how many events the agent got
	}{
		{"non-JSON data line", "anthropic", "text/event-stream", head + "event: content_block_delta\ndata: {not json\n\n" + strings.Join(parts[4:], ""), 200, 4},
		{"invalid UTF-8", "anthropic", "text/event-stream", strings.Replace(hBigSSE, `\u00e9`, "\xc3(", 1), 200, 4},
		{"garbage first event", "anthropic", "text/event-stream", "event: message_start\ndata: {not json\n\n", 502, 0},
		{"HTML 200", "anthropic", "text/html", "<html><body>gateway login</body></html>", 502, 0},
		{"HTML 200 labelled as a stream", "anthropic", "text/event-stream", "<html><body>gateway login</body></html>", 502, 0},
		{"no message_start", "anthropic", "text/event-stream", "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", 502, 0},
		{"openai HTML 200", "openai", "text/html; charset=utf-8", "<html>login</html>", 502, 0},
		{"openai no chunk", "openai", "text/event-stream", "data: [DONE]\n\n", 502, 0},
		{"openai non-JSON chunk", "openai", "text/event-stream", openaiHead + "data: {oops\n\ndata: [DONE]\n\n", 200, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ct)
				_, _ = io.WriteString(w, tc.body)
			}
			path, body := "/v1/messages", hMsg(true, "x")
			if tc.provider == "openai" {
				path, body = "/v1/chat/completions", hOpenAIMsg(true, "x")
			}
			live, rep, ev := hOnce(t, tc.provider, h, path, body)
			if live.status != tc.status {
				t.Fatalf("live status %d, want %d: %s", live.status, tc.status, live.body)
			}
			if got := strings.Count(string(live.body), "data: "); live.status == 200 && got != tc.events {
				t.Errorf("the agent got %d events, want %d: %q", got, tc.events, live.body)
			}
			if ev.Error == nil || len(ev.Stream) != tc.events {
				t.Errorf("recorded error %v with %d chunks, want an error with the %d events the agent got", ev.Error, len(ev.Stream), tc.events)
			}
			if live.status == 502 && !strings.Contains(string(live.body), `"message":"rewind proxy: the upstream call failed: `) {
				t.Errorf("not a 502 in the provider's error shape: %s", live.body)
			}
			hSame(t, live, rep)
		})
	}
}

// TestLiveAndReplayedErrorsReadTheSame: an upstream failure the proxy reports itself is recorded under
// a stable name and replayed with the very text the agent read live.
func TestLiveAndReplayedErrorsReadTheSame(t *testing.T) {
	okJSON := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`
	for _, tc := range []struct {
		name   string
		stream bool
		h      http.HandlerFunc
	}{
		{"Content-Length lie", false, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(okJSON)+50))
			_, _ = io.WriteString(w, okJSON)
		}},
		{"HTML 200 on a JSON request", false, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html><body>gateway login</body></html>")
		}},
		{"cut JSON body", false, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, okJSON[:40])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live, rep, ev := hOnce(t, "anthropic", tc.h, "/v1/messages", hMsg(tc.stream, "x"))
			if ev.Error == nil || strings.ContainsAny(ev.Error.Name, "*.") {
				t.Fatalf("recorded error %+v, want a stable name, not a Go type", ev.Error)
			}
			if !tc.stream && (live.status != http.StatusBadGateway || strings.Contains(string(live.body), ev.Error.Name+": ")) {
				t.Errorf("live %d %s", live.status, live.body)
			}
			hSame(t, live, rep)
		})
	}
}

// TestLedgerOpsAndCallSitesMustBeExact: a ledger op that is not spelled exactly ("start", "START ",
// "suspend") is refused with 400, and so is an X-Rewind-Site that names another endpoint's own site.
func TestLedgerOpsAndCallSitesMustBeExact(t *testing.T) {
	_, up := hFake(t, "turns:\n- text: ok\n")
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
	for _, op := range []string{"start", "START ", "suspend", "Intent", "\u0053TART", "SOMETHING"} {
		body, _ := json.Marshal(map[string]string{"op": op})
		if res := hDo(t, r.ts.URL, "/v1/ledger", nil, body); res.status != http.StatusBadRequest {
			t.Errorf("ledger op %q: %d %s, want 400", op, res.status, res.body)
		}
	}
	if res := hDo(t, r.ts.URL, "/v1/ledger", nil, []byte(`{"op":"INTENT"}`)); res.status != http.StatusOK {
		t.Errorf("INTENT: %d %s", res.status, res.body)
	}
	for _, site := range []string{"tool.read_file", "openai.chat_completions", "anthropic.count_tokens", "clock", "recorder"} {
		if res := hDo(t, r.ts.URL, "/v1/messages", map[string]string{HeaderSite: site}, hMsg(false, "x")); res.status != http.StatusBadRequest {
			t.Errorf("a model call sited %q: %d, want 400", site, res.status)
		}
	}
	for _, site := range []string{"anthropic.messages", "planner.step"} {
		if res := hDo(t, r.ts.URL, "/v1/messages", map[string]string{HeaderSite: site}, hMsg(false, "x")); res.status != http.StatusOK {
			t.Errorf("a model call sited %q: %d %s, want 200", site, res.status, res.body)
		}
	}
	if o := r.stop(); o.Err != nil {
		t.Fatal(o.Err)
	}
	hOpen(t, dir)
}
