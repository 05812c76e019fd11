package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/mcpproxy/mcptest"
)

// mcpUpstream is the go-sdk test server behind the SDK's own streamable HTTP handler; calls counts
// every tool call it served, so a replay that reached it fails the test, requests every HTTP request
// that reached it, and methods every JSON-RPC message its server handled, by method.
type mcpUpstream struct {
	*httptest.Server
	calls    atomic.Int32
	requests atomic.Int32

	mu      sync.Mutex
	methods map[string]int
}

func newMCPUpstream(t *testing.T) *mcpUpstream {
	t.Helper()
	u := &mcpUpstream{methods: map[string]int{}}
	srv := mcptest.NewServer(mcptest.Hooks{OnCall: func(string) { u.calls.Add(1) }, OnCrash: func() {
		// The server dies mid-call: every connection to it is cut, and it takes no new one.
		u.CloseClientConnections()
		go u.Close()
		time.Sleep(200 * time.Millisecond)
	}})
	srv.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			u.mu.Lock()
			u.methods[method]++
			u.mu.Unlock()
			return next(ctx, method, req)
		}
	})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// handled is how many messages of each method the server handled.
func (u *mcpUpstream) handled() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return maps.Clone(u.methods)
}

// mcpClient connects a go-sdk client to the proxy's /mcp/weather over streamable HTTP.
func mcpClient(t *testing.T, proxyURL string) (*mcpsdk.ClientSession, *atomic.Int32, *atomic.Int32) {
	t.Helper()
	var progress, sampled atomic.Int32
	cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "agent", Version: "v0.1"}, &mcpsdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcpsdk.ProgressNotificationClientRequest) { progress.Add(1) },
		CreateMessageHandler: func(context.Context, *mcpsdk.CreateMessageRequest) (*mcpsdk.CreateMessageResult, error) {
			sampled.Add(1)
			return &mcpsdk.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcpsdk.TextContent{Text: "forty-two"}}, nil
		},
	})
	cs, err := cl.Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: proxyURL + "/mcp/weather", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connecting the SDK client through the proxy: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, &progress, &sampled
}

// mcpAgent lists the tools and calls add, slow (progress) and ask (the server samples the client).
func mcpAgent(t *testing.T, cs *mcpsdk.ClientSession) []string {
	t.Helper()
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	out := []string{}
	for _, tool := range tools.Tools {
		out = append(out, tool.Name)
	}
	slow := &mcpsdk.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 2}}
	slow.SetProgressToken("p-1")
	for _, p := range []*mcpsdk.CallToolParams{{Name: "add", Arguments: map[string]any{"a": 20, "b": 22}}, slow,
		{Name: "ask", Arguments: map[string]any{"question": "what?"}}} {
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatalf("tools/call %s: %v", p.Name, err)
		}
		out = append(out, mcptest.Text(res))
	}
	return out
}

