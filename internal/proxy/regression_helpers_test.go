package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// The harness of the regression tests adopted from a hostile review of the proxy: a proxy run on a
// loopback server, raw HTTP requests, upstreams that lie, and greps of every stored byte.
// ---------- harness ----------

type hRig struct {
	t      *testing.T
	srv    *Server
	ts     *httptest.Server
	cancel context.CancelFunc
	out    chan *Outcome
	dir    string
}

var hKey = redact.StaticKeyProvider(bytes.Repeat([]byte{7}, 32))

func hStart(t *testing.T, opts Options) *hRig {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan *Outcome, 1)
	go func() { out <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case o := <-out:
		cancel()
		t.Fatalf("run ended before ready: %+v", o.Err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	r := &hRig{t: t, srv: s, ts: httptest.NewServer(s.Handler()), cancel: cancel, out: out, dir: opts.Dir}
	return r
}

func (r *hRig) stop() *Outcome {
	r.cancel()
	var o *Outcome
	select {
	case o = <-r.out:
	case <-time.After(20 * time.Second):
		r.t.Fatal("Run did not return within 20s of cancel")
	}
	r.ts.CloseClientConnections()
	r.ts.Close()
	return o
}

type hResp struct {
	status int
	header http.Header
	body   []byte
}

// agentClient is the agent's HTTP client: it follows no redirect, so a test sees what the proxy sent.
var agentClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func hDo(t *testing.T, base, path string, hdr map[string]string, body []byte) hResp {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := agentClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return hResp{resp.StatusCode, resp.Header, b}
}

func hFake(t *testing.T, script string) (*fakellm.Server, string) {
	t.Helper()
	sc, err := fakellm.Parse([]byte(script))
	if err != nil {
		t.Fatalf("script: %v", err)
	}
	f := fakellm.New(sc)
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	return f, ts.URL
}

// hGrep reports every file under dir holding any of needles (with the needle's label).
func hGrep(t *testing.T, dir string, needles map[string]string) []string {
	t.Helper()
	var hits []string
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		for label, n := range needles {
			if n != "" && bytes.Contains(b, []byte(n)) {
				hits = append(hits, fmt.Sprintf("%s contains %s", strings.TrimPrefix(p, dir), label))
			}
		}
		return nil
	})
	return hits
}

func hForms(label, s string) map[string]string {
	j, _ := json.Marshal(s)
	return map[string]string{
		label + "/raw":      s,
		label + "/json":     string(j[1 : len(j)-1]),
		label + "/b64":      base64.StdEncoding.EncodeToString([]byte(s)),
		label + "/b64url":   base64.RawURLEncoding.EncodeToString([]byte(s)),
		label + "/urlquery": url.QueryEscape(s),
		label + "/urlpath":  url.PathEscape(s),
	}
}

func hOpen(t *testing.T, dir string) *session.Session {
	t.Helper()
	s, err := session.Open(dir)
	if err != nil {
		t.Fatalf("session.Open(%s): %v", dir, err)
	}
	if err := s.CheckComplete(); err != nil {
		t.Fatalf("incomplete: %v", err)
	}
	return s
}

func hMsg(stream bool, text string) []byte {
	b, _ := json.Marshal(map[string]any{"model": "claude-x", "max_tokens": 100, "stream": stream,
		"messages": []any{map[string]any{"role": "user", "content": text}}})
	return b
}

const (
	hProvKey = "PROVKEY-7f3a9c2e5b1d4a6f0c8e"
	hLearned = "lrnd<&>Sec\"ret+/=42Q"
	hAgentK  = "agentkey-0123456789abcdefZZ"
)

func hDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-80)
	return fmt.Sprintf("\n  at byte %d (len %d vs %d)\n  want ...%q\n  got  ...%q", i, len(a), len(b), a[lo:min(len(a), i+80)], b[lo:min(len(b), i+80)])
}

// hAssemble folds an Anthropic SSE body into "type|text per index|partial_json per index|message_delta".
func hAssemble(body []byte) string {
	var types []string
	acc := map[float64]string{}
	var tail string
	for _, ev := range strings.Split(string(body), "\n\n") {
		for _, line := range strings.Split(ev, "\n") {
			d, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(d), &m) != nil {
				types = append(types, "BADJSON")
				continue
			}
			typ, _ := m["type"].(string)
			types = append(types, typ)
			switch typ {
			case "content_block_delta":
				idx, _ := m["index"].(float64)
				dl, _ := m["delta"].(map[string]any)
				t, _ := dl["text"].(string)
				pj, _ := dl["partial_json"].(string)
				acc[idx] += t + pj
			case "content_block_start":
				idx, _ := m["index"].(float64)
				cb, _ := json.Marshal(m["content_block"])
				acc[idx] += "START" + string(cb)
			case "message_delta", "message_start":
				x, _ := json.Marshal(m)
				tail += string(x)
			}
		}
	}
	var uniq []string
	for i, t := range types {
		if t == "content_block_delta" && i > 0 && types[i-1] == t {
			continue
		}
		uniq = append(uniq, t)
	}
	return fmt.Sprintf("%v|%v|%s", uniq, acc, tail)
}

// ---------- exactness ----------

