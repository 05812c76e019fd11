package mcpproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/mcpproxy/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.RunIfChild()
	os.Exit(m.Run())
}

// serverOnPath puts a copy of this test binary on PATH as "weather-mcp", the server command the
// recordings run, and returns the directory holding it and the log the server writes.
func serverOnPath(t *testing.T) (bin, log string) {
	t.Helper()
	bin = t.TempDir()
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "weather-mcp"), self, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return bin, filepath.Join(t.TempDir(), "server.log")
}

// removeFromPath takes the server off PATH and deletes it: a replay that tried to start it would fail.
func removeFromPath(t *testing.T, bin string) {
	t.Helper()
	if err := os.RemoveAll(bin); err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, p := range filepath.SplitList(os.Getenv("PATH")) {
		if p != bin {
			keep = append(keep, p)
		}
	}
	t.Setenv("PATH", strings.Join(keep, string(os.PathListSeparator)))
}

// client is a go-sdk client connected to ServeStdio over pipes.
type client struct {
	*mcptest.Client
	done chan *Outcome
}

// finish closes the client (the proxy sees EOF) and returns the run's outcome.
func (c *client) finish(t *testing.T) *Outcome {
	t.Helper()
	_ = c.Close()
	select {
	case out := <-c.done:
		return out
	case <-time.After(30 * time.Second):
		t.Fatal("the stand-in did not finish after its client left")
		return nil
	}
}

func connect(t *testing.T, opts StdioOptions) *client {
	t.Helper()
	c := &client{done: make(chan *Outcome, 1)}
	toProxyR, toProxyW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	go func() {
		out := ServeStdio(context.Background(), opts, toProxyR, toClientW)
		_ = toClientW.Close()
		c.done <- out
	}()
	c.Client = mcptest.Connect(t, toClientR, toProxyW)
	return c
}

// agentRun is what the agent does: list the tools, then call add, slow (with progress), ask (the
// server samples the client's model) and secret_lookup. It returns the texts it got.
func agentRun(t *testing.T, c *client) []string {
	t.Helper()
	ctx := context.Background()
	tools, err := c.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var out []string
	for _, tool := range tools.Tools {
		out = append(out, "tool:"+tool.Name)
	}
	slow := &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 3}}
	slow.SetProgressToken("progress-1")
	for _, p := range []*sdk.CallToolParams{
		{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}},
		slow,
		{Name: "ask", Arguments: map[string]any{"question": "the answer?"}},
		{Name: "secret_lookup", Arguments: map[string]any{"key": "db"}},
	} {
		res, err := c.CallTool(ctx, p)
		if err != nil {
			t.Fatalf("tools/call %s: %v", p.Name, err)
		}
		out = append(out, mcptest.Text(res))
	}
	return out
}

func record(t *testing.T, dir string) (*session.Session, []string, *client) {
	t.Helper()
	c := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Record, Server: "weather", Dir: dir, ID: "mcp-run",
		Config: replay.Config{Secrets: []string{mcptest.Secret}}}, Command: []string{"weather-mcp"}, Env: mcptest.ChildEnv(logPath)})
	got := agentRun(t, c)
	out := c.finish(t)
	if out.Err != nil {
		t.Fatalf("recording: %v", out.Err)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, got, c
}

var logPath string