func TestMCPOverStreamableHTTPRecordsAndReplaysWithNoServer(t *testing.T) {
	up := newMCPUpstream(t)
	dir := filepath.Join(t.TempDir(), "rec")
	rec := start(t, Options{Mode: Record, Dir: dir, ID: "rec", MCPServers: map[string]string{"weather": up.URL}})
	cs, progress, sampled := mcpClient(t, rec.url)
	recorded := mcpAgent(t, cs)
	want := []string{"add", "ask", "crash", "secret_lookup", "slow", "wait", "42", "done after 2 steps", "the model said: forty-two"}
	if diff := cmp.Diff(want, recorded); diff != "" {
		t.Fatalf("through the recording proxy (-want +got):\n%s", diff)
	}
	if progress.Load() != 2 || sampled.Load() != 1 {
		t.Errorf("the recording proxy passed %d progress notifications and %d sampling requests, want 2 and 1", progress.Load(), sampled.Load())
	}
	_ = cs.Close()
	if out := rec.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	s := openSession(t, dir)
	var names []string
	notes := 0
	for _, ev := range s.Events {
		if ev.Kind == session.KindToolCall {
			names = append(names, ev.Name)
		}
		if ev.Kind == session.KindNote && strings.Contains(ev.Text, "sampling/createMessage") {
			notes++
		}
	}
	if diff := cmp.Diff([]string{"weather/initialize", "weather/tools/list", "weather/tools/call", "weather/tools/call", "weather/tools/call"}, names); diff != "" {
		t.Errorf("recorded tool events (-want +got):\n%s", diff)
	}
	if notes != 1 {
		t.Errorf("the server's sampling request was recorded %d times, want once", notes)
	}
	served := up.calls.Load()
	up.Close() // the server is gone: a replay that needed it would fail

	rp := start(t, Options{Mode: Replay, Session: s, MCPServers: map[string]string{"weather": up.URL}})
	cs, progress, sampled = mcpClient(t, rp.url)
	if diff := cmp.Diff(want, mcpAgent(t, cs)); diff != "" {
		t.Errorf("replayed (-want +got):\n%s", diff)
	}
	if progress.Load() != 0 || sampled.Load() != 0 {
		t.Errorf("the replay sent %d progress notifications and %d sampling requests", progress.Load(), sampled.Load())
	}
	_, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}})
	var werr *jsonrpc.Error
	addStep := int64(-1)
	for _, ev := range s.Events {
		if ev.Kind == session.KindToolCall && strings.Contains(string(ev.Args), `"add"`) {
			addStep = ev.Step
		}
	}
	nearest := fmt.Sprintf("nearest recorded call is weather/tools/call at step %d (already served)", addStep)
	if !errors.As(err, &werr) || werr.Code != mcp.CodeDrift || !strings.Contains(werr.Message, nearest) {
		t.Errorf("an unrecorded call in the replay answered %v, want a drift naming the nearest recorded call", err)
	}
	_ = cs.Close()
	out := rp.stop(t)
	if out.Replay == nil || out.Replay.LiveCalls != 0 {
		t.Errorf("replay outcome %+v", out)
	}
	if up.calls.Load() != served {
		t.Errorf("the replay reached the MCP server: %d calls, %d when recorded", up.calls.Load(), served)
	}
}

func TestMCPOverStreamableHTTPServerCrashMidCallIsRecorded(t *testing.T) {
	up := newMCPUpstream(t)
	dir := filepath.Join(t.TempDir(), "crash")
	rec := start(t, Options{Mode: Record, Dir: dir, ID: "crash", MCPServers: map[string]string{"weather": up.URL}})
	cs, _, _ := mcpClient(t, rec.url)
	if got := mcptest.Add(t, cs, 1, 2); got != "3" {
		t.Fatalf("add = %q", got)
	}
	_, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "crash", Arguments: map[string]any{}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != mcp.CodeUnavailable {
		t.Fatalf("the call the server died in answered %v, want a JSON-RPC error %d", err, mcp.CodeUnavailable)
	}
	_ = cs.Close()
	if out := rec.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	s := openSession(t, dir)
	var crashed *session.Event
	for i, ev := range s.Events {
		if ev.Kind == session.KindToolCall && strings.Contains(string(ev.Args), `"crash"`) {
			crashed = &s.Events[i]
		}
	}
	if crashed == nil || crashed.Error == nil || !strings.Contains(crashed.Error.Message, mcp.ErrServerUnavailable.Error()) {
		t.Fatalf("the crashed call was recorded as %+v, want an error event", crashed)
	}
}

