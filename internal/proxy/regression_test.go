package proxy

// Regression tests adopted from a hostile review of the proxy.

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

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// ---------- secrets ----------

func TestSecretsSplitAnywhereInAStreamAreStoredNowhereAndReplayed(t *testing.T) {
	for _, cs := range []int{1, 2, 3, 4, 5, 7, 11, 0} {
		for _, pad := range []int{0, 1, 2, 3} {
			t.Run(fmt.Sprintf("chunk%d_pad%d", cs, pad), func(t *testing.T) {
				b64 := base64.StdEncoding.EncodeToString([]byte(hProvKey))
				args, _ := json.Marshal(map[string]any{"k": strings.Repeat("x", pad) + hProvKey, "l": hLearned,
					"b": b64, "u": url.QueryEscape(hLearned)})
				text := strings.Repeat("p", pad) + "key=" + hProvKey + " learned=" + hLearned + " end"
				textJSON, _ := json.Marshal(text)
				script := fmt.Sprintf("chunkSize: %d\nturns:\n- text: %s\n  toolCalls:\n  - name: t\n    input: %s\n", cs, textJSON, args)
				_, up := hFake(t, script)
				dir := filepath.Join(t.TempDir(), "s")
				r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up},
					APIKeys: map[string]string{"anthropic": hProvKey}, Secrets: []string{hLearned}, Keys: hKey})
				live := hDo(t, r.ts.URL, "/v1/messages?k="+url.QueryEscape(hLearned), map[string]string{
					"x-api-key": "placeholder-key", "anthropic-beta": hLearned, "X-Custom": hProvKey}, hMsg(true, "hi"))
				liveJ := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "placeholder-key"}, hMsg(false, "hi"))
				o := r.stop()
				if o.Err != nil {
					t.Fatalf("record: %v", o.Err)
				}
				if live.status != 200 || liveJ.status != 200 {
					t.Fatalf("live status %d/%d: %s %s", live.status, liveJ.status, live.body, liveJ.body)
				}
				needles := map[string]string{}
				for k, v := range hForms("provkey", hProvKey) {
					needles[k] = v
				}
				for k, v := range hForms("learned", hLearned) {
					needles[k] = v
				}
				if hits := hGrep(t, dir, needles); len(hits) > 0 {
					t.Errorf("secret bytes stored: %v", hits)
				}
				// replay must be byte-identical to the record-mode response (vault restores)
				ses := hOpen(t, dir)
				rp := hStart(t, Options{Mode: Replay, Session: ses, Keys: hKey})
				rep := hDo(t, rp.ts.URL, "/v1/messages", map[string]string{"x-api-key": "placeholder-key"}, hMsg(true, "hi"))
				repJ := hDo(t, rp.ts.URL, "/v1/messages", map[string]string{"x-api-key": "placeholder-key"}, hMsg(false, "hi"))
				rp.stop()
				if a, b := hAssemble(live.body), hAssemble(rep.body); a != b {
					t.Errorf("stream replay assembles differently:%s", hDiff(a, b))
				} else if !bytes.Equal(rep.body, live.body) {
					t.Logf("stream replay bytes differ (same assembly):%s", hDiff(string(live.body), string(rep.body)))
				}
				if !bytes.Equal(repJ.body, liveJ.body) {
					t.Errorf("json replay differs from record:%s", hDiff(string(liveJ.body), string(repJ.body)))
				}
			})
		}
	}
}

func TestSecretsInUpstreamErrorBodiesAreStoredNowhere(t *testing.T) {
	for _, sec := range []string{hProvKey, hLearned, hAgentK} {
		t.Run(sec[:6], func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", sec)
				w.WriteHeader(500)
				fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":"bad key %s / %s"}}`, r.Header.Get("x-api-key"), sec)
			}))
			defer up.Close()
			dir := filepath.Join(t.TempDir(), "s")
			keys := map[string]string{}
			if sec == hProvKey {
				keys["anthropic"] = hProvKey
			}
			r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up.URL},
				APIKeys: keys, Secrets: []string{hLearned}})
			res := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": hAgentK}, hMsg(false, "hi"))
			o := r.stop()
			if o.Err != nil {
				t.Fatalf("record: %v", o.Err)
			}
			t.Logf("live %d %s", res.status, res.body)
			needles := hForms("secret", sec)
			if hits := hGrep(t, dir, needles); len(hits) > 0 {
				t.Errorf("secret stored from an upstream error: %v", hits)
			}
		})
	}
}

