package mcpproxy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/mcpproxy/mcptest"
	"github.com/agentrewind/agentrewind/internal/syncbuf"
)

func TestTheServersStderrReachesTheLogWithItsSecretsRedacted(t *testing.T) {
	_, log := serverOnPath(t)
	var stderr syncbuf.Buffer
	c := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Record, Server: "weather", Dir: t.TempDir(), ID: "mcp-stderr",
		Config: replay.Config{Secrets: []string{mcptest.Secret}}}, Command: []string{"weather-mcp"},
		Env: mcptest.ChildEnv(log), ServerStderr: &stderr})
	agentRun(t, c)
	out := c.finish(t)
	if out.Err != nil {
		t.Fatalf("recording: %v", out.Err)
	}
	got := stderr.String()
	if strings.Contains(got, mcptest.Secret) || strings.Contains(got, mcptest.Secret[7:]) || strings.Contains(got, mcptest.Secret[3:]) {
		t.Fatalf("the server's secret reached the log, whole or in part:\n%s", got)
	}
	// Every line the server wrote is there: the one written in two pieces before the run started,
	// the one written during a call, and the last, unterminated one written as the server exited.
	for _, want := range []string{"mcptest: starting with token " + redact.TokenPrefix, "mcptest: answered db=" + redact.TokenPrefix, "mcptest: bye " + redact.TokenPrefix} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %q:\n%s", want, got)
		}
	}
	// The log's redactions are not counted: nothing of them is stored.
	if n := out.Record.Meta.Redaction.Counts["declared-secret"]; n != 1 {
		t.Errorf("declared-secret redactions = %d, want 1 (the stored tool result): %v", n, out.Record.Meta.Redaction.Counts)
	}
}

func TestRedactedStderrRedactsASecretSplitAtEveryByte(t *testing.T) {
	const secret = "sk-ant-api03-" + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-abcdefghijklmnopqrstuvwxyz0123456789AB-CDEFGH"
	line := "using " + secret + " now\n"
	for cut := 0; cut <= len(line); cut++ {
		var out bytes.Buffer
		s := newRedactedStderr(redact.New(redact.BuiltinPatterns()), &out)
		s.release()
		_, _ = s.Write([]byte(line[:cut]))
		_, _ = s.Write([]byte(line[cut:]))
		s.flush()
		if strings.Contains(out.String(), "abcdefghijklmnop") || !strings.Contains(out.String(), redact.TokenPrefix) {
			t.Fatalf("cut at %d: %q", cut, out.String())
		}
	}
}

func TestRedactedStderrHoldsLinesUntilReleasedAndLetsLongLinesThrough(t *testing.T) {
	r := redact.New(nil)
	var out bytes.Buffer
	s := newRedactedStderr(r, &out)
	_, _ = s.Write([]byte("early line with hunter2-secret-value\n"))
	if out.Len() != 0 {
		t.Fatalf("written before release: %q", out.String())
	}
	r.AddLiteral("declared-secret", "hunter2-secret-value") // what the recorder learns before release
	s.release()
	if got := out.String(); strings.Contains(got, "hunter2") || !strings.HasPrefix(got, "early line with "+redact.TokenPrefix) {
		t.Fatalf("after release: %q", got)
	}

	// A line without end is held until it grows past the limit, then written whole, redacted whole.
	out.Reset()
	long := strings.Repeat("word ", maxStderrLine/5) + "hunter2-secret-value"
	_, _ = s.Write([]byte(long[:maxStderrLine-100]))
	if out.Len() != 0 {
		t.Fatalf("a line within the limit was written before its end: %d bytes", out.Len())
	}
	_, _ = s.Write([]byte(long[maxStderrLine-100:]))
	if got := out.String(); strings.Contains(got, "hunter2") || len(got) < maxStderrLine {
		t.Fatalf("long line: %d bytes written, holds the secret: %v", len(got), strings.Contains(got, "hunter2"))
	}
}