func TestStdioRecordThenReplayWithoutTheServer(t *testing.T) {
	bin, log := serverOnPath(t)
	logPath = log
	dir := filepath.Join(t.TempDir(), "mcp-run")
	rec, recorded, rc := record(t, dir)

	want := []string{"tool:add", "tool:ask", "tool:crash", "tool:secret_lookup", "tool:slow", "tool:wait", "5", "done after 3 steps",
		"the model said: forty-two", "db=" + mcptest.Secret}
	if diff := cmp.Diff(want, recorded); diff != "" {
		t.Fatalf("what the agent got through the recording stand-in (-want +got):\n%s", diff)
	}
	if rc.Progress.Load() != 3 || rc.Sampled.Load() != 1 {
		t.Errorf("record mode passed %d progress notifications and %d sampling requests to the client, want 3 and 1", rc.Progress.Load(), rc.Sampled.Load())
	}
	var names []string
	var notes int
	for _, ev := range rec.Events {
		switch ev.Kind {
		case session.KindToolCall:
			names = append(names, ev.Name)
			if ev.CallSite != "mcp.weather" {
				t.Errorf("step %d has call site %q, want mcp.weather", ev.Step, ev.CallSite)
			}
		case session.KindNote:
			if strings.Contains(ev.Text, "sampling/createMessage") {
				notes++
			}
		}
	}
	wantNames := []string{"weather/initialize", "weather/tools/list", "weather/tools/call", "weather/tools/call", "weather/tools/call", "weather/tools/call"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("recorded tool events (-want +got):\n%s", diff)
	}
	if notes != 1 {
		t.Errorf("the server's sampling request was recorded %d times, want once as a note", notes)
	}
	assertNoSecret(t, dir)
	starts, calls := mcptest.Log(log)
	if starts != 1 || len(calls) != 4 {
		t.Fatalf("recording: the server started %d times and served %v; want 1 start and 4 calls", starts, calls)
	}

	removeFromPath(t, bin)
	c := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Replay, Server: "weather", Session: rec,
		Config: replay.Config{Secrets: []string{mcptest.Secret}}}, Command: []string{"weather-mcp"}})
	replayed := agentRun(t, c)
	out := c.finish(t)
	if out.Err != nil {
		t.Fatalf("replay: %v", out.Err)
	}
	want[len(want)-1] = "db=" + redactedToken(t, recorded[len(recorded)-1])
	if diff := cmp.Diff(want, replayed); diff != "" {
		t.Errorf("what the agent got from the replay (-want +got):\n%s", diff)
	}
	if c.Progress.Load() != 0 || c.Sampled.Load() != 0 {
		t.Errorf("the replay sent %d progress notifications and %d sampling requests; a replay has no server to send them", c.Progress.Load(), c.Sampled.Load())
	}
	if starts2, calls2 := mcptest.Log(log); starts2 != starts || len(calls2) != len(calls) {
		t.Errorf("the replay reached the real server: %d starts and %d calls after it, %d and %d before", starts2, len(calls2), starts, len(calls))
	}
	if out.Replay.LiveCalls != 0 {
		t.Errorf("the replay made %d live calls", out.Replay.LiveCalls)
	}
}

// redactedToken is the redaction token the recording keeps for the secret in text.
func redactedToken(t *testing.T, text string) string {
	t.Helper()
	_, secret, _ := strings.Cut(text, "=")
	if secret != mcptest.Secret {
		t.Fatalf("the recorded answer %q does not hold the secret", text)
	}
	return mcptestToken
}

var redactionToken = regexp.MustCompile(`arw:redacted:[0-9a-f]+`)

// mcptestToken is set by assertNoSecret from the recording.
var mcptestToken string

// assertNoSecret fails when the secret the server answered with is anywhere in the session directory,
// and remembers the token that stands for it.
func assertNoSecret(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), mcptest.Secret) {
			t.Errorf("%s holds the secret the server answered with", p)
		}
		if m := redactionToken.FindString(string(data)); m != "" && mcptestToken == "" {
			mcptestToken = m
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if mcptestToken == "" {
		t.Fatal("the recording holds no redaction token for the secret")
	}
}

func TestStdioReplayDriftNamesStepAndNearestCall(t *testing.T) {
	bin, log := serverOnPath(t)
	logPath = log
	dir := filepath.Join(t.TempDir(), "mcp-run")
	rec, _, _ := record(t, dir)
	removeFromPath(t, bin)

	c := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Replay, Server: "weather", Session: rec,
		Config: replay.Config{Secrets: []string{mcptest.Secret}}}})
	ctx := context.Background()
	if _, err := c.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 4}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("a call the recording does not hold returned %v, want a JSON-RPC error", err)
	}
	if werr.Code != mcp.CodeDrift {
		t.Errorf("drift error code %d, want %d", werr.Code, mcp.CodeDrift)
	}
	var data mcp.DriftData
	if err := json.Unmarshal(werr.Data, &data); err != nil {
		t.Fatalf("drift data %s: %v", werr.Data, err)
	}
	addStep := stepOf(t, rec, `"add"`)
	if data.Step != 3 || data.Nearest == nil || data.Nearest.Step != addStep || data.Nearest.Name != "weather/tools/call" {
		t.Errorf("drift data %+v: want step 3 and the nearest call weather/tools/call at step %d", data, addStep)
	}
	for _, want := range []string{"drift at step 3", "nearest recorded call is weather/tools/call at step", "arguments.b"} {
		if !strings.Contains(werr.Message, want) {
			t.Errorf("drift message %q does not say %q", werr.Message, want)
		}
	}
	out := c.finish(t)
	var drift *replay.DriftError
	if !errors.As(out.Err, &drift) || drift.Step != 3 {
		t.Errorf("the replay ended with %v, want the drift at step 3", out.Err)
	}
}

// stepOf is the step of the first tool call whose args contain s.
func stepOf(t *testing.T, s *session.Session, sub string) int64 {
	t.Helper()
	for _, ev := range s.Events {
		if ev.Kind == session.KindToolCall && strings.Contains(string(ev.Args), sub) {
			return ev.Step
		}
	}
	t.Fatalf("no tool call with %s", sub)
	return -1
}

