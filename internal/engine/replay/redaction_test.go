package replay

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/bundle"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// canary is a secret shaped like an Anthropic key. It must never reach storage in the clear.
const canary = "sk-ant-api03-CANARYcanaryCANARYcanary0123456789abcdefXYZ"

// leakyAgent asks a model that answers with a secret and sends that secret on to a tool.
func leakyAgent(seen *string) Harness {
	return func(ctx context.Context, ac AgentContext) error {
		resp, err := ac.Model(ctx, session.Request{Model: "m", Messages: []session.Message{userMessage("give me the key")}})
		if err != nil {
			return err
		}
		*seen = textOf(resp)
		_, err = ac.Tool(ctx, "configure", map[string]string{"apiKey": *seen})
		return err
	}
}

func TestSecretsAreRedactedInStorageAndRestoredOnLocalReplay(t *testing.T) {
	keys := redact.FileKeyProvider{Path: filepath.Join(t.TempDir(), "keys", "vault.key")}
	model := &fakeModel{answer: func(session.Request) string { return "your key is " + canary }}
	tools := map[string]Tool{"configure": func(context.Context, json.RawMessage) (any, error) { return "ok", nil }}
	dir := filepath.Join(t.TempDir(), "leaky")
	var seen string
	rec, err := Record(context.Background(), RecordOptions{Config: Config{Keys: keys}, Dir: dir, Model: model, Tools: tools}, leakyAgent(&seen))
	if err != nil || rec.HarnessErr != nil {
		t.Fatal(err, rec.HarnessErr)
	}
	if !strings.Contains(seen, canary) {
		t.Fatal("the live response handed to the agent was redacted; only storage should be")
	}
	if rec.Meta.Redaction.Counts["anthropic-api-key"] != 2 {
		t.Fatalf("redaction counts %v, want the key counted in the response and the tool args", rec.Meta.Redaction.Counts)
	}
	assertNoCanary(t, dir)
	if _, err := os.Stat(filepath.Join(dir, session.VaultFile)); err != nil {
		t.Fatalf("no vault written: %v", err)
	}

	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	token := redact.Token(canary)
	if !strings.Contains(string(s.Events[1].Response.Content), token) {
		t.Fatalf("stored response does not carry the token %s", token)
	}
	// With the key, a local replay hands the agent the real secret — and its tool call, which carries
	// the secret again, still matches the recording because matching is over the redacted form.
	seen = ""
	if _, err := Replay(context.Background(), ReplayOptions{Config: Config{Keys: keys}, Session: s, Model: failingModel{t}, Tools: failingTools(t, "configure")}, leakyAgent(&seen)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(seen, canary) {
		t.Fatalf("local replay did not restore the secret: %q", seen)
	}
	// Without the key (a shared copy), the agent sees the token and the replay still matches.
	seen = ""
	if _, err := Replay(context.Background(), ReplayOptions{Session: s, Model: failingModel{t}, Tools: failingTools(t, "configure")}, leakyAgent(&seen)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(seen, canary) || !strings.Contains(seen, token) {
		t.Fatalf("replay without the vault key saw %q", seen)
	}
}

// assertNoCanary fails if the canary appears in any stored file of a session directory.
func assertNoCanary(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(canary)) || bytes.Contains(data, []byte("CANARYcanary")) {
			t.Errorf("%s holds the secret in the clear", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPackedBundleHoldsOnlyTokensAndStillReplays: the shared bundle carries no vault and no secret, and
// once unpacked elsewhere it replays with every fingerprint matching.
func TestPackedBundleHoldsOnlyTokensAndStillReplays(t *testing.T) {
	keys := redact.FileKeyProvider{Path: filepath.Join(t.TempDir(), "vault.key")}
	model := &fakeModel{answer: func(session.Request) string { return "your key is " + canary }}
	tools := map[string]Tool{"configure": func(context.Context, json.RawMessage) (any, error) { return "ok", nil }}
	dir := filepath.Join(t.TempDir(), "leaky")
	var seen string
	if _, err := Record(context.Background(), RecordOptions{Config: Config{Keys: keys}, Dir: dir, Model: model, Tools: tools}, leakyAgent(&seen)); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	summary, err := bundle.Pack(context.Background(), dir, &archive)
	if err != nil {
		t.Fatal(err)
	}
	if summary.RedactionTokens[redact.Token(canary)] == 0 {
		t.Fatalf("the pack summary does not show the redaction token: %v", summary.RedactionTokens)
	}
	zr, err := gzip.NewReader(bytes.NewReader(archive.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if h.Name == session.VaultFile || bytes.Contains(body, []byte(canary)) {
			t.Fatalf("the bundle leaks: entry %s", h.Name)
		}
	}
	dest := filepath.Join(t.TempDir(), "elsewhere")
	if _, err := bundle.Unpack(context.Background(), bytes.NewReader(archive.Bytes()), dest, bundle.Limits{}); err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(dest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Replay(context.Background(), ReplayOptions{Config: Config{Keys: keys}, Session: s, Model: failingModel{t}, Tools: failingTools(t, "configure")}, leakyAgent(&seen)); err != nil {
		t.Fatalf("the unpacked bundle does not replay: %v", err)
	}
	if strings.Contains(seen, canary) {
		t.Fatal("a bundle without its vault restored the secret")
	}
}

func TestASecretReadFromTheEnvironmentNeverReachesStorage(t *testing.T) {
	const password = "hunter2-but-longer"
	cfg := liveEntropy()
	cfg.Getenv = func(k string) string {
		return map[string]string{"DB_PASSWORD": password, "LOG_LEVEL": "info-verbose"}[k]
	}
	tools := map[string]Tool{"connect": func(context.Context, json.RawMessage) (any, error) { return "connected", nil }}
	dir := filepath.Join(t.TempDir(), "env")
	rec, err := Record(context.Background(), RecordOptions{Config: cfg, Dir: dir, Tools: tools}, func(ctx context.Context, ac AgentContext) error {
		_, err := ac.Tool(ctx, "connect", map[string]string{"password": ac.Env(ctx, "DB_PASSWORD"), "level": ac.Env(ctx, "LOG_LEVEL")})
		return err
	})
	if err != nil || rec.HarnessErr != nil {
		t.Fatal(err, rec.HarnessErr)
	}
	data, _ := os.ReadFile(filepath.Join(dir, session.EventsFile))
	if bytes.Contains(data, []byte(password)) || !bytes.Contains(data, []byte("info-verbose")) {
		t.Fatalf("events.jsonl: %s", data)
	}
	if rec.Meta.Redaction.Counts["env-secret"] != 1 {
		t.Fatalf("counts %v", rec.Meta.Redaction.Counts)
	}
}
