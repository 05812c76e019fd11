package rewindtest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/pkg/rewind"
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

func (model) Create(_ context.Context, req rewind.Request) (*rewind.Response, error) {
	return &rewind.Response{Content: json.RawMessage(`"ok"`)}, nil
}

func agent(prompt string) rewind.Harness {
	return func(ctx context.Context, ac rewind.AgentContext) error {
		_, err := ac.Model(ctx, rewind.Request{Model: "m", System: prompt, Messages: []rewind.Message{{Role: "user", Content: json.RawMessage(`"hi"`)}}}, rewind.Site("greet"))
		return err
	}
}

func TestFromSessionPassesAnUnchangedAgentAndExplainsADrift(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "golden")
	if _, err := rewind.Record(context.Background(), rewind.RecordOptions{Dir: dir, Model: model{}}, agent("be kind")); err != nil {
		t.Fatal(err)
	}
	rt := &recordingT{TB: t}
	if res := FromSession(rt, dir, agent("be kind"), rewind.Config{}); rt.failed || res == nil || len(res.Events) != 4 { // start, the model call, the recorder's END, end
		t.Fatalf("unchanged agent failed: %s", rt.msg)
	}
	rt = &recordingT{TB: t}
	FromSession(rt, dir, agent("be blunt"), rewind.Config{})
	for _, want := range []string{"no longer behaves as recorded", "drift at step 1", `system: "be kind" → "be blunt"`, "record the session again"} {
		if !rt.failed || !strings.Contains(rt.msg, want) {
			t.Errorf("failure message lacks %q:\n%s", want, rt.msg)
		}
	}
	rt = &recordingT{TB: t}
	FromSession(rt, filepath.Join(t.TempDir(), "missing"), agent("be kind"), rewind.Config{})
	if !rt.failed || !strings.Contains(rt.msg, "cannot be used") {
		t.Fatalf("missing recording: %q", rt.msg)
	}
}
