package mcpproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/mcpproxy/mcptest"
	"github.com/agentrewind/agentrewind/internal/syncbuf"
)

// Hostile attacks on redactedStderr (stderr.go), written by a reviewer who had not read its tests.

// hsKey is an Anthropic-shaped key the builtin patterns find.
var hsKey = "sk-ant-api03-" + strings.Repeat("Ab3_", 10)

// hsDeclared is a secret no pattern knows; tests declare it.
const hsDeclared = "zq9-declared-PASSWORD-value-7781"

func hsRedactor() *redact.Redactor {
	r := redact.New(redact.BuiltinPatterns())
	r.AddLiteral("declared-secret", hsDeclared)
	return r
}

func hsWriteChunks(t *testing.T, s *redactedStderr, data string, size int) {
	t.Helper()
	for len(data) > 0 {
		n := min(size, len(data))
		k, err := s.Write([]byte(data[:n]))
		if err != nil || k != n {
			t.Fatalf("Write(%d bytes) = %d, %v", n, k, err)
		}
		data = data[n:]
	}
}

func hsNoSecret(t *testing.T, out string, secrets ...string) {
	t.Helper()
	bad := false
	defer func() {
		if bad {
			t.FailNow()
		}
	}()
	for _, s := range secrets {
		if i := strings.Index(out, s); i >= 0 {
			bad = true
			t.Errorf("secret %q reached the log at byte %d: ...%q...", s, i, out[max(0, i-40):min(len(out), i+len(s)+40)])
		}
	}
}

// A secret split across two writes at every byte, before and after release, is redacted; so is one
// written a byte at a time.
func TestHostileStderrSplitAtEveryByte(t *testing.T) {
	for _, secret := range []string{hsKey, hsDeclared} {
		line := "using key " + secret + " now\n"
		want := "using key " + redact.Token(secret) + " now\n"
		for _, released := range []bool{false, true} {
			for i := 0; i <= len(line); i++ {
				sink := &syncbuf.Buffer{}
				s := newRedactedStderr(hsRedactor(), sink)
				if released {
					s.release()
				}
				hsWriteChunks(t, s, line[:i], len(line)+1)
				hsWriteChunks(t, s, line[i:], len(line)+1)
				s.release()
				s.flush()
				if got := sink.String(); got != want {
					t.Fatalf("released=%v split at %d: got %q, want %q", released, i, got, want)
				}
			}
		}
		sink := &syncbuf.Buffer{}
		s := newRedactedStderr(hsRedactor(), sink)
		s.release()
		hsWriteChunks(t, s, line, 1)
		s.flush()
		if got := sink.String(); got != want {
			t.Fatalf("byte by byte: got %q, want %q", got, want)
		}
	}
}