func TestRecordAndReplayServeTheSameBytes(t *testing.T) {
	up, _ := hRawUpstream(t, hBigJSON, hBigSSE)
	rec, rep := hRecordReplay(t, up.URL, hMsg(false, "x"), hMsg(true, "x"))
	for i, name := range []string{"json", "sse"} {
		t.Logf("%s record status %d ct=%q request-id=%q", name, rec[i].status, rec[i].header.Get("Content-Type"), rec[i].header.Get("request-id"))
		if rec[i].status != 200 {
			t.Errorf("%s: record status %d: %s", name, rec[i].status, rec[i].body)
			continue
		}
		if rec[i].status != rep[i].status || !bytes.Equal(rec[i].body, rep[i].body) {
			t.Errorf("%s: replay differs from record: status %d vs %d%s", name, rec[i].status, rep[i].status, hDiff(string(rec[i].body), string(rep[i].body)))
		}
		for _, h := range []string{"Content-Type", "Request-Id", "Retry-After", "X-Should-Retry"} {
			if rec[i].header.Get(h) != rep[i].header.Get(h) {
				t.Errorf("%s: header %s: record %q replay %q", name, h, rec[i].header.Get(h), rep[i].header.Get(h))
			}
		}
	}
	// Meaning vs the live upstream: the JSON body through the proxy vs what upstream sent
	var a, b any
	dec := json.NewDecoder(strings.NewReader(hBigJSON))
	dec.UseNumber()
	_ = dec.Decode(&a)
	dec = json.NewDecoder(bytes.NewReader(rec[0].body))
	dec.UseNumber()
	_ = dec.Decode(&b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("record-mode JSON answer is not the upstream's in meaning:%s", hDiff(string(ja), string(jb)))
	}
	if !strings.Contains(string(rec[1].body), `9007199254740993`) && !strings.Contains(hAssemble(rec[1].body), "9007199254740993") {
		t.Errorf("big number lost in stream")
	}
}

// An upstream whose tool arguments repeat a key: the recording commits, then cannot be opened.
func TestUpstreamDuplicateKeysNeverCommitAnUnopenableSession(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			sse := strings.Replace(hBigSSE, `\"k\": 1}`, `\"k\": 1, \"k\": 2}`, 1)
			js := strings.Replace(hBigJSON, `"nested":{"z":1`, `"nested":{"z":1,"z":2`, 1)
			up, _ := hRawUpstream(t, js, sse)
			dir := filepath.Join(t.TempDir(), "s")
			r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up.URL}})
			res := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, hMsg(stream, "x"))
			o := r.stop()
			t.Logf("live status %d, record err %v", res.status, o.Err)
			if _, err := os.Stat(filepath.Join(dir, session.MetaFile)); err != nil {
				return // not committed: acceptable
			}
			if _, err := session.Open(dir); err != nil {
				t.Errorf("a committed session cannot be opened: %v", err)
			}
		})
	}
}

// The agent's request repeats a key: recorded, and does the committed session open?
func TestAgentDuplicateKeysNeverCommitAnUnopenableSession(t *testing.T) {
	_, up := hFake(t, "turns:\n- text: ok\n")
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
	body := []byte(`{"model":"claude-x","max_tokens":100,"max_tokens":200,"messages":[{"role":"user","content":"a","content":"b"}],"metadata":{"user_id":"u","user_id":"v"}}`)
	res := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, body)
	o := r.stop()
	t.Logf("status %d %s; record err %v", res.status, res.body, o.Err)
	if _, err := os.Stat(filepath.Join(dir, session.MetaFile)); err == nil {
		if _, err := session.Open(dir); err != nil {
			t.Errorf("committed session cannot be opened: %v", err)
		}
	}
}

func TestInvalidUTF8FromTheUpstreamIsRecordedAndReplayed(t *testing.T) {
	js := strings.Replace(hBigJSON, "second", "sec\xff\xfeond", 1)
	sse := strings.Replace(hBigSSE, `\u00e9`, "\xc3(", 1)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			up, _ := hRawUpstream(t, js, sse)
			dir := filepath.Join(t.TempDir(), "s")
			r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up.URL}})
			res := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, hMsg(stream, "x"))
			o := r.stop()
			t.Logf("live status %d body %.200q; record err %v", res.status, res.body, o.Err)
			if _, err := os.Stat(filepath.Join(dir, session.MetaFile)); err != nil {
				t.Logf("not committed")
				return
			}
			ses, err := session.Open(dir)
			if err != nil {
				t.Fatalf("committed session cannot be opened: %v", err)
			}
			p := hStart(t, Options{Mode: Replay, Session: ses})
			rep := hDo(t, p.ts.URL, "/v1/messages", nil, hMsg(stream, "x"))
			p.stop()
			if rep.status != res.status || !bytes.Equal(rep.body, res.body) {
				t.Errorf("replay differs: %d vs %d%s", res.status, rep.status, hDiff(string(res.body), string(rep.body)))
			}
		})
	}
}

