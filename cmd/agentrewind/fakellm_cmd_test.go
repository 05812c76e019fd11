package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/syncbuf"
	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// TestFakeLLMServesTheScriptThroughTheSDKAndStopsOnCancel runs `agentrewind fake-llm` on a free
// port with the package's example script: the SDK gets the scripted answer, /healthz answers, and
// cancelling the context (what SIGTERM does in main) returns nil.
func TestFakeLLMServesTheScriptThroughTheSDKAndStopsOnCancel(t *testing.T) {
	script, err := filepath.Abs("../../internal/fakellm/testdata/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cmd := newRootCommand()
	var logs syncbuf.Buffer
	cmd.SetOut(io.Discard)
	cmd.SetErr(&logs)
	cmd.SetArgs([]string{"fake-llm", "--listen", "127.0.0.1:0", "--script", script})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	addr := regexp.MustCompile(`on (127\.0\.0\.1:\d+)`)
	var base string
	waitFor(t, done, "fake-llm to say where it listens", func() bool {
		if m := addr.FindStringSubmatch(logs.String()); m != nil {
			base = "http://" + m[1]
		}
		return base != ""
	})
	if !strings.Contains(logs.String(), "serving 4 turns from "+script) {
		t.Errorf("startup line %q does not name the turns and the script", logs.String())
	}
	if body := waitForHTTP200(t, done, base+"/healthz"); body != "ok" {
		t.Errorf("/healthz answered %q, want ok", body)
	}

	client := anthropic.NewClient(option.WithBaseURL(base), option.WithAPIKey("test"), option.WithMaxRetries(0))
	msg, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Make the failing test pass."))}})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[1].Name != "read_file" || msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("the scripted step 1 is a read_file call; got %+v (stop %q)", msg.Content, msg.StopReason)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("fake-llm returned %v on shutdown, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("fake-llm did not stop within 15s of its context being cancelled")
	}
}

func TestFakeLLMRefusesAMissingOrInvalidScript(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("turns: [{text: hi, stopReason: sometimes}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fake-llm"}, "--script is required"},
		{[]string{"fake-llm", "--script", filepath.Join(t.TempDir(), "none.yaml")}, "no such file"},
		{[]string{"fake-llm", "--script", bad, "--listen", "127.0.0.1:0"}, bad + `: turns[0].stopReason "sometimes"`},
	} {
		cmd := newRootCommand()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(tc.args)
		err := cmd.ExecuteContext(t.Context())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