// An unterminated last line holding a split secret is redacted by flush.
func TestHostileStderrFlushRedactsUnterminatedSplitSecret(t *testing.T) {
	sink := &syncbuf.Buffer{}
	s := newRedactedStderr(hsRedactor(), sink)
	s.release()
	half := len(hsDeclared) / 2
	_, _ = s.Write([]byte("bye " + hsDeclared[:half]))
	_, _ = s.Write([]byte(hsDeclared[half:]))
	if got := sink.String(); got != "" {
		t.Fatalf("an unterminated short line was written before flush: %q", got)
	}
	s.flush()
	if got, want := sink.String(), "bye "+redact.Token(hsDeclared); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A long line of words (with whitespace) holding secrets at every offset around the 64 KiB cut, fed
// in chunks of many sizes: no secret reaches the log, and the bytes are otherwise unchanged.
func TestHostileStderrSecretAroundTheCutWithWhitespace(t *testing.T) {
	words := strings.Repeat("lorem ipsum ", maxStderrLine/12+4000) // past the limit
	// A line this long takes the redactor about half a second: a few offsets and sizes only.
	for _, off := range []int{maxStderrLine - 50, maxStderrLine + 5} {
		for _, secret := range []string{hsKey, hsDeclared} {
			// put the secret on a word boundary near off
			at := off - off%12
			line := words[:at] + secret + " " + words[at:] + "\n"
			for _, size := range []int{4 << 10, len(line)} {
				sink := &syncbuf.Buffer{}
				s := newRedactedStderr(hsRedactor(), sink)
				s.release()
				hsWriteChunks(t, s, line, size)
				s.flush()
				got := sink.String()
				hsNoSecret(t, got, secret)
				if want := strings.Replace(line, secret, redact.Token(secret), 1); got != want {
					t.Fatalf("off %d size %d: output differs from the redacted line (len %d vs %d)", off, size, len(got), len(want))
				}
			}
		}
	}
}

// A compact JSON log line (no whitespace at all) longer than the limit, with a secret just before
// it: a line is never cut inside, so the secret is redacted.
func TestHostileStderrSecretInLongRunWithoutWhitespace(t *testing.T) {
	for name, secret := range map[string]string{"declared": hsDeclared, "anthropic": hsKey} {
		t.Run(name, func(t *testing.T) { hsLongRun(t, secret) })
	}
}

func hsLongRun(t *testing.T, secret string) {
	{
		// 4 KiB chunks: the line is written at the write that first passes the limit, whole.
		pre := `{"msg":"req","body":"` + strings.Repeat("x", maxStderrLine-20-len(`{"msg":"req","body":"`)) + `","key":"`
		line := pre + secret + `","more":"` + strings.Repeat("y", 8000) + `"}` + "\n"
		sink := &syncbuf.Buffer{}
		s := newRedactedStderr(hsRedactor(), sink)
		s.release()
		hsWriteChunks(t, s, line, 4<<10)
		s.flush()
		hsNoSecret(t, sink.String(), secret)
	}
}

// A line with a single space — `Authorization: Bearer <token>` inside an otherwise compact JSON log
// line holding a large base64 body — must not be cut after "Bearer ": the bearer pattern needs the
// word and the token together.
func TestHostileStderrBearerTokenCutAtItsSpace(t *testing.T) {
	tok := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLWJ5dGVz"
	line := `{"headers":{"authorization":"Bearer ` + tok + `"},"body":"` + strings.Repeat("QUJD", 25000) + `"}` + "\n"
	// Confirm the whole line is redacted when it is not cut.
	if whole := hsRedactor().String(line); strings.Contains(whole, tok) {
		t.Fatalf("precondition: the redactor does not find the bearer token in the whole line")
	}
	sink := &syncbuf.Buffer{}
	s := newRedactedStderr(hsRedactor(), sink)
	s.release()
	hsWriteChunks(t, s, line, 32<<10) // what exec's io.Copy hands over
	s.flush()
	hsNoSecret(t, sink.String(), tok)
}

// Same with the AWS secret access key, whose pattern allows whitespace after its name.
func TestHostileStderrAWSSecretCutAtItsSpace(t *testing.T) {
	key := "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	line := `{"aws_secret_access_key": "` + key + `","blob":"` + strings.Repeat("QUJD", 25000) + `"}` + "\n"
	if whole := hsRedactor().String(line); strings.Contains(whole, key) {
		t.Fatalf("precondition: the redactor does not find the key in the whole line")
	}
	sink := &syncbuf.Buffer{}
	s := newRedactedStderr(hsRedactor(), sink)
	s.release()
	hsWriteChunks(t, s, line, 32<<10)
	s.flush()
	hsNoSecret(t, sink.String(), key)
}

// A line with a secret pattern inside a long whitespace-free run that is cut at the hold-back point
// keeps its bytes: the concatenated output of a secret-free line is the line.
func TestHostileStderrCutKeepsBytesOfMultibyteRuns(t *testing.T) {
	line := strings.Repeat("é", 50000) + strings.Repeat("\xff", 3) + strings.Repeat("日本", 10000) + "\n"
	for _, size := range []int{61, 4 << 10, 32 << 10, len(line)} {
		sink := &syncbuf.Buffer{}
		s := newRedactedStderr(hsRedactor(), sink)
		s.release()
		hsWriteChunks(t, s, line, size)
		s.flush()
		if got := sink.String(); got != line {
			t.Fatalf("size %d: bytes changed (len %d vs %d)", size, len(got), len(line))
		}
	}
}

// CRLF lines and bare CRs keep their bytes and their secrets are redacted.
func TestHostileStderrCRLF(t *testing.T) {
	in := "a " + hsKey + "\r\nb " + hsDeclared + "\r\n\rc\r" + hsDeclared + "\rd\r\n"
	for _, size := range []int{1, 2, 5, len(in)} {
		sink := &syncbuf.Buffer{}
		s := newRedactedStderr(hsRedactor(), sink)
		s.release()
		hsWriteChunks(t, s, in, size)
		s.flush()
		want := strings.ReplaceAll(strings.ReplaceAll(in, hsKey, redact.Token(hsKey)), hsDeclared, redact.Token(hsDeclared))
		if got := sink.String(); got != want {
			t.Fatalf("size %d: got %q, want %q", size, got, want)
		}
	}
}

// Invalid UTF-8 around and between secrets is passed on byte for byte; the secrets are redacted.
func TestHostileStderrInvalidUTF8(t *testing.T) {
	cases := []string{
		"\xff\xfe\xfd plain\n",
		"\xc3" + hsKey + "\xc3\n",
		"x\xed\xa0\x80 " + hsDeclared + "\x80\n",
		"\xf0\x9f\x98 " + hsKey + " \xe2\x82\n",
		"\x00\x01\x1b[31mred\x1b[0m " + hsDeclared + "\n",
	}
	for _, in := range cases {
		sink := &syncbuf.Buffer{}
		s := newRedactedStderr(hsRedactor(), sink)
		s.release()
		hsWriteChunks(t, s, in, 1)
		s.flush()
		want := strings.ReplaceAll(strings.ReplaceAll(in, hsKey, redact.Token(hsKey)), hsDeclared, redact.Token(hsDeclared))
		if got := sink.String(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

// A secret only visible through JSON escapes on one line makes the redactor replace the whole string
// it was given by one token: every line drained with it (all that waited for release, or all of one
// read of the pipe) is lost from the log, and the whole text is kept as a "secret" (in the vault).
func TestHostileStderrEscapedSecretErasesNeighbourLines(t *testing.T) {
	escaped := `\u0073k-ant-api03-` + strings.Repeat("Ab3_", 10)
	in := "server starting on port 8080\n" +
		`config {"key":"` + escaped + `"}` + "\n" +
		"listening; ready for requests\n"
	for _, released := range []bool{false, true} {
		red := hsRedactor()
		sink := &syncbuf.Buffer{}
		s := newRedactedStderr(red, sink)
		if released {
			s.release()
		}
		_, _ = s.Write([]byte(in))
		s.release()
		s.flush()
		got := sink.String()
		if !strings.Contains(got, "server starting on port 8080\n") || !strings.Contains(got, "listening; ready for requests\n") {
			t.Errorf("released=%v: the harmless lines around the escaped secret were lost: got %q", released, got)
		}
		for _, v := range red.Secrets() {
			if strings.Contains(v, "listening; ready") {
				t.Errorf("released=%v: the redactor keeps stderr text that is no secret (it would be sealed in the vault): %q", released, v)
			}
		}
	}
}

// Lines written before release are held (nothing reaches the log) and all come out, in order, at
// release. The hold is unbounded: report how much a flood keeps in memory.
func TestHostileStderrFloodBeforeRelease(t *testing.T) {
	sink := &syncbuf.Buffer{}
	s := newRedactedStderr(hsRedactor(), sink)
	line := strings.Repeat("z", 1023) + "\n"
	const n = 4 << 10 // 4 MiB
	for i := 0; i < n; i++ {
		_, _ = s.Write([]byte(line))
	}
	if sink.String() != "" {
		t.Fatalf("lines reached the log before release")
	}
	s.mu.Lock()
	held := len(s.buf)
	s.mu.Unlock()
	t.Logf("held before release: %d bytes (unbounded: every byte the server writes before the engine starts)", held)
	s.release()
	if got := sink.String(); got != strings.Repeat(line, n) {
		t.Fatalf("release wrote %d bytes, want %d", len(got), n*len(line))
	}
}

// An over-long unterminated line that follows a newline in what is drained at once (the backlog at
// release, or one read of the pipe) is held whole until a later write: a server that then goes quiet
// keeps it out of the log, though the line is longer than maxStderrLine. Minor (no leak; bounded by
// what arrives at once).
func TestHostileStderrOverlongLineAfterNewlineIsHeld(t *testing.T) {
	for _, releasedFirst := range []bool{false, true} {
		sink := &syncbuf.Buffer{}
		s := newRedactedStderr(hsRedactor(), sink)
		if releasedFirst {
			s.release()
		}
		_, _ = s.Write([]byte("first\n" + strings.Repeat("w ", 50000)))
		if !releasedFirst {
			s.release() // the engine started: the backlog is drained
		}
		s.mu.Lock()
		held := len(s.buf)
		s.mu.Unlock()
		if held > maxStderrLine {
			t.Errorf("released first=%v: %d bytes of an unterminated line held (written: %d); want at most %d", releasedFirst, held, len(sink.String()), maxStderrLine)
		}
	}
}

// Writes after flush still reach the log (redacted); an unterminated one waits for another flush.
func TestHostileStderrWriteAfterFlush(t *testing.T) {
	sink := &syncbuf.Buffer{}
	s := newRedactedStderr(hsRedactor(), sink)
	s.flush()
	s.flush()
	_, _ = s.Write([]byte("late " + hsDeclared + "\n"))
	if got, want := sink.String(), "late "+redact.Token(hsDeclared)+"\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	_, _ = s.Write([]byte("tail " + hsKey))
	s.flush()
	hsNoSecret(t, sink.String(), hsKey, hsDeclared)
	s.release() // release after flush is harmless
}

// Concurrent writers of whole lines, with release and flush racing them: every line comes out whole,
// redacted, exactly once.
func TestHostileStderrConcurrentWholeLines(t *testing.T) {
	sink := &syncbuf.Buffer{}
	s := newRedactedStderr(hsRedactor(), sink)
	var wg sync.WaitGroup
	const writers, lines = 8, 200
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				_, _ = s.Write([]byte(fmt.Sprintf("w%d l%d %s %s\n", w, i, hsKey, hsDeclared)))
			}
		}()
	}
	wg.Add(2)
	go func() { defer wg.Done(); s.release() }()
	go func() { defer wg.Done(); s.release() }()
	wg.Wait()
	s.flush()
	out := sink.String()
	hsNoSecret(t, out, hsKey, hsDeclared)
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	seen := map[string]bool{}
	for _, l := range got {
		if seen[l] {
			t.Fatalf("line twice: %q", l)
		}
		seen[l] = true
	}
}

// A secret the redactor learns after stderr started (a pattern found it in a tool result) is
// redacted on stderr from then on, even bare.
func TestHostileStderrSecretLearnedLater(t *testing.T) {
	red := hsRedactor()
	sink := &syncbuf.Buffer{}
	s := newRedactedStderr(red, sink)
	s.release()
	tok := "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA"
	_, _ = s.Write([]byte("early " + tok[:10])) // held: unterminated
	if _, err := red.JSON([]byte(`{"content":"Authorization: Bearer ` + tok + `"}`)); err != nil {
		t.Fatal(err)
	}
	_, _ = s.Write([]byte(tok[10:] + "\nlater " + tok + "\n"))
	s.flush()
	hsNoSecret(t, sink.String(), tok)
}

// Stderr redaction counts nothing (Meta.Redaction.Counts comes from Redactor.Counts).
func TestHostileStderrCountsNothing(t *testing.T) {
	red := hsRedactor()
	s := newRedactedStderr(red, &syncbuf.Buffer{})
	s.release()
	for range 3 {
		_, _ = s.Write([]byte("k " + hsKey + " d " + hsDeclared + " Bearer abcdefghijklmnopqrstuvwxyz012\n"))
	}
	s.flush()
	if c := red.Counts(); len(c) != 0 {
		t.Fatalf("stderr counted: %v", c)
	}
}

// What stderr shows must not teach the session's redactor: a string a pattern found only on stderr
// would afterwards be redacted (and counted) bare in what the session stores, and a replay, which has
// no server and no stderr, would prepare the same request differently and drift.
func TestHostileStderrTeachingChangesStoredBytes(t *testing.T) {
	doc := []byte(`{"arguments":{"value":"abcdefghijklmnopqrstuvwxyz012"}}`)
	quietRed := hsRedactor()
	quiet, _ := quietRed.Tally().JSON(doc)

	red := hsRedactor()
	s := newRedactedStderr(red, &syncbuf.Buffer{})
	s.release()
	_, _ = s.Write([]byte("upstream auth: Bearer abcdefghijklmnopqrstuvwxyz012\n"))
	tally := red.Tally()
	taught, _ := tally.JSON(doc)
	tally.Commit()
	if !bytes.Equal(quiet, taught) {
		t.Errorf("stored bytes of a later request depend on what the server printed on stderr:\nwithout the line %s\nafter it         %s", quiet, taught)
	}
}

// ---- Through ServeStdio, with real child processes ----

// hsServe runs ServeStdio with a client that sends nothing and leaves at once; it returns the
// outcome and how long the run took, failing after limit.
func hsServe(t *testing.T, opts StdioOptions, limit time.Duration) (*Outcome, time.Duration) {
	t.Helper()
	done := make(chan *Outcome, 1)
	start := time.Now()
	go func() { done <- ServeStdio(context.Background(), opts, strings.NewReader(""), io.Discard) }()
	select {
	case out := <-done:
		return out, time.Since(start)
	case <-time.After(limit):
		t.Fatalf("ServeStdio did not return within %s", limit)
		return nil, 0
	}
}

func hsShell(t *testing.T) string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	return sh
}