func TestStdioServerCrashMidCallIsRecordedAndReplayed(t *testing.T) {
	bin, log := serverOnPath(t)
	dir := filepath.Join(t.TempDir(), "crash")
	c := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Record, Server: "weather", Dir: dir, ID: "crash"},
		Command: []string{"weather-mcp"}, Env: mcptest.ChildEnv(log)})
	ctx := context.Background()
	if res, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 1}}); err != nil || mcptest.Text(res) != "2" {
		t.Fatalf("add before the crash: %v", err)
	}
	_, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "crash", Arguments: map[string]any{}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != mcp.CodeUnavailable || !strings.Contains(werr.Message, "exit status 3") {
		t.Fatalf("the client got %v for a call the server died in, want a JSON-RPC error %d saying it exited with status 3", err, mcp.CodeUnavailable)
	}
	// The stand-in outlives its server: later calls get the same error, not a hang.
	if _, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 1}}); !errors.As(err, &werr) || werr.Code != mcp.CodeUnavailable {
		t.Fatalf("a call after the crash got %v, want the server-unavailable error", err)
	}
	if out := c.finish(t); out.Err != nil {
		t.Fatalf("recording: %v", out.Err)
	}
	rec, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	crashed := findCall(t, rec, `"crash"`)
	if crashed.Error == nil || !strings.Contains(crashed.Error.Message, "exit status 3") {
		t.Fatalf("the crashed call was recorded with error %+v, want the server's exit", crashed.Error)
	}

	removeFromPath(t, bin)
	r := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Replay, Server: "weather", Session: rec}})
	if _, err := r.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 1}}); err != nil {
		t.Fatal(err)
	}
	_, err = r.CallTool(ctx, &sdk.CallToolParams{Name: "crash", Arguments: map[string]any{}})
	if !errors.As(err, &werr) || werr.Code != mcp.CodeUnavailable || !strings.Contains(werr.Message, "exit status 3") {
		t.Errorf("the replayed crash answered %v, want the recorded error", err)
	}
	_, _ = r.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 1}})
	if out := r.finish(t); out.Err != nil {
		t.Errorf("replaying the crashed run: %v", out.Err)
	}
}

func findCall(t *testing.T, s *session.Session, sub string) session.Event {
	t.Helper()
	for _, ev := range s.Events {
		if ev.Kind == session.KindToolCall && strings.Contains(string(ev.Args), sub) {
			return ev
		}
	}
	t.Fatalf("no tool call with %s in %s", sub, s.Meta.ID)
	return session.Event{}
}

// rawFrames drives the stand-in with raw frames, for what no SDK client would send.
func TestStdioMalformedFrameIsRefusedAndNothingIsLost(t *testing.T) {
	_, log := serverOnPath(t)
	dir := filepath.Join(t.TempDir(), "raw")
	toProxyR, toProxyW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	done := make(chan *Outcome, 1)
	go func() {
		done <- ServeStdio(context.Background(), StdioOptions{RunOptions: RunOptions{Mode: Record, Server: "weather", Dir: dir, ID: "raw"},
			Command: []string{"weather-mcp"}, Env: mcptest.ChildEnv(log)}, toProxyR, toClientW)
		_ = toClientW.Close()
	}()
	answers := bufio.NewReader(toClientR)
	send := func(frame string) map[string]json.RawMessage {
		t.Helper()
		if _, err := io.WriteString(toProxyW, frame+"\n"); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(frame, `"notifications/`) {
			return nil
		}
		line, err := answers.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("answer %q: %v", line, err)
		}
		return m
	}
	init := send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if init["result"] == nil {
		t.Fatalf("initialize: %s", init["error"])
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	bad := send(`{"jsonrpc":"2.0","id":2,"method":"tools/list",}`)
	var e mcp.RPCError
	_ = json.Unmarshal(bad["error"], &e)
	badFrame := `{"jsonrpc":"2.0","id":2,"method":"tools/list",}`
	at := fmt.Sprintf("at byte %d", strings.Index(badFrame, ",}")+1)
	if string(bad["id"]) != "null" || e.Code != mcp.CodeParseError || !strings.Contains(e.Message, at) {
		t.Errorf("a frame with a trailing comma was answered %s %+v, want a parse error with id null saying %q", bad["id"], e, at)
	}
	notObject := send(`[{"jsonrpc":"2.0","id":3,"method":"tools/list"}]`)
	_ = json.Unmarshal(notObject["error"], &e)
	if e.Code != mcp.CodeInvalidRequest || !strings.Contains(e.Message, "batches are not part of MCP") {
		t.Errorf("a batch was answered %+v", e)
	}
	list := send(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	if string(list["id"]) != "4" || list["result"] == nil {
		t.Fatalf("tools/list after the bad frames: %v", list)
	}
	_ = toProxyW.Close()
	out := <-done
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	rec, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range rec.Events {
		if ev.Kind == session.KindToolCall {
			names = append(names, ev.Name)
		}
	}
	if diff := cmp.Diff([]string{"weather/initialize", "weather/tools/list"}, names); diff != "" {
		t.Errorf("the recording around the malformed frames (-want +got):\n%s", diff)
	}
}

func TestStdioCancellationReachesTheServerAndDoesNotBreakReplay(t *testing.T) {
	bin, log := serverOnPath(t)
	dir := filepath.Join(t.TempDir(), "cancel")
	c := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Record, Server: "weather", Dir: dir, ID: "cancel"},
		Command: []string{"weather-mcp"}, Env: mcptest.ChildEnv(log)})
	waitAndAdd := func(c *client) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "wait", Arguments: map[string]any{}})
		if got := mcptest.Add(t, c.ClientSession, 4, 5); got != "9" {
			t.Errorf("add after the canceled call = %q", got)
		}
		return err
	}
	if err := waitAndAdd(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the canceled call returned %v", err)
	}
	if out := c.finish(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	// The server saw the cancellation: its handler's context ended.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, calls := mcptest.Log(log)
		if strings.Contains(strings.Join(calls, ","), "wait canceled") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never saw the cancellation: %v", calls)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ev := findCall(t, rec, `"wait"`); ev.Error == nil || ev.Error.Name != replay.ErrorNameCanceled {
		t.Errorf("the canceled call was recorded with error %+v, want %s", ev.Error, replay.ErrorNameCanceled)
	}

	removeFromPath(t, bin)
	r := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Replay, Server: "weather", Session: rec}})
	if err := waitAndAdd(r); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the replayed canceled call returned %v, want the recorded cancellation at once", err)
	}
	if out := r.finish(t); out.Err != nil {
		t.Errorf("replaying a run with a canceled call: %v", out.Err)
	}
}

