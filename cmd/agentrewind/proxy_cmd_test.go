package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/minio/minio-go/v7"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/fakellm"
	"github.com/agentrewind/agentrewind/internal/proxyargs"
	"github.com/agentrewind/agentrewind/internal/syncbuf"
)

// proxyRun is agentrewind proxy running in-process; stop is its SIGTERM.
type proxyRun struct {
	url string
	// healthURL is the --health-listen server's, when the run has one.
	healthURL string
	cancel    context.CancelFunc
	done      chan error
	stderr    *syncbuf.Buffer
}

// The lines the proxy prints once its listeners are bound, with the addresses they bound.
var (
	proxyListensOn      = regexp.MustCompile(`(?m)^agentrewind proxy \(\w+\) listening on (\S+)$`)
	proxyServesProbesOn = regexp.MustCompile(`(?m)^agentrewind proxy serving probes on (\S+)$`)
)

// startProxyCommand runs agentrewind proxy with args on a loopback port the system picks, and returns
// once it is ready at the address it printed. A port the test chose and the proxy bound later could
// be taken by another process in between; a --health-listen of 127.0.0.1:0 is read the same way.
func startProxyCommand(t *testing.T, args ...string) *proxyRun {
	t.Helper()
	return startProxyVerb(t, []string{"proxy"}, args...)
}

// startProxyVerb is startProxyCommand for any verb that runs the proxy (engine replay, engine fork).
func startProxyVerb(t *testing.T, verb []string, args ...string) *proxyRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	run := &proxyRun{cancel: cancel, done: make(chan error, 1), stderr: &syncbuf.Buffer{}}
	cmd := newRootCommand()
	cmd.SetArgs(append(append(append([]string{}, verb...), "--listen", "127.0.0.1:0"), args...))
	cmd.SetOut(io.Discard)
	cmd.SetErr(run.stderr)
	go func() { run.done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(cancel)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if run.url == "" {
			printed := run.stderr.String()
			if m := proxyListensOn.FindStringSubmatch(printed); m != nil {
				run.url = "http://" + m[1]
				if m := proxyServesProbesOn.FindStringSubmatch(printed); m != nil {
					run.healthURL = "http://" + m[1]
				}
			}
		}
		if run.url != "" {
			resp, err := http.Get(run.url + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return run
				}
			}
		}
		select {
		case err := <-run.done:
			t.Fatalf("the proxy exited: %v\n%s", err, run.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("the proxy did not become ready\n%s", run.stderr)
	return nil
}

func (r *proxyRun) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the proxy did not stop")
		return nil
	}
}

// fakeLLM serves a fakellm script (YAML) and returns the fake, whose counter says what went upstream,
// and its URL.
func fakeLLM(t *testing.T, script string) (*fakellm.Server, string) {
	t.Helper()
	s, err := fakellm.Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	fake := fakellm.New(s)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv.URL
}

// hiThere answers every question with the same greeting.
const hiThere = `turns: [{text: Hi there, usage: {inputTokens: 3, outputTokens: 2}}]`

func askProxy(t *testing.T, url, text string) (*sdk.Message, error) {
	c := sdk.NewClient(option.WithBaseURL(url), option.WithAPIKey("placeholder"), option.WithMaxRetries(0))
	return c.Messages.New(context.Background(), sdk.MessageNewParams{Model: "claude-test", MaxTokens: 16,
		Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(text))}})
}