// A server that writes its stderr (secrets, no last newline) and exits at once: every line reaches
// the log, the last one too, redacted, the declared secret included although it was printed before
// the engine learned it.
func TestHostileStderrServerExitsAtOnce(t *testing.T) {
	sh := hsShell(t)
	var stderr syncbuf.Buffer
	env := append(os.Environ(), "HS_KEY="+hsKey, "HS_DECL="+hsDeclared)
	out, _ := hsServe(t, StdioOptions{RunOptions: RunOptions{Mode: Record, Server: "s", Dir: filepath.Join(t.TempDir(), "r"), ID: "r",
		Config: replay.Config{Secrets: []string{hsDeclared}}},
		Command: []string{sh, "-c", `printf 'first %s\r\n' "$HS_DECL" >&2; printf 'last %s' "$HS_KEY" >&2; exit 0`}, Env: env,
		ServerStderr: &stderr, ShutdownTimeout: 2 * time.Second}, 20*time.Second)
	t.Logf("outcome err: %v", out.Err)
	got := stderr.String()
	hsNoSecret(t, got, hsKey, hsDeclared)
	want := "first " + redact.Token(hsDeclared) + "\r\nlast " + redact.Token(hsKey)
	if got != want {
		t.Fatalf("log %q, want %q", got, want)
	}
}

