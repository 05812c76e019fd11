package replaytest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// recordingT captures a fatal failure instead of ending the test, so a test can assert on it.
type recordingT struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recordingT) Helper() {}
func (r *recordingT) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
}

type model struct{}

func (model) Create(_ context.Context, req session.Request) (*session.Response, error) {
	return &session.Response{Content: json.RawMessage(`"ok"`)}, nil
}

func agent(prompt string) replay.Harness {
	return func(ctx context.Context, ac replay.AgentContext) error {
		_, err := ac.Model(ctx, session.Request{Model: "m", System: prompt, Messages: []session.Message{{Role: "user", Content: json.RawMessage(`"hi"`)}}}, replay.Site("greet"))
		return err
	}
}

func TestFromSessionPassesAnUnchangedAgentAndExplainsADrift(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "golden")
	if _, err := replay.Record(context.Background(), replay.RecordOptions{Dir: dir, Model: model{}}, agent("be kind")); err != nil {
		t.Fatal(err)
	}
	rt := &recordingT{TB: t}
	if res := FromSession(rt, dir, agent("be kind"), replay.Config{}); rt.failed || res == nil || len(res.Events) != 3 {
		t.Fatalf("unchanged agent failed: %s", rt.msg)
	}
	rt = &recordingT{TB: t}
	FromSession(rt, dir, agent("be blunt"), replay.Config{})
	for _, want := range []string{"no longer behaves as recorded", "drift at step 1", `system: "be kind" → "be blunt"`, "record the session again"} {
		if !rt.failed || !strings.Contains(rt.msg, want) {
			t.Errorf("failure message lacks %q:\n%s", want, rt.msg)
		}
	}
	rt = &recordingT{TB: t}
	FromSession(rt, filepath.Join(t.TempDir(), "missing"), agent("be kind"), replay.Config{})
	if !rt.failed || !strings.Contains(rt.msg, "cannot be used") {
		t.Fatalf("missing recording: %q", rt.msg)
	}
}