// TestProxyCommandRecordsThenReplaysAndReportsADrift runs the command as a Job would: record until
// SIGTERM commits the session; replay it, drift, and find the divergence in the result file and the
// termination message.
func TestProxyCommandRecordsThenReplaysAndReportsADrift(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ANTHROPIC_API_KEY", "")
	fake, upstream := fakeLLM(t, hiThere)
	rec := startProxyCommand(t, "--mode", "record", "--session-dir", dir, "--session-id", "run-1",
		"--anthropic-upstream", upstream)
	msg, err := askProxy(t, rec.url, "hello")
	if err != nil || msg.Content[0].Text != "Hi there" {
		t.Fatalf("record: %v %+v", err, msg)
	}
	if err := rec.stop(t); err != nil {
		t.Fatalf("record run: %v\n%s", err, rec.stderr)
	}
	s, err := session.Open(filepath.Join(dir, "run-1"))
	if err != nil {
		t.Fatalf("the recording is not committed: %v", err)
	}
	if s.CheckComplete() != nil || len(s.Events) != 4 { // start, the call, the recorder's END, end
		t.Fatalf("recording: %d events, complete: %v", len(s.Events), s.CheckComplete())
	}

	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	resultFile := filepath.Join(t.TempDir(), "result.json")
	rep := startProxyCommand(t, "--mode", "replay", "--session-dir", dir, "--session-id", "run-1", "--job-uid", "job-1",
		"--termination-log", termLog, "--result", resultFile)
	msg, err = askProxy(t, rep.url, "hello")
	if err != nil || msg.Content[0].Text != "Hi there" {
		t.Fatalf("replay: %v %+v", err, msg)
	}
	_, err = askProxy(t, rep.url, "something else")
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || !strings.Contains(apiErr.Message, "drift at step 2") {
		t.Fatalf("drift: %v", err)
	}
	if err := rep.stop(t); err != nil {
		t.Fatalf("replay run: %v\n%s", err, rep.stderr)
	}
	if fake.Requests() != 1 {
		t.Fatalf("upstream calls = %d, want 1 (the recording's)", fake.Requests())
	}
	data, err := os.ReadFile(resultFile)
	if err != nil {
		t.Fatal(err)
	}
	res, err := task.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if res.Task != task.Replay || res.Outcome != task.Succeeded || res.Replay.Passed || res.Replay.Divergence == nil ||
		res.Replay.Divergence.Step != 2 || res.Replay.Divergence.CallSite != "anthropic.messages" {
		t.Fatalf("result %s", data)
	}
	summary, err := os.ReadFile(termLog)
	if err != nil || !strings.Contains(string(summary), "replay") {
		t.Fatalf("termination message %q, %v", summary, err)
	}
}

func TestProxyCommandRefusesIncompleteFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"no mode":           {"proxy", "--session-dir", t.TempDir()},
		"no session":        {"proxy", "--mode", "replay", "--session-dir", t.TempDir()},
		"fork without at":   {"proxy", "--mode", "fork", "--session-dir", t.TempDir(), "--session-id", "a"},
		"bad tool":          {"proxy", "--mode", "record", "--session-dir", t.TempDir(), "--tool", "x"},
		"no store or dir":   {"proxy", "--mode", "record"},
		"at-step in record": {"proxy", "--mode", "record", "--session-dir", t.TempDir(), "--at-step", "3"},
		"goal in replay":    {"proxy", "--mode", "replay", "--session-dir", t.TempDir(), "--session-id", "a", "--goal-tool", "add_label"},
		"goal args alone":   {"proxy", "--mode", "fork", "--session-dir", t.TempDir(), "--session-id", "a", "--at-step", "1", "--goal-args", "{}"},
		"goal args not an object": {"proxy", "--mode", "fork", "--session-dir", t.TempDir(), "--session-id", "a", "--at-step", "1",
			"--goal-tool", "add_label", "--goal-args", "[1]"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(envStore, "")
			if _, err := runCLI(t, args...); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestProxyCommandStampsTheJobsWorkspaceHead records with --workspace-head, as a Job beside an
// agent's container does: the recorder mints START from the flag, outranking the commit the agent
// names in its INTENT, and refuses a START the agent sends.
func TestProxyCommandStampsTheJobsWorkspaceHead(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	dir := t.TempDir()
	head := strings.Repeat("c0ffee12", 5)
	_, upstream := fakeLLM(t, hiThere)
	rec := startProxyCommand(t, "--mode", "record", "--session-dir", dir, "--session-id", "run-1",
		"--anthropic-upstream", upstream, "--workspace-head", head)
	post := func(record string) (int, string) {
		resp, err := http.Post(rec.url+"/v1/ledger", "application/json", strings.NewReader(record))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := post(`{"op":"START","startSHA":"` + strings.Repeat("0", 40) + `"}`); status != http.StatusBadRequest ||
		!strings.Contains(body, "START is minted by the recorder") {
		t.Fatalf("an agent's START got %d %s, want a 400 refusing it", status, body)
	}
	if status, body := post(`{"op":"INTENT","goal":"triage","startSHA":"` + strings.Repeat("0", 40) + `"}`); status != http.StatusOK {
		t.Fatalf("INTENT: %d %s", status, body)
	}
	if _, err := askProxy(t, rec.url, "hello"); err != nil {
		t.Fatal(err)
	}
	if err := rec.stop(t); err != nil {
		t.Fatalf("record run: %v\n%s", err, rec.stderr)
	}
	s, err := session.Open(filepath.Join(dir, "run-1"))
	if err != nil {
		t.Fatal(err)
	}
	starts := 0
	for _, ev := range s.Events {
		var r ledger.Record
		if ev.Kind == session.KindLedger && json.Unmarshal(ev.Ledger, &r) == nil && r.Op == ledger.OpStart {
			starts++
			if ev.Author != session.AuthorRecorder || r.StartSHA != head {
				t.Fatalf("START %s by %s, want the recorder's with %s", ev.Ledger, ev.Author, head)
			}
		}
	}
	if state := ledger.Fold(s.Events); starts != 1 || !state.StartMinted || state.StartSHA != head {
		t.Fatalf("%d STARTs; the fold starts at %q (minted %v), want %s", starts, state.StartSHA, state.StartMinted, head)
	}
}

// TestProxyCommandRecordsIntoTheStoreAndReplaysFromIt records through the proxy with --store against
// a real S3 server (versitygw): on SIGTERM the session is committed and pushed; the store's own Pull
// gets it back intact; a replay with --store serves it with no upstream call and writes its result.
func TestProxyCommandRecordsIntoTheStoreAndReplaysFromIt(t *testing.T) {
	srv := storeServer(t)
	t.Setenv("ANTHROPIC_API_KEY", "")
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.MakeBucket(context.Background(), "proxy-runs", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	const store = "s3://proxy-runs/team"
	fake, upstream := fakeLLM(t, hiThere)
	rec := startProxyCommand(t, "--mode", "record", "--store", store, "--session-id", "run-s3", "--anthropic-upstream", upstream)
	if msg, err := askProxy(t, rec.url, "hello"); err != nil || msg.Content[0].Text != "Hi there" {
		t.Fatalf("record: %v %+v", err, msg)
	}
	if err := rec.stop(t); err != nil {
		t.Fatalf("record run: %v\n%s", err, rec.stderr)
	}

	objects, err := blobstore.Open(context.Background(), blobstore.Config{Endpoint: "http://" + srv.Endpoint, Bucket: "proxy-runs", Prefix: "team",
		Credentials: blobstore.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: blobstore.Secret(srv.SecretKey)}})
	if err != nil {
		t.Fatal(err)
	}
	layout, err := blobstore.NewLayout("team")
	if err != nil {
		t.Fatal(err)
	}
	pulled := filepath.Join(t.TempDir(), "run-s3")
	if _, err := blobstore.NewSessionStore(objects, layout, blobstore.StoreOptions{}).Pull(context.Background(), "run-s3", pulled); err != nil {
		t.Fatalf("the recording is not in the store: %v", err)
	}
	s, err := session.Open(pulled)
	if err != nil {
		t.Fatal(err)
	}
	if s.Meta.ID != "run-s3" || s.CheckComplete() != nil || len(s.Events) != 4 || s.Events[1].Kind != session.KindModelCall {
		t.Fatalf("pulled session %s: %d events, complete: %v", s.Meta.ID, len(s.Events), s.CheckComplete())
	}

	resultFile := filepath.Join(t.TempDir(), "result.json")
	rep := startProxyCommand(t, "--mode", "replay", "--store", store, "--session-id", "run-s3", "--result", resultFile)
	if msg, err := askProxy(t, rep.url, "hello"); err != nil || msg.Content[0].Text != "Hi there" {
		t.Fatalf("replay: %v %+v", err, msg)
	}
	if err := rep.stop(t); err != nil {
		t.Fatalf("replay run: %v\n%s", err, rep.stderr)
	}
	if fake.Requests() != 1 {
		t.Fatalf("upstream calls = %d, want 1 (the recording's)", fake.Requests())
	}
	data, err := os.ReadFile(resultFile)
	if err != nil {
		t.Fatal(err)
	}
	res, err := task.Decode(data)
	if err != nil || res.Outcome != task.Succeeded || !res.Replay.Passed || res.Replay.LiveCalls != 0 {
		t.Fatalf("result %s (%v)", data, err)
	}
}

func TestProxyCommandRefusesAWorkspaceHeadItCannotStamp(t *testing.T) {
	sha := strings.Repeat("a", 40)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"abbreviated": {[]string{"--mode", "record", "--workspace-head", "abc123"}, "full 40 (SHA-1) or 64 (SHA-256) hex digits"},
		"uppercase":   {[]string{"--mode", "record", "--workspace-head", strings.ToUpper(sha)}, "is not a commit"},
		"with a tree": {[]string{"--mode", "record", "--workspace-head", sha, "--workspace", t.TempDir()}, "one of --workspace and --workspace-head"},
		"in a replay": {[]string{"--mode", "replay", "--session-id", "a", "--workspace-head", sha}, "--workspace-head is for record mode"},
		"in a fork":   {[]string{"--mode", "fork", "--session-id", "a", "--at-step", "1", "--workspace-head", sha}, "--workspace-head is for record mode"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := runCLI(t, append([]string{"proxy", "--session-dir", t.TempDir()}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestTheHealthPortServesProbesButNotTheModelAPI: with --health-listen the pod network reaches only
// /healthz, /readyz and /metrics, while the model API (which spends the proxy's key) stays on --listen.
func TestTheHealthPortServesProbesButNotTheModelAPI(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	_, upstream := fakeLLM(t, hiThere)
	rec := startProxyCommand(t, "--mode", "record", "--session-dir", t.TempDir(), "--session-id", "run-h",
		"--anthropic-upstream", upstream, "--health-listen", "127.0.0.1:0")
	defer func() { _ = rec.stop(t) }()
	if rec.healthURL == "" {
		t.Fatalf("the proxy printed no --health-listen address:\n%s", rec.stderr)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(rec.healthURL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("health port %s: %d", path, resp.StatusCode)
		}
	}
	if _, err := askProxy(t, rec.healthURL, "hello"); err == nil {
		t.Fatal("the health port answered a model request")
	}
	if msg, err := askProxy(t, rec.url, "hello"); err != nil || msg.Content[0].Text != "Hi there" {
		t.Fatalf("the model API on --listen: %v", err)
	}
}

// TestProxyToolFlagNeverShowsAPassword: a --tool refused for its name (a URL given without name=) or
// for its URL (no host, a wrong scheme) says which flag without any part of the URL's password: the
// error ends in the pod's log and its termination message.
func TestProxyToolFlagNeverShowsAPassword(t *testing.T) {
	t.Setenv(envStore, "")
	for _, tool := range []string{"https://u:hunter2pw@tracker/x", "https://tracker/x?a=u:hunter2pw@", "t=https://u:hunter2pw@/x",
		"t=ftp://u:hunter2pw@tracker", "t=http://u:hunter2pw/x", "t=https://u:hunter2pw@tracker"} {
		_, err := runCLI(t, "proxy", "--mode", "record", "--session-dir", t.TempDir(), "--tool", tool)
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "--tool") {
			t.Errorf("--tool %s: %v", tool, err)
		}
	}
}

// Every flag of the contract the operator's Job builders write (proxyargs) is one the proxy's
// command reads: a flag renamed on one side only would start proxies that refuse their arguments.
func TestTheProxyReadsEveryFlagOfItsContract(t *testing.T) {
	cmd := newProxyCommand()
	for _, name := range []string{proxyargs.FlagMode, proxyargs.FlagProvider, proxyargs.FlagListen, proxyargs.FlagHealthListen,
		proxyargs.FlagTool, proxyargs.FlagMCPServer, proxyargs.FlagLearnSecretsFrom, proxyargs.FlagAnthropicUpstream, proxyargs.FlagOpenAIUpstream} {
		if cmd.Flags().Lookup(name) == nil {
			t.Errorf("agentrewind proxy has no --%s", name)
		}
	}
}