// A server that never exits (ignores stdin's EOF) is killed after the grace period, and what it
// wrote is in the log.
func TestHostileStderrServerThatNeverExits(t *testing.T) {
	sh := hsShell(t)
	var stderr syncbuf.Buffer
	out, took := hsServe(t, StdioOptions{RunOptions: RunOptions{Mode: Record, Server: "s", Dir: filepath.Join(t.TempDir(), "r"), ID: "r"},
		Command: []string{sh, "-c", `printf 'up %s\npartial' "$HS_KEY" >&2; exec sleep 1000`}, Env: append(os.Environ(), "HS_KEY="+hsKey),
		ServerStderr: &stderr, ShutdownTimeout: 1 * time.Second}, 20*time.Second)
	t.Logf("took %s, err %v", took, out.Err)
	if got, want := stderr.String(), "up "+redact.Token(hsKey)+"\npartial"; got != want {
		t.Fatalf("log %q, want %q", got, want)
	}
}

// A server whose background helper keeps the server's stderr open (stdout and stdin redirected)
// holds ServeStdio past its ShutdownTimeout until the helper exits: stderr is now always a pipe
// that cmd.Wait drains, and the Cmd has no WaitDelay. Before the change a *os.File ServerStderr
// (the CLI passes os.Stderr) went to the child as it was, and the nil default to /dev/null.
func TestHostileStderrGrandchildHoldsStderrOpen(t *testing.T) {
	sh := hsShell(t)
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, took := hsServe(t, StdioOptions{RunOptions: RunOptions{Mode: Record, Server: "s", Dir: filepath.Join(t.TempDir(), "r"), ID: "r"},
		Command:      []string{sh, "-c", `sleep 15 </dev/null >/dev/null & echo started >&2; exec cat >/dev/null`},
		ServerStderr: f, ShutdownTimeout: 1 * time.Second}, 30*time.Second)
	t.Logf("took %s, err %v", took, out.Err)
	// 15 s if it waits for the helper; the bound leaves a busy machine 6 s past the timeout to start
	// the server and commit the session.
	if took > 7*time.Second {
		t.Fatalf("ServeStdio took %s with a ShutdownTimeout of 1s: it waited for the server's helper to close stderr", took)
	}
}

