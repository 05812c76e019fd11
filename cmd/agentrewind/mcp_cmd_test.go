package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/minio/minio-go/v7"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/mcpproxy/mcptest"
)

// TestMain lets this test binary be the MCP server the mcp command starts (mcptest.RunIfChild).
func TestMain(m *testing.M) {
	mcptest.RunIfChild()
	os.Exit(m.Run())
}

// mcpRun is agentrewind mcp running in-process with a go-sdk client on its stdin and stdout.
type mcpRun struct {
	*mcptest.Client
	done   chan error
	stderr *bytes.Buffer
}

func startMCPCommand(t *testing.T, args ...string) *mcpRun {
	t.Helper()
	toCmdR, toCmdW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	run := &mcpRun{done: make(chan error, 1), stderr: &bytes.Buffer{}}
	cmd := newRootCommand()
	cmd.SetArgs(append([]string{"mcp"}, args...))
	cmd.SetIn(toCmdR)
	cmd.SetOut(toClientW)
	cmd.SetErr(run.stderr)
	go func() {
		run.done <- cmd.ExecuteContext(context.Background())
		_ = toClientW.Close()
	}()
	run.Client = mcptest.Connect(t, toClientR, toCmdW)
	return run
}

// finish closes the client's side and returns the command's error.
func (r *mcpRun) finish(t *testing.T) error {
	t.Helper()
	_ = r.Close()
	select {
	case err := <-r.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("agentrewind mcp did not exit after its client left; stderr:\n%s", r.stderr)
		return nil
	}
}

func TestMCPCommandRecordsReplaysWithoutTheServerAndForks(t *testing.T) {
	bin, logFile := t.TempDir(), filepath.Join(t.TempDir(), "server.log")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "weather-mcp"), self, 0o755); err != nil {
		t.Fatal(err)
	}
	path := os.Getenv("PATH")
	t.Setenv("PATH", bin+string(os.PathListSeparator)+path)
	// The server inherits the command's environment: these make the copy of this binary the server.
	t.Setenv(mcptest.EnvChild, "1")
	t.Setenv(mcptest.EnvLog, logFile)
	secrets := filepath.Join(t.TempDir(), "secrets")
	if err := os.WriteFile(secrets, []byte(mcptest.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sessions := t.TempDir()
	ctx := context.Background()

	rec := startMCPCommand(t, "--mode", "record", "--session-dir", sessions, "--session-id", "weather-run", "--learn-secrets-from", secrets, "--", "weather-mcp")
	if got := mcptest.Add(t, rec.ClientSession, 2, 3); got != "5" {
		t.Fatalf("add through the recording stand-in = %q", got)
	}
	res, err := rec.CallTool(ctx, &sdk.CallToolParams{Name: "secret_lookup", Arguments: map[string]any{"key": "db"}})
	if err != nil || mcptest.Text(res) != "db="+mcptest.Secret {
		t.Fatalf("secret_lookup through the recording stand-in: %v", err)
	}
	if err := rec.finish(t); err != nil {
		t.Fatalf("agentrewind mcp --mode record: %v\n%s", err, rec.stderr)
	}
	parent, err := session.Open(filepath.Join(sessions, "weather-run"))
	if err != nil {
		t.Fatalf("the recording was not committed: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(sessions, "weather-run", session.EventsFile)); bytes.Contains(data, []byte(mcptest.Secret)) {
		t.Error("the recording holds the secret --learn-secrets-from declared")
	}
	starts, calls := mcptest.Log(logFile)

	// Replay: the server is gone from the machine.
	t.Setenv("PATH", path)
	if err := os.RemoveAll(bin); err != nil {
		t.Fatal(err)
	}
	result := filepath.Join(t.TempDir(), "replay.json")
	rp := startMCPCommand(t, "--mode", "replay", "--session-dir", sessions, "--session-id", "weather-run", "--learn-secrets-from", secrets,
		"--result", result, "--", "weather-mcp")
	if got := mcptest.Add(t, rp.ClientSession, 2, 3); got != "5" {
		t.Errorf("add replayed = %q, want the recorded 5", got)
	}
	if _, err := rp.CallTool(ctx, &sdk.CallToolParams{Name: "secret_lookup", Arguments: map[string]any{"key": "db"}}); err != nil {
		t.Errorf("secret_lookup replayed: %v", err)
	}
	if err := rp.finish(t); err != nil {
		t.Fatalf("agentrewind mcp --mode replay: %v\n%s", err, rp.stderr)
	}
	replayed := readResult(t, result)
	if replayed.Outcome != task.Succeeded || replayed.Replay == nil || !replayed.Replay.Passed || replayed.Replay.LiveCalls != 0 {
		t.Errorf("replay result %+v / %+v: want a passed replay with no live call", replayed, replayed.Replay)
	}
	if s, c := mcptest.Log(logFile); s != starts || len(c) != len(calls) {
		t.Errorf("the replay reached the server: %d starts, %d calls (recorded: %d, %d)", s, len(c), starts, len(calls))
	}

	// Fork after the add: initialize and the add are served, a new call is a miss the fork stubs, and
	// the goal (the add, under the server name the command took from its base name) is reached.
	addStep := int64(-1)
	for _, ev := range parent.Events {
		if ev.Kind == session.KindToolCall && strings.Contains(string(ev.Args), `"add"`) {
			addStep = ev.Step
		}
	}
	result = filepath.Join(t.TempDir(), "fork.json")
	// No server command: the tail is answered from the recording, and by --on-miss where it holds nothing.
	fk := startMCPCommand(t, "--mode", "fork", "--session-dir", sessions, "--session-id", "weather-run", "--learn-secrets-from", secrets,
		"--at-step", strconv.FormatInt(addStep+1, 10), "--on-miss", "Stub", "--goal-tool", "weather-mcp/tools/call", "--goal-args", `{"name":"add","arguments":{"a":2}}`,
		"--result", result, "--server-name", "weather-mcp")
	if got := mcptest.Add(t, fk.ClientSession, 2, 3); got != "5" {
		t.Errorf("the fork's prefix served add = %q, want the recorded 5", got)
	}
	if _, err := fk.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 7, "b": 8}}); err != nil {
		t.Errorf("an unrecorded call in the fork's tail under --on-miss Stub: %v", err)
	}
	if err := fk.finish(t); err != nil {
		t.Fatalf("agentrewind mcp --mode fork: %v\n%s", err, fk.stderr)
	}
	forked := readResult(t, result)
	if forked.Fork == nil {
		t.Fatalf("fork result %+v has no fork payload", forked)
	}
	reached := forked.Fork.ReachedGoal != nil && *forked.Fork.ReachedGoal
	if diff := cmp.Diff(task.Provenance{Recorded: 2, Stub: 1}, forked.Fork.Provenance); diff != "" || !reached {
		t.Errorf("fork provenance (-want +got):\n%s\nreached goal: %v", diff, reached)
	}
	child, err := session.Open(filepath.Join(sessions, forked.Fork.ChildSessionID))
	if err != nil {
		t.Fatal(err)
	}
	if child.Meta.Parent != "weather-run" || child.Meta.ForkedAtStep == nil || *child.Meta.ForkedAtStep != addStep+1 {
		t.Errorf("child meta: parent %q, forked at %v", child.Meta.Parent, child.Meta.ForkedAtStep)
	}
	if s, _ := mcptest.Log(logFile); s != starts {
		t.Errorf("the fork started the server")
	}
}

