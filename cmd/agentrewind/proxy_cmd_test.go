package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// proxyRun is agentrewind proxy running in-process; stop is its SIGTERM.
type proxyRun struct {
	url    string
	cancel context.CancelFunc
	done   chan error
	stderr *bytes.Buffer
}

func startProxyCommand(t *testing.T, args ...string) *proxyRun {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	run := &proxyRun{url: "http://" + addr, cancel: cancel, done: make(chan error, 1), stderr: &bytes.Buffer{}}
	cmd := newRootCommand()
	cmd.SetArgs(append([]string{"proxy", "--listen", addr}, args...))
	cmd.SetOut(io.Discard)
	cmd.SetErr(run.stderr)
	go func() { run.done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(cancel)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(run.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return run
			}
		}
		select {
		case err := <-run.done:
			t.Fatalf("the proxy exited: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("the proxy did not become ready")
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

func echoUpstream(t *testing.T, calls *atomic.Int64) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Hi there"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

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
	var calls atomic.Int64
	rec := startProxyCommand(t, "--mode", "record", "--session-dir", dir, "--session-id", "run-1",
		"--anthropic-upstream", echoUpstream(t, &calls))
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
	if s.CheckComplete() != nil || len(s.Events) != 3 {
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
	if calls.Load() != 1 {
		t.Fatalf("upstream calls = %d, want 1 (the recording's)", calls.Load())
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
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(envStore, "")
			if _, err := runCLI(t, args...); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