// The stderr of a recording counts nothing in the session's meta, even for secrets it held alone.
func TestHostileStderrRecordingCountsUnchanged(t *testing.T) {
	sh := hsShell(t)
	dir := filepath.Join(t.TempDir(), "r")
	out, _ := hsServe(t, StdioOptions{RunOptions: RunOptions{Mode: Record, Server: "s", Dir: dir, ID: "r",
		Config: replay.Config{Secrets: []string{hsDeclared}}},
		Command: []string{sh, "-c", `i=0; while [ $i -lt 50 ]; do printf 'k %s d %s\n' "$HS_KEY" "$HS_DECL" >&2; i=$((i+1)); done; exec cat >/dev/null`},
		Env:     append(os.Environ(), "HS_KEY="+hsKey, "HS_DECL="+hsDeclared), ShutdownTimeout: 2 * time.Second}, 20*time.Second)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Meta.Redaction.Counts) != 0 {
		for _, n := range s.Meta.Redaction.Counts {
			if n != 0 {
				t.Fatalf("stderr was counted: %v", s.Meta.Redaction.Counts)
			}
		}
	}
}

// A bearer token the server printed on stderr only (at start) is learned, so the agent's later call
// carrying it bare is recorded redacted; the replay, which has no server and no stderr, prepares the
// same call with the token bare and misses the recording.
func TestHostileStderrTaughtSecretBreaksReplay(t *testing.T) {
	bin, log := serverOnPath(t)
	sh := hsShell(t)
	tok := "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA"
	dir := filepath.Join(t.TempDir(), "rec")
	c := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Record, Server: "weather", Dir: dir, ID: "rec"},
		Command: []string{sh, "-c", `echo "upstream auth: Bearer $HS_TOK" >&2; exec weather-mcp`},
		Env:     append(mcptest.ChildEnv(log), "HS_TOK="+tok)})
	time.Sleep(500 * time.Millisecond) // the stderr line is read and released
	ctx := context.Background()
	if _, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "secret_lookup", Arguments: map[string]any{"key": tok}}); err != nil {
		t.Fatal(err)
	}
	if out := c.finish(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	rec, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ev := findCall(t, rec, "secret_lookup")
	t.Logf("recorded args: %s", ev.Args)
	removeFromPath(t, bin)
	r := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Replay, Server: "weather", Session: rec}})
	_, callErr := r.CallTool(ctx, &sdk.CallToolParams{Name: "secret_lookup", Arguments: map[string]any{"key": tok}})
	out := r.finish(t)
	if callErr != nil || out.Err != nil {
		t.Fatalf("the replay of the same call fails: call %v, run %v", callErr, out.Err)
	}
}