// Lying upstreams.
func TestLyingUpstreamsAreRecordedAndReplayedFaithfully(t *testing.T) {
	okJSON := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`
	cases := map[string]http.HandlerFunc{
		"cl-too-long": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(okJSON)+50))
			io.WriteString(w, okJSON)
		},
		"html-200": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html><body>gateway login</body></html>")
		},
		"500-json": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			io.WriteString(w, `{"type":"error","error":{"type":"api_error","message":"boom"}}`)
		},
		"529-overloaded": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("x-should-retry", "true")
			w.WriteHeader(529)
			io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		},
		"sse-for-json": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, hBigSSE)
		},
		"sse-garbage": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message_start\ndata: {not json\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		},
		"sse-error-event": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			parts := strings.SplitAfterN(hBigSSE, "\n\n", 5)
			io.WriteString(w, strings.Join(parts[:4], "")+"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
		},
	}
	for name, h := range cases {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", name, stream), func(t *testing.T) {
				up := httptest.NewServer(h)
				defer up.Close()
				dir := filepath.Join(t.TempDir(), "s")
				r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up.URL}})
				res := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, hMsg(stream, "x"))
				o := r.stop()
				t.Logf("live %d %q %.300q; record err %v", res.status, res.header.Get("Content-Type"), res.body, o.Err)
				if _, err := os.Stat(filepath.Join(dir, session.MetaFile)); err != nil {
					t.Logf("not committed")
					return
				}
				ses, err := session.Open(dir)
				if err != nil {
					t.Fatalf("committed session cannot be opened: %v", err)
				}
				p := hStart(t, Options{Mode: Replay, Session: ses})
				rep := hDo(t, p.ts.URL, "/v1/messages", nil, hMsg(stream, "x"))
				p.stop()
				if rep.status != res.status || !bytes.Equal(rep.body, res.body) {
					t.Errorf("replay differs: %d vs %d%s", res.status, rep.status, hDiff(string(res.body), string(rep.body)))
				}
				for _, hd := range []string{"Content-Type", "X-Should-Retry", "Retry-After"} {
					if rep.header.Get(hd) != res.header.Get(hd) {
						t.Errorf("header %s: record %q replay %q", hd, res.header.Get(hd), rep.header.Get(hd))
					}
				}
			})
		}
	}
}

// ---------- robustness ----------

func TestBodySizeLimitHoldsForChunkedBodies(t *testing.T) {
	_, up := hFake(t, "turns:\n- text: ok\n")
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
	for _, tc := range []struct {
		n       int
		chunked bool
		want    int
	}{{MaxBodyBytes, false, 200}, {MaxBodyBytes + 1, false, 413}, {MaxBodyBytes, true, 200}, {MaxBodyBytes + 1, true, 413}} {
		body := hBodyOfSize(tc.n)
		var rd io.Reader = bytes.NewReader(body)
		if tc.chunked {
			rd = io.MultiReader(bytes.NewReader(body)) // no length: chunked
		}
		req, _ := http.NewRequest("POST", r.ts.URL+"/v1/messages", rd)
		req.Header.Set("x-api-key", "agent-key-xyz")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%d chunked=%v: %v", tc.n, tc.chunked, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%d bytes chunked=%v: status %d want %d: %.200s", tc.n, tc.chunked, resp.StatusCode, tc.want, b)
		}
		if tc.want == 413 && !bytes.Contains(b, []byte(`"request_too_large"`)) {
			t.Errorf("413 body not in provider shape: %.200s", b)
		}
	}
	if o := r.stop(); o.Err != nil {
		t.Fatal(o.Err)
	}
	hOpen(t, dir)
}

func TestMalformedBodiesGetTheProviderErrorShape(t *testing.T) {
	_, up := hFake(t, "turns:\n- text: ok\n")
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
	for _, b := range []string{"", "not json", `{"model":"x","messages":[`, `[]`, `null`, `{"model":"x","max_tokens":1,"messages":"str"}`,
		`{"model":"x","max_tokens":1,"messages":[{"role":"user","content":"\ud800"}]}`, "{\"model\":\"x\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
		`{"model":"x","max_tokens":1,"messages":[]}` + strings.Repeat(" ", 10) + `{}`, strings.Repeat("[", 100000)} {
		res := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, []byte(b))
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if json.Unmarshal(res.body, &e) != nil || e.Type != "error" || res.status >= 500 {
			t.Errorf("body %.40q: status %d, not the provider's error shape: %.200s", b, res.status, res.body)
		}
	}
	if o := r.stop(); o.Err != nil {
		t.Fatal(o.Err)
	}
	hOpen(t, dir)
}

// SIGTERM during a slow but finite stream: the committed session is complete and replays the stream.
// The upstream pauses after its first event until the run has been told to stop, so the call is in
// flight at the signal however slowly the machine runs; a call that arrived after it would be refused
// with 503 and recorded nowhere.
func TestAStreamInFlightAtShutdownIsCommittedAndReplayed(t *testing.T) {
	script, err := fakellm.Parse([]byte("chunkSize: 2\nturns:\n- text: " + strings.Repeat("abcdefghij", 5) + "\n  faults: [{kind: slow, eventDelay: 20ms}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	fake := fakellm.New(script)
	paused, resume := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fake.ServeHTTP(&pausingWriter{ResponseWriter: w, r: req, paused: paused, resume: resume}, req)
	}))
	t.Cleanup(up.Close)
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up.URL}})
	got := make(chan hResp, 1)
	go func() {
		got <- hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, hMsg(true, "x"))
	}()
	select {
	case <-paused: // the proxy admitted the call: it reaches the upstream only after that
	case res := <-got:
		t.Fatalf("the call ended before its stream began: %d %.200s", res.status, res.body)
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not reach the upstream within 10s")
	}
	r.cancel()
	close(resume)
	o := r.stop()
	var live hResp
	select {
	case live = <-got:
	case <-time.After(10 * time.Second): // hDo failed the test, or the proxy never ended the stream
		t.Fatal("the agent's call did not end within 10s of the run's end")
	}
	if o.Err != nil {
		t.Fatalf("record: %v", o.Err)
	}
	ses := hOpen(t, dir)
	p := hStart(t, Options{Mode: Replay, Session: ses})
	rep := hDo(t, p.ts.URL, "/v1/messages", nil, hMsg(true, "x"))
	p.stop()
	if !bytes.Equal(live.body, rep.body) {
		t.Errorf("replay of a stream in flight at SIGTERM differs:%s", hDiff(string(live.body), string(rep.body)))
	}
}

// pausingWriter flushes the first event of a stream, says so by closing paused, and holds the rest
// until resume is closed or the client goes away. It serves one request: paused is closed once.
type pausingWriter struct {
	http.ResponseWriter
	r              *http.Request
	paused         chan<- struct{}
	resume         <-chan struct{}
	flushedAlready bool
}

func (p *pausingWriter) Flush() {
	_ = http.NewResponseController(p.ResponseWriter).Flush()
	if p.flushedAlready {
		return
	}
	p.flushedAlready = true
	close(p.paused)
	select {
	case <-p.resume:
	case <-p.r.Context().Done():
	}
}

// The agent disconnects at every point of a stream; each recording must open and replay the same
// request without hanging.
func TestAClientDisconnectingAnywhereLeavesAReplayableSession(t *testing.T) {
	for _, cut := range []int{0, 1, 3, 5, 8, 12, 20} {
		t.Run(fmt.Sprint("after", cut), func(t *testing.T) {
			_, up := hFake(t, "chunkSize: 3\nturns:\n- text: "+strings.Repeat("xyz", 6)+"\n  toolCalls: [{name: t, input: {a: 1}}]\n  faults: [{kind: slow, eventDelay: 5ms}]\n")
			dir := filepath.Join(t.TempDir(), "s")
			r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "POST", r.ts.URL+"/v1/messages", bytes.NewReader(hMsg(true, "x")))
			req.Header.Set("x-api-key", "agent-key-xyz")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				buf := make([]byte, 1)
				events := 0
				for events < cut {
					n, err := resp.Body.Read(buf)
					if err != nil {
						break
					}
					if n == 1 && buf[0] == '\n' {
						events++ // counts lines, roughly
					}
				}
			}
			cancel()
			// the proxy has given the cut call up before the next one begins
			if !r.srv.waitInflight(10 * time.Second) {
				t.Fatal("the proxy still holds the call 10s after its agent left")
			}
			// a second, complete call afterwards on the same lane
			after := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, hMsg(false, "y"))
			o := r.stop()
			if o.Err != nil {
				t.Fatalf("record: %v", o.Err)
			}
			ses := hOpen(t, dir)
			p := hStart(t, Options{Mode: Replay, Session: ses})
			rep1 := hDo(t, p.ts.URL, "/v1/messages", nil, hMsg(true, "x"))
			rep2 := hDo(t, p.ts.URL, "/v1/messages", nil, hMsg(false, "y"))
			p.stop()
			t.Logf("replay of the cut call: %d %.120q", rep1.status, rep1.body)
			if !bytes.Equal(rep2.body, after.body) {
				t.Errorf("the call after the disconnect replays differently: %d%s", rep2.status, hDiff(string(after.body), string(rep2.body)))
			}
		})
	}
}

// ---------- drift and lanes ----------

func TestDriftAndLanesUnderWarnAndStrict(t *testing.T) {
	_, up := hFake(t, "turns:\n- when: {message: A}\n  text: answer A\n- when: {message: B}\n  text: answer B\n- text: other\n")
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
	recA := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz", HeaderLane: "la"}, hMsg(false, "A"))
	recB := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz", HeaderLane: "lb"}, hMsg(false, "B"))
	same1 := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, hMsg(false, "same"))
	same2 := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, hMsg(false, "same"))
	if o := r.stop(); o.Err != nil {
		t.Fatal(o.Err)
	}
	ses := hOpen(t, dir)

	// replay: the lanes in the reverse of their recorded order, lb answered before la is even sent
	// (one lane never waits for another), then the same request twice, then a third time
	p := hStart(t, Options{Mode: Replay, Session: ses, DriftPolicy: "Warn"})
	answeredB := make(chan hResp, 1)
	go func() {
		answeredB <- hDo(t, p.ts.URL, "/v1/messages", map[string]string{HeaderLane: "lb"}, hMsg(false, "B"))
	}()
	var b hResp
	select {
	case b = <-answeredB:
	case <-time.After(10 * time.Second):
		t.Fatal("lane lb was not answered within 10s while lane la, recorded before it, had not called")
	}
	a := hDo(t, p.ts.URL, "/v1/messages", map[string]string{HeaderLane: "la"}, hMsg(false, "A"))
	if !bytes.Equal(b.body, recB.body) || !bytes.Equal(a.body, recA.body) {
		t.Errorf("lanes in another order: lb got %d %.80s / la got %d %.80s", b.status, b.body, a.status, a.body)
	}
	r1 := hDo(t, p.ts.URL, "/v1/messages", nil, hMsg(false, "same"))
	r2 := hDo(t, p.ts.URL, "/v1/messages", nil, hMsg(false, "same"))
	r3 := hDo(t, p.ts.URL, "/v1/messages", nil, hMsg(false, "same"))
	if !bytes.Equal(r1.body, same1.body) || !bytes.Equal(r2.body, same2.body) {
		t.Errorf("same request twice: %d %d", r1.status, r2.status)
	}
	t.Logf("a third identical request beyond the recording (Warn): %d %.200s", r3.status, r3.body)
	if r3.status == 200 {
		t.Errorf("Warn served a request the recording does not hold with 200 (zero upstream calls must still hold, but it should not invent an answer): %.200s", r3.body)
	}
	p.stop()

	// Strict: one byte of difference
	p = hStart(t, Options{Mode: Replay, Session: ses})
	d := hDo(t, p.ts.URL, "/v1/messages", map[string]string{HeaderLane: "la"}, hMsg(false, "a"))
	t.Logf("one-byte drift: %d step=%q site=%q nearest=%q %.300s", d.status, d.header.Get(HeaderDriftStep), d.header.Get(HeaderDriftSite), d.header.Get(HeaderNearestStep), d.body)
	if d.status != 409 || d.header.Get(HeaderDriftStep) == "" {
		t.Errorf("one-byte drift not reported as 409 with step")
	}
	// after a strict drift, is the rest of the run still served?
	after := hDo(t, p.ts.URL, "/v1/messages", map[string]string{HeaderLane: "lb"}, hMsg(false, "B"))
	t.Logf("after a drift, another lane: %d", after.status)
	o := p.stop()
	t.Logf("replay outcome err: %v", o.Err)
}

// Concurrency on the SAME lane, recorded in one order, replayed in the other.
func TestReorderedCallsOnOneLaneGetTheirOwnAnswers(t *testing.T) {
	_, up := hFake(t, "turns:\n- when: {message: A}\n  text: answer A\n- when: {message: B}\n  text: answer B\n")
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
	recA := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, hMsg(false, "A"))
	recB := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, hMsg(false, "B"))
	r.stop()
	p := hStart(t, Options{Mode: Replay, Session: hOpen(t, dir)})
	b := hDo(t, p.ts.URL, "/v1/messages", nil, hMsg(false, "B"))
	a := hDo(t, p.ts.URL, "/v1/messages", nil, hMsg(false, "A"))
	p.stop()
	t.Logf("reordered on one lane: B->%d A->%d (recorded A then B)", b.status, a.status)
	if b.status == 200 && !bytes.Equal(b.body, recB.body) || a.status == 200 && !bytes.Equal(a.body, recA.body) {
		t.Errorf("reordered requests served the wrong answers: B got %.80s", b.body)
	}
}

// ---------- ledger / checkpoint / tools ----------

func TestForgedLedgerRecordsAndToolPathsNeverCommitAnUnopenableSession(t *testing.T) {
	_, up := hFake(t, "turns:\n- text: ok\n")
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
	hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, hMsg(false, "x"))
	deep := `{"op":"INTENT","x":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`
	huge := `{"op":"INTENT","x":"` + strings.Repeat("h", MaxBodyBytes-40) + `"}`
	for _, b := range []string{
		`{"op":"START"}`, `{"op":"start","startSha":"deadbeef"}`, `{"op":"START ","startSha":"deadbeef"}`,
		`{"op":"\u0053TART"}`, `{"op":"START","op":"INTENT"}`, `{"op":"INTENT","op":"START"}`,
		`{"op":"STEP_VERIFIED","author":"OS_RECORDED","verifiedBy":"recorder"}`,
		`{"op":"SUSPEND","turnIndex":99,"transcriptDigest":"sha256:forged","headSha":"forged"}`,
		`{"op":"suspend","turnIndex":99,"transcriptDigest":"sha256:forged"}`,
		`{"op":"INTENT","kind":"session_end","seq":0}`,
		deep, huge,
	} {
		res := hDo(t, r.ts.URL, "/v1/ledger", nil, []byte(b))
		t.Logf("ledger %.60q -> %d %.160s", b, res.status, res.body)
	}
	for _, p := range []string{"/v1/tools/..%2f..%2fadmin", "/v1/tools/../../admin", "/v1/tools/%2e%2e", "/v1/tools/a%00b", "/v1/tools/" + strings.Repeat("a", 65), "/v1/tools/count_tokens@anthropic"} {
		res := hDo(t, r.ts.URL, p, nil, []byte(`{}`))
		t.Logf("tool %q -> %d %.120s", p, res.status, res.body)
		if res.status == 200 {
			t.Errorf("tool path %q accepted", p)
		}
	}
	cp := hDo(t, r.ts.URL, "/v1/checkpoint", nil, []byte(`{"turnIndex":5}`))
	t.Logf("checkpoint -> %d %s", cp.status, cp.body)
	o := r.stop()
	t.Logf("record err: %v", o.Err)
	evs, _ := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	for _, line := range strings.Split(string(evs), "\n") {
		if strings.Contains(line, "ledger") || strings.Contains(line, "SUSPEND") || strings.Contains(line, "START") {
			t.Logf("EVENT %.400s", line)
		}
	}
	if _, err := session.Open(dir); err != nil {
		t.Errorf("committed session with agent ledger records cannot be opened: %.300v", err)
	}
}

// ---------- metrics / two proxies ----------

func TestMetricsLeakNoNamesAndTwoProxiesOnOneDirectory(t *testing.T) {
	_, up := hFake(t, "turns:\n- text: ok\n")
	dir := filepath.Join(t.TempDir(), "s")
	r1 := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}, APIKeys: map[string]string{"anthropic": hProvKey}, Secrets: []string{hLearned}})
	s2, err := New(Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	out2 := make(chan *Outcome, 1)
	go func() { out2 <- s2.Run(ctx2) }()
	var ts2 *httptest.Server
	select {
	case <-s2.Ready():
		ts2 = httptest.NewServer(s2.Handler())
		t.Logf("a second proxy opened the same session dir for recording")
	case o := <-out2:
		t.Logf("second proxy refused: %v", o.Err)
	case <-time.After(10 * time.Second):
		t.Errorf("second proxy neither ready nor refused within 10s")
	}
	for i := 0; i < 3; i++ {
		hDo(t, r1.ts.URL, "/v1/messages", map[string]string{"x-api-key": "placeholder", HeaderLane: fmt.Sprintf("lane%d", i), HeaderSite: "site-" + hLearned}, hMsg(false, fmt.Sprint("m", i)))
		if ts2 != nil {
			hDo(t, ts2.URL, "/v1/messages", map[string]string{"x-api-key": "placeholder"}, hMsg(false, fmt.Sprint("z", i)))
		}
		hDo(t, r1.ts.URL, "/v1/tools/tool"+fmt.Sprint(i), nil, []byte(`{}`))
	}
	resp, _ := http.Get(r1.ts.URL + "/metrics")
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.Contains(m, []byte(hProvKey)) || bytes.Contains(m, []byte("lrnd")) || bytes.Contains(m, []byte("lane1")) || bytes.Contains(m, []byte("tool1")) {
		t.Errorf("metrics leak names/secrets")
	}
	o1 := r1.stop()
	t.Logf("proxy 1: %v", o1.Err)
	if ts2 != nil {
		cancel2()
		o2 := <-out2
		ts2.Close()
		t.Logf("proxy 2: %v", o2.Err)
	} else {
		cancel2()
	}
	ses, err := session.Open(dir)
	if err != nil {
		t.Errorf("session written by two proxies cannot be opened: %v", err)
		return
	}
	if err := ses.CheckComplete(); err != nil {
		t.Errorf("%v", err)
	}
	t.Logf("the committed session holds %d events", len(ses.Events))
	needles := hForms("learned", hLearned)
	if hits := hGrep(t, dir, needles); len(hits) > 0 {
		t.Errorf("learned secret stored (site header?): %v", hits)
	}
}

func TestDeeplyNestedLedgerRecordsThatAreAcceptedOpen(t *testing.T) {
	_, up := hFake(t, "turns:\n- text: ok\n")
	for _, depth := range []int{100, 1000, 5000, 20000} {
		dir := filepath.Join(t.TempDir(), "s")
		r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
		res := hDo(t, r.ts.URL, "/v1/ledger", nil, []byte(`{"op":"INTENT","x":`+strings.Repeat(`{"a":`, depth)+"1"+strings.Repeat("}", depth)+`}`))
		o := r.stop()
		_, err := session.Open(dir)
		t.Logf("depth %d: ledger %d, record err %v, open err %.200v", depth, res.status, o.Err, err)
		if res.status == 200 && err != nil {
			t.Errorf("depth %d: accepted, committed, unopenable: %.200v", depth, err)
		}
	}
}

func TestEscapedSecretsInErrorBodiesAreStoredNowhere(t *testing.T) {
	esc := `lrnd\u003c\u0026\u003eSec\"ret+/=42Q` // how a JSON encoder with HTML escaping writes hLearned
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(403)
		fmt.Fprintf(w, `{"error":"denied for %s (%s) key %s"}`, esc, hLearned, hProvKey)
	}))
	defer tool.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key %s; echo %s"}}`, esc, r.Header.Get("x-api-key"))
	}))
	defer up.Close()
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up.URL},
		APIKeys: map[string]string{"anthropic": hProvKey}, Secrets: []string{hLearned}, Tools: map[string]string{"probe": tool.URL}})
	a := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "placeholder"}, hMsg(false, "x"))
	b := hDo(t, r.ts.URL, "/v1/messages/count_tokens", map[string]string{"x-api-key": "placeholder"}, hMsg(false, "x"))
	c := hDo(t, r.ts.URL, "/v1/tools/probe", nil, []byte(`{"q":1}`))
	o := r.stop()
	t.Logf("model %d, count_tokens %d, tool %d (%s); err %v", a.status, b.status, c.status, c.body, o.Err)
	needles := map[string]string{"escaped-learned": esc, "escaped-learned-in-json": strings.ReplaceAll(esc, `\`, `\\`)}
	for k, v := range hForms("learned", hLearned) {
		needles[k] = v
	}
	for k, v := range hForms("provkey", hProvKey) {
		needles[k] = v
	}
	if hits := hGrep(t, dir, needles); len(hits) > 0 {
		t.Errorf("secret stored from error bodies: %v", hits)
	}
}

func TestHTMLCharactersReplayAsRecorded(t *testing.T) {
	for _, prov := range []string{"anthropic", "openai"} {
		t.Run(prov, func(t *testing.T) {
			_, up := hFake(t, "turns:\n- text: \"a <b> & c\"\n  toolCalls: [{name: t, input: {q: \"<&>\"}}]\n")
			dir := filepath.Join(t.TempDir(), "s")
			r := hStart(t, Options{Mode: Record, Provider: prov, Dir: dir, ID: "s", Upstreams: map[string]string{prov: up}})
			path := "/v1/messages"
			body := hMsg(false, "x")
			if prov == "openai" {
				path = "/v1/chat/completions"
				body = []byte(`{"model":"gpt-x","messages":[{"role":"user","content":"x"}]}`)
			}
			direct := hDo(t, up, path, nil, body)
			rec := hDo(t, r.ts.URL, path, map[string]string{"x-api-key": "k-agent-123", "Authorization": "Bearer k-agent-123"}, body)
			r.stop()
			p := hStart(t, Options{Mode: Replay, Session: hOpen(t, dir)})
			rep := hDo(t, p.ts.URL, path, nil, body)
			p.stop()
			if string(direct.body) != string(rec.body) {
				t.Logf("record != direct:%s", hDiff(string(direct.body), string(rec.body)))
			}
			if string(rec.body) != string(rep.body) {
				t.Errorf("replay != record:%s", hDiff(string(rec.body), string(rep.body)))
			}
		})
	}
}

// Slowloris: a body that never finishes must not hold the commit. The run is told to stop once the
// proxy has read the start of the body, so the request is open in the proxy at the signal; a run
// that waited for it would return after half its shutdown timeout (15s by default), or at the body
// read timeout (1 minute).
func TestATrickledBodyDoesNotBlockTheCommit(t *testing.T) {
	_, up := hFake(t, "turns:\n- text: ok\n")
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
	bodyStarted := make(chan struct{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.Body = &firstReadSignal{ReadCloser: req.Body, read: bodyStarted}
		r.srv.Handler().ServeHTTP(w, req)
	}))
	defer front.Close()
	pr, pw := io.Pipe()
	defer pw.CloseWithError(io.ErrUnexpectedEOF) // runs before front.Close, which waits for the request
	go func() {
		req, _ := http.NewRequest("POST", front.URL+"/v1/messages", pr)
		req.Header.Set("x-api-key", "agent-key-xyz")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	pw.Write([]byte(`{"model":"claude-x","max_tokens":1,"messages":[`))
	select {
	case <-bodyStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not start reading the body within 10s")
	}
	t0 := time.Now()
	r.cancel()
	select {
	case <-r.out:
		t.Logf("Run returned in %v with a slowloris request open", time.Since(t0))
	case <-time.After(10 * time.Second):
		t.Errorf("slowloris blocks the commit: Run has not returned 10s after the signal")
	}
}

// firstReadSignal is a request body that closes read when its first bytes have been read.
type firstReadSignal struct {
	io.ReadCloser
	read      chan<- struct{}
	signalled bool
}

func (b *firstReadSignal) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.signalled {
		b.signalled = true
		close(b.read)
	}
	return n, err
}

func TestConcurrentLanesReplayInAnyOrder(t *testing.T) {
	_, up := hFake(t, "chunkSize: 2\nturns:\n- text: \"hello there general\"\n")
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
	done := make(chan hResp, 40)
	for i := 0; i < 40; i++ {
		go func(i int) {
			done <- hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": fmt.Sprintf("agent-cred-%04d", i), HeaderLane: fmt.Sprint("l", i%5)}, hMsg(i%2 == 0, fmt.Sprint("q", i)))
		}(i)
	}
	for i := 0; i < 40; i++ {
		if res := <-done; res.status != 200 {
			t.Errorf("status %d %s", res.status, res.body)
		}
	}
	if o := r.stop(); o.Err != nil {
		t.Fatal(o.Err)
	}
	ses := hOpen(t, dir)
	p := hStart(t, Options{Mode: Replay, Session: ses})
	for i := 39; i >= 0; i-- {
		go func(i int) {
			done <- hDo(t, p.ts.URL, "/v1/messages", map[string]string{"x-api-key": fmt.Sprintf("agent-cred-%04d", i), HeaderLane: fmt.Sprint("l", i%5)}, hMsg(i%2 == 0, fmt.Sprint("q", i)))
		}(i)
	}
	bad := 0
	for i := 0; i < 40; i++ {
		if res := <-done; res.status != 200 {
			bad++
			if bad < 3 {
				t.Logf("replay %d %.300s", res.status, res.body)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of 40 concurrent replayed requests (same lanes, other order) were not served", bad)
	}
	p.stop()
}

func TestAnUpstreamCutMidAnswerReplaysAsRecorded(t *testing.T) {
	for _, kind := range []string{"cut", "stream_error"} {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprint(kind, stream), func(t *testing.T) {
				_, up := hFake(t, "chunkSize: 3\nturns:\n- text: \"abcdefghijklmnop\"\n  faults: [{kind: "+kind+", cutAfter: 4}]\n")
				dir := filepath.Join(t.TempDir(), "s")
				r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}})
				rec := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "agent-key-xyz"}, hMsg(stream, "x"))
				r.stop()
				ev, _ := os.ReadFile(filepath.Join(dir, "events.jsonl"))
				ses, err := session.Open(dir)
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				p := hStart(t, Options{Mode: Replay, Session: ses})
				rep := hDo(t, p.ts.URL, "/v1/messages", nil, hMsg(stream, "x"))
				p.stop()
				if rec.status != rep.status || !bytes.Equal(rec.body, rep.body) {
					t.Errorf("record %d / replay %d differ:%s\nEVENTS %.1500s", rec.status, rep.status, hDiff(string(rec.body), string(rep.body)), ev)
				}
			})
		}
	}
}