func TestStdioForkServesThePrefixAndRelaysTheTailToAFreshServer(t *testing.T) {
	_, log := serverOnPath(t)
	dir := filepath.Join(t.TempDir(), "parent")
	c := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Record, Server: "weather", Dir: dir, ID: "parent"},
		Command: []string{"weather-mcp"}, Env: mcptest.ChildEnv(log)})
	mcptest.Add(t, c.ClientSession, 2, 3)
	mcptest.Add(t, c.ClientSession, 10, 20)
	if out := c.finish(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	parent, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	second := stepOf(t, parent, `"a":10`)
	starts, calls := mcptest.Log(log)

	child := filepath.Join(t.TempDir(), "child")
	f := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Fork, Server: "weather", Session: parent, Dir: child, ID: "child", AtStep: second,
		Goal: &replay.Goal{Tool: "weather/tools/call", ArgsMatch: json.RawMessage(`{"arguments":{"a":7}}`)}},
		Command: []string{"weather-mcp"}, Env: mcptest.ChildEnv(log)})
	if got := mcptest.Add(t, f.ClientSession, 2, 3); got != "5" {
		t.Errorf("the prefix's add = %q", got)
	}
	if s, _ := mcptest.Log(log); s != starts {
		t.Errorf("the fork started the server while serving its prefix")
	}
	if got := mcptest.Add(t, f.ClientSession, 7, 8); got != "15" {
		t.Errorf("the tail's add, relayed to the real server, = %q", got)
	}
	if got := mcptest.Add(t, f.ClientSession, 1, 1); got != "2" {
		t.Errorf("a second tail call = %q", got)
	}
	out := f.finish(t)
	if out.Err != nil || out.Fork == nil {
		t.Fatalf("fork: %v", out.Err)
	}
	s2, calls2 := mcptest.Log(log)
	if s2 != starts+1 || len(calls2) != len(calls)+2 {
		t.Errorf("the tail started the server %d times and made %d calls; want 1 start and the 2 tail calls", s2-starts, len(calls2)-len(calls))
	}
	if diff := cmp.Diff(replay.ProvenanceCounts{Recorded: 2, Live: 2}, out.Fork.Provenance); diff != "" {
		t.Errorf("fork provenance (initialize and the first add served, two adds live) (-want +got):\n%s", diff)
	}
	if out.Fork.ReachedGoal == nil || !*out.Fork.ReachedGoal {
		t.Error("the fork's goal (the live add of 7) was not reached")
	}
	rec, err := session.Open(child)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Meta.Parent != "parent" {
		t.Errorf("child's parent %q", rec.Meta.Parent)
	}
	if ev := findCall(t, rec, `"a":7`); ev.Provenance != session.ProvenanceLive || !strings.Contains(string(ev.Result), `"15"`) {
		t.Errorf("the tail's call was recorded with provenance %q and result %s", ev.Provenance, ev.Result)
	}
}