func readResult(t *testing.T, path string) *task.Result {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := task.Decode(data)
	if err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return res
}

// TestMCPCommandRecordsIntoTheStoreAndReplaysFromIt records a stdio MCP server with --store against a
// real S3 server (versitygw): the session is pushed when the agent leaves, and a replay with --store
// pulls and serves it with the server gone.
func TestMCPCommandRecordsIntoTheStoreAndReplaysFromIt(t *testing.T) {
	srv := storeServer(t)
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.MakeBucket(context.Background(), "mcp-runs", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	const store = "s3://mcp-runs/team"
	bin, logFile := t.TempDir(), filepath.Join(t.TempDir(), "server.log")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "weather-mcp"), self, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(mcptest.EnvChild, "1")
	t.Setenv(mcptest.EnvLog, logFile)

	rec := startMCPCommand(t, "--mode", "record", "--store", store, "--session-id", "mcp-s3", "--", filepath.Join(bin, "weather-mcp"))
	if got := mcptest.Add(t, rec.ClientSession, 20, 22); got != "42" {
		t.Fatalf("add = %q", got)
	}
	if err := rec.finish(t); err != nil {
		t.Fatalf("record: %v\n%s", err, rec.stderr)
	}
	if err := os.RemoveAll(bin); err != nil {
		t.Fatal(err)
	}
	result := filepath.Join(t.TempDir(), "result.json")
	rp := startMCPCommand(t, "--mode", "replay", "--store", store, "--session-id", "mcp-s3", "--result", result, "--server-name", "weather-mcp")
	if got := mcptest.Add(t, rp.ClientSession, 20, 22); got != "42" {
		t.Errorf("add replayed from the store = %q", got)
	}
	if err := rp.finish(t); err != nil {
		t.Fatalf("replay: %v\n%s", err, rp.stderr)
	}
	if res := readResult(t, result); res.Replay == nil || !res.Replay.Passed {
		t.Errorf("replay result %+v", res)
	}
	if starts, calls := mcptest.Log(logFile); starts != 1 || len(calls) != 1 {
		t.Errorf("the server started %d times and served %d calls; want 1 and 1 (the recording's)", starts, len(calls))
	}
}