// hRawUpstream answers every /v1/messages with jsonBody, or sseBody when the request streams.
func hRawUpstream(t *testing.T, jsonBody, sseBody string) (*httptest.Server, *int) {
	n := new(int)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*n++
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("request-id", "req_up_1")
		if bytes.Contains(b, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, sseBody)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, jsonBody)
	}))
	t.Cleanup(ts.Close)
	return ts, n
}

func hSSE(events ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(events); i += 2 {
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", events[i], events[i+1])
	}
	return b.String()
}

const hBigJSON = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-x","content":[` +
	`{"type":"thinking","thinking":"hm","signature":"sig=="},` +
	`{"type":"text","text":"emoji 😀 ls\u2028ps\u2029 nul\u0000 tab\t"},` +
	`{"type":"tool_use","id":"toolu_01","name":"calc","input":{"big":9007199254740993,"neg":-12345678901234567890123,"f":1.0e400,"s":"a\u2028b","nested":{"z":1,"a":[1e2,0.1]}}},` +
	`{"type":"text","text":"second"}],` +
	`"stop_reason":"max_tokens","stop_sequence":null,"container":null,` +
	`"usage":{"input_tokens":10,"cache_creation_input_tokens":2048,"cache_read_input_tokens":4096,"output_tokens":7,"service_tier":"standard","server_tool_use":{"web_search_requests":1}}}`

var hBigSSE = hSSE(
	"message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":2048,"cache_read_input_tokens":4096,"output_tokens":1,"service_tier":"standard"}}}`,
	"ping", `{"type": "ping"}`,
	"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"emoji 😀 ls\u2028"}}`,
	"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\ud83d\ude00 \u00e9"}}`,
	"content_block_stop", `{"type":"content_block_stop","index":0}`,
	"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"calc","input":{}}}`,
	"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`,
	"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"big\": 90071992547"}}`,
	"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"40993, \"s\": \"a\\u20"}}`,
	"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"28b\\ud83d"}}`,
	"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\\ude00\", \"k\": 1}"}}`,
	"content_block_stop", `{"type":"content_block_stop","index":1}`,
	"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":10,"cache_creation_input_tokens":2048,"cache_read_input_tokens":4096,"output_tokens":33}}`,
	"message_stop", `{"type":"message_stop"}`,
)

func hRecordReplay(t *testing.T, up string, reqs ...[]byte) (rec, rep []hResp) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
	for _, b := range reqs {
		rec = append(rec, hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, b))
	}
	if o := r.stop(); o.Err != nil {
		t.Fatalf("record: %v", o.Err)
	}
	ses := hOpen(t, dir)
	p := hStart(t, Options{Mode: Replay, Session: ses})
	for _, b := range reqs {
		rep = append(rep, hDo(t, p.ts.URL, "/v1/messages", nil, b))
	}
	if o := p.stop(); o.Err != nil {
		t.Errorf("replay: %v", o.Err)
	}
	return rec, rep
}

func hBodyOfSize(n int) []byte {
	head := `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"`
	tail := `"}]}`
	return []byte(head + strings.Repeat("a", n-len(head)-len(tail)) + tail)
}

// hOnce records one call to an upstream answering with h, checks that the committed session opens
// and is complete, replays the same call from it and returns both answers and the recorded event.
func hOnce(t *testing.T, provider string, h http.HandlerFunc, path string, body []byte) (live, rep hResp, ev session.Event) {
	t.Helper()
	up := httptest.NewServer(h)
	defer up.Close()
	dir := filepath.Join(t.TempDir(), "s")
	opts := Options{Mode: Record, Provider: provider, Dir: dir, ID: "s", Upstreams: map[string]string{provider: up.URL},
		Tools: map[string]string{"probe": up.URL + "/tool"}}
	r := hStart(t, opts)
	live = hDo(t, r.ts.URL, path, map[string]string{"x-api-key": "agent-key-xyz"}, body)
	if o := r.stop(); o.Err != nil {
		t.Fatalf("record: %v", o.Err)
	}
	ses := hOpen(t, dir)
	for _, e := range ses.Events {
		if e.Kind == session.KindModelCall || e.Kind == session.KindToolCall {
			ev = e
		}
	}
	if ev.Kind == "" {
		t.Fatalf("the call is not recorded: %d events", len(ses.Events))
	}
	p := hStart(t, Options{Mode: Replay, Session: ses})
	rep = hDo(t, p.ts.URL, path, nil, body)
	p.stop()
	return live, rep, ev
}

// hSame fails unless the replayed answer is the live one: status, body and the headers an SDK reads.
func hSame(t *testing.T, live, rep hResp) {
	t.Helper()
	if live.status != rep.status || !bytes.Equal(live.body, rep.body) {
		t.Errorf("replay answers %d, live %d:%s", rep.status, live.status, hDiff(string(live.body), string(rep.body)))
	}
	for _, h := range []string{"Content-Type", "Retry-After", "X-Should-Retry", "Location"} {
		if live.header.Get(h) != rep.header.Get(h) {
			t.Errorf("header %s: live %q, replay %q", h, live.header.Get(h), rep.header.Get(h))
		}
	}
}

// hOpenAIMsg is a Chat Completions request.
func hOpenAIMsg(stream bool, text string) []byte {
	b, _ := json.Marshal(map[string]any{"model": "gpt-x", "stream": stream, "messages": []any{map[string]any{"role": "user", "content": text}}})
	return b
}