func TestMCPOverStreamableHTTPRefusesMalformedFramesAndUnknownServers(t *testing.T) {
	up := newMCPUpstream(t)
	rec := start(t, Options{Mode: Record, Dir: filepath.Join(t.TempDir(), "bad"), ID: "bad", MCPServers: map[string]string{"weather": up.URL}})
	status, body := postRaw(t, rec.url+"/mcp/weather", `{"jsonrpc":"2.0","id":1,"method":"tools/list",]`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"code":-32700`) || !strings.Contains(string(body), "at byte 46") {
		t.Errorf("a malformed frame got %d %s, want 400 with a parse error naming byte 46", status, body)
	}
	status, body = postRaw(t, rec.url+"/mcp/nobody", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if status != http.StatusNotFound || !strings.Contains(string(body), `no MCP server \"nobody\"`) {
		t.Errorf("an unknown server got %d %s", status, body)
	}
	// Nothing was lost: the SDK client works through the same proxy afterwards.
	cs, _, _ := mcpClient(t, rec.url)
	if got := mcptest.Add(t, cs, 2, 2); got != "4" {
		t.Errorf("add after the malformed frame = %q", got)
	}
	_ = cs.Close()
	out := rec.stop(t)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	// The refused frames left no trace; the calls after them are all there.
	var names []string
	for _, ev := range out.Record.Events {
		if ev.Kind == session.KindToolCall {
			names = append(names, ev.Name)
		}
	}
	if diff := cmp.Diff([]string{"weather/initialize", "weather/tools/call"}, names); diff != "" {
		t.Errorf("recorded around the malformed frame (-want +got):\n%s", diff)
	}
}

func postRaw(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return do(t, req)
}

// recordAdds records a session "parent" of a go-sdk client calling add on each pair, through the proxy.
func recordAdds(t *testing.T, adds ...[2]int) *session.Session {
	t.Helper()
	up := newMCPUpstream(t)
	dir := filepath.Join(t.TempDir(), "parent")
	rec := start(t, Options{Mode: Record, Dir: dir, ID: "parent", MCPServers: map[string]string{"weather": up.URL}})
	cs, _, _ := mcpClient(t, rec.url)
	for _, ab := range adds {
		mcptest.Add(t, cs, ab[0], ab[1])
	}
	_ = cs.Close()
	if out := rec.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	return openSession(t, dir)
}