// A fork's tail server's stderr is redacted too, its last unterminated line included.
func TestHostileStderrForkTailServer(t *testing.T) {
	_, log := serverOnPath(t)
	dir := filepath.Join(t.TempDir(), "parent")
	c := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Record, Server: "weather", Dir: dir, ID: "parent",
		Config: replay.Config{Secrets: []string{mcptest.Secret}}},
		Command: []string{"weather-mcp"}, Env: mcptest.ChildEnv(log)})
	mcptest.Add(t, c.ClientSession, 2, 3)
	if out := c.finish(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	parent, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncbuf.Buffer
	f := connect(t, StdioOptions{RunOptions: RunOptions{Mode: Fork, Server: "weather", Session: parent, Dir: filepath.Join(t.TempDir(), "child"), ID: "child",
		AtStep: findCall(t, parent, `"a":2`).Step, Config: replay.Config{Secrets: []string{mcptest.Secret}}},
		Command: []string{"weather-mcp"}, Env: mcptest.ChildEnv(log), ServerStderr: &stderr})
	if got := mcptest.Add(t, f.ClientSession, 7, 8); got != "15" {
		t.Fatalf("tail add = %q", got)
	}
	if _, err := f.CallTool(context.Background(), &sdk.CallToolParams{Name: "secret_lookup", Arguments: map[string]any{"key": "db"}}); err != nil {
		t.Fatal(err)
	}
	if out := f.finish(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	got := stderr.String()
	t.Logf("tail stderr: %q", got)
	hsNoSecret(t, got, mcptest.Secret, mcptest.Secret[3:], mcptest.Secret[7:])
	if !strings.Contains(got, "mcptest: bye "+redact.Token(mcptest.Secret)) {
		t.Fatalf("the tail server's last line is missing: %q", got)
	}
}

type hsFailingSink struct{}

func (hsFailingSink) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

type hsBlockingSink struct{ gate chan struct{} }

func (b hsBlockingSink) Write(p []byte) (int, error) { <-b.gate; return len(p), nil }

// Write never fails, even when the log does; but a log that blocks blocks Write (and so the child's
// stderr), as the *os.File passed straight to the child did before the change.
func TestHostileStderrWriteNeverFailsButBlocksOnABlockedLog(t *testing.T) {
	s := newRedactedStderr(hsRedactor(), hsFailingSink{})
	s.release()
	if n, err := s.Write([]byte("x\n")); n != 2 || err != nil {
		t.Fatalf("Write to a failing log = %d, %v", n, err)
	}
	s.flush()

	gate := make(chan struct{})
	b := newRedactedStderr(hsRedactor(), hsBlockingSink{gate})
	if n, err := b.Write([]byte("held\n")); n != 5 || err != nil { // before release: never touches the log
		t.Fatalf("Write before release = %d, %v", n, err)
	}
	done := make(chan struct{})
	go func() { b.release(); _, _ = b.Write([]byte("y\n")); close(done) }()
	select {
	case <-done:
		t.Logf("a blocked log did not block Write")
	case <-time.After(200 * time.Millisecond):
		t.Logf("OBSERVATION: a blocked log blocks release and Write (the server's stderr pipe fills, then the server blocks)")
	}
	close(gate)
	<-done
}
