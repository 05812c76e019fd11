package replay

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestAToolResultThatCannotBeRecordedIsRecordedAsAnError: a tool that ran and answered with text
// that is not valid UTF-8 (an MCP server's answer, say) keeps its step in the recording, as an
// error, and a replay answers that step with the same error without running the tool.
func TestAToolResultThatCannotBeRecordedIsRecordedAsAnError(t *testing.T) {
	ran := 0
	tools := map[string]Tool{"search": func(context.Context, json.RawMessage) (any, error) {
		ran++
		return json.RawMessage("{\"hit\":\"bad \xff byte\"}"), nil
	}}
	var recorded, replayed error
	harness := func(into *error) Harness {
		return func(ctx context.Context, ac AgentContext) error {
			_, *into = ac.Tool(ctx, "search", map[string]string{"q": "x"})
			_, err := ac.Tool(ctx, "other", map[string]string{}) // the run goes on after the error
			var unknown *session.SerializedError
			if err == nil || errors.As(err, &unknown) && unknown.Name == "UnrecordableAnswer" {
				t.Fatalf("the next call: %v", err)
			}
			return nil
		}
	}
	dir := filepath.Join(t.TempDir(), "run")
	rec, err := Record(context.Background(), RecordOptions{Dir: dir, Tools: tools}, harness(&recorded))
	if err != nil {
		t.Fatal(err)
	}
	var se *session.SerializedError
	if !errors.As(recorded, &se) || se.Name != "UnrecordableAnswer" {
		t.Fatalf("the harness got %v, want an UnrecordableAnswer error", recorded)
	}
	ev := rec.Events[1]
	if ev.Kind != session.KindToolCall || ev.Name != "search" || ev.Error == nil || ev.Error.Name != "UnrecordableAnswer" || ev.Result != nil {
		t.Fatalf("step 1 is recorded as %+v, want the search call with its error and no result", ev)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ran = 0
	res, err := Replay(context.Background(), ReplayOptions{Session: s, Tools: tools}, harness(&replayed))
	if err != nil {
		t.Fatal(err)
	}
	if ran != 0 || res.LiveCalls != 0 || len(res.Drifts) != 0 {
		t.Fatalf("the replay ran the tool %d times, went live %d times, drifted %v", ran, res.LiveCalls, res.Drifts)
	}
	if replayed == nil || replayed.Error() != recorded.Error() {
		t.Fatalf("the replay answered %v, the recording %v", replayed, recorded)
	}
}