func TestMCPOverStreamableHTTPForkServesThePrefixAndRelaysTheTailToTheLiveServer(t *testing.T) {
	parent := recordAdds(t, [2]int{2, 3}, [2]int{10, 20})
	second := int64(-1)
	for _, ev := range parent.Events {
		if ev.Kind == session.KindToolCall && strings.Contains(string(ev.Args), `"a":10`) {
			second = ev.Step
		}
	}
	// A server that only sees the fork: what reached it is the tail's doing.
	live := newMCPUpstream(t)

	childDir := filepath.Join(t.TempDir(), "child")
	fk := start(t, Options{Mode: Fork, Session: parent, Dir: childDir, ID: "child", AtStep: second,
		Goal: &replay.Goal{Tool: "weather/tools/call", ArgsMatch: json.RawMessage(`{"arguments":{"a":7}}`)}, MCPServers: map[string]string{"weather": live.URL}})
	cs, _, _ := mcpClient(t, fk.url)
	if got := mcptest.Add(t, cs, 2, 3); got != "5" {
		t.Errorf("the prefix's add = %q, want the recorded 5", got)
	}
	if n := live.requests.Load(); n != 0 {
		t.Errorf("serving the prefix (initialize, its notification and the first add) sent the server %d requests, want none", n)
	}
	// The tail's adds are not in the recording: only the live server can answer them.
	if got := mcptest.Add(t, cs, 7, 8); got != "15" {
		t.Errorf("the tail's add, relayed to the live server, = %q", got)
	}
	if got := mcptest.Add(t, cs, 1, 1); got != "2" {
		t.Errorf("a second tail call = %q", got)
	}
	_ = cs.Close()
	out := fk.stop(t)
	if out.Err != nil || out.Fork == nil {
		t.Fatalf("fork: %v", out.Err)
	}
	if live.calls.Load() != 2 {
		t.Errorf("the live server served %d tool calls, want the tail's 2", live.calls.Load())
	}
	// One session opened by the fork, the way the client initialized: not the client's own
	// initialize and notification, which the prefix answered from the recording.
	want := map[string]int{"initialize": 1, "notifications/initialized": 1, "tools/call": 2}
	if diff := cmp.Diff(want, live.handled()); diff != "" {
		t.Errorf("messages the live server handled (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(replay.ProvenanceCounts{Recorded: 2, Live: 2}, out.Fork.Provenance); diff != "" {
		t.Errorf("fork provenance (initialize and the first add served, two adds live) (-want +got):\n%s", diff)
	}
	if out.Fork.ReachedGoal == nil || !*out.Fork.ReachedGoal {
		t.Error("the fork's goal (the live add of 7) was not reached")
	}
	child := openSession(t, childDir)
	if child.Meta.Parent != "parent" {
		t.Errorf("child's parent %q", child.Meta.Parent)
	}
	var tail []string
	for _, ev := range child.Events {
		if ev.Kind == session.KindToolCall && ev.Step >= second {
			tail = append(tail, fmt.Sprintf("%s %s %s", ev.Provenance, ev.Args, ev.Result))
		}
	}
	wantTail := []string{`live {"arguments":{"a":7,"b":8},"name":"add"} {"content":[{"type":"text","text":"15"}]}`,
		`live {"arguments":{"a":1,"b":1},"name":"add"} {"content":[{"type":"text","text":"2"}]}`}
	if diff := cmp.Diff(wantTail, tail); diff != "" {
		t.Errorf("the child's tail calls: provenance, args, result (-want +got):\n%s", diff)
	}
}

func TestMCPOverStreamableHTTPForkFromStepZeroRelaysTheClientsInitializeAndRefusesACallBeforeIt(t *testing.T) {
	parent := recordAdds(t, [2]int{2, 3})

	// A tail that opens with a call, not initialize, has nothing to initialize the server with.
	live := newMCPUpstream(t)
	bare := start(t, Options{Mode: Fork, Session: parent, Dir: filepath.Join(t.TempDir(), "bare"), ID: "bare", AtStep: 0,
		MCPServers: map[string]string{"weather": live.URL}})
	_, body := postRaw(t, bare.url+"/mcp/weather", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":1}}}`)
	if !strings.Contains(string(body), fmt.Sprintf(`"code":%d`, mcp.CodeUnavailable)) || !strings.Contains(string(body), "the fork's tail reached tools/call before the client initialized") {
		t.Errorf("a tail call before any initialize answered %s, want an unavailable error saying the client had not initialized", body)
	}
	if out := bare.stop(t); out.Fork == nil {
		t.Fatalf("fork: %v", out.Err)
	}
	if n := live.requests.Load(); n != 0 {
		t.Errorf("the refused tail sent the server %d requests", n)
	}

	// From step 0 the client's own initialize and notification are the tail's: relayed once, not doubled.
	fk := start(t, Options{Mode: Fork, Session: parent, Dir: filepath.Join(t.TempDir(), "child"), ID: "child", AtStep: 0,
		MCPServers: map[string]string{"weather": live.URL}})
	cs, _, _ := mcpClient(t, fk.url)
	if got := mcptest.Add(t, cs, 4, 5); got != "9" {
		t.Errorf("the tail's add = %q", got)
	}
	_ = cs.Close()
	out := fk.stop(t)
	if out.Fork == nil {
		t.Fatalf("fork: %v", out.Err)
	}
	want := map[string]int{"initialize": 1, "notifications/initialized": 1, "tools/call": 1}
	if diff := cmp.Diff(want, live.handled()); diff != "" {
		t.Errorf("messages the live server handled (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(replay.ProvenanceCounts{Live: 2}, out.Fork.Provenance); diff != "" {
		t.Errorf("fork provenance (initialize and add live) (-want +got):\n%s", diff)
	}
}
