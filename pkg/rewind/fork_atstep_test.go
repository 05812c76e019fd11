package rewind_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentrewind/agentrewind/pkg/rewind"
)

// TestForkRefusesAStepPastTheEndOfTheSession: a fork of a 5-step session (start, two tool calls, the
// recorder's END, end) at step 5, or far past it, is refused with an *AtStepError naming the session and its step
// count, and writes no child; at its last step it runs. It used to succeed silently and make a child
// whose forkedAtStep pointed past the end.
func TestForkRefusesAStepPastTheEndOfTheSession(t *testing.T) {
	ctx := context.Background()
	tools := map[string]rewind.Tool{"search": func(context.Context, json.RawMessage) (any, error) { return "hit", nil }}
	harness := func(ctx context.Context, ac rewind.AgentContext) error {
		for _, q := range []string{"a", "b"} {
			if _, err := ac.Tool(ctx, "search", map[string]string{"q": q}); err != nil {
				return err
			}
		}
		return nil
	}
	parentDir := filepath.Join(t.TempDir(), "parent")
	if _, err := rewind.Record(ctx, rewind.RecordOptions{Dir: parentDir, ID: "parent", Tools: tools}, harness); err != nil {
		t.Fatal(err)
	}
	parent, err := rewind.Open(parentDir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(parent.Events); n != 5 { // with the recorder's END before session_end
		t.Fatalf("the parent has %d events, want 5", n)
	}
	for _, at := range []int64{5, 6, 500} {
		dir := filepath.Join(t.TempDir(), "child")
		_, err := rewind.Fork(ctx, rewind.ForkOptions{Parent: parent, Dir: dir, AtStep: at, OnMiss: rewind.OnMissStub}, harness)
		var ae *rewind.AtStepError
		if !errors.As(err, &ae) || ae.AtStep != at || ae.Steps != 5 || ae.Session != "parent" {
			t.Errorf("fork at step %d: %v, want an *AtStepError for session parent with 5 steps", at, err)
			continue
		}
		if want := "fork: atStep: step " + strconv.FormatInt(at, 10) + " is past the end of session parent, which has 5 steps (0 to 4)"; err.Error() != want {
			t.Errorf("fork at step %d says %q, want %q", at, err, want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("fork at step %d wrote %s: %v", at, dir, err)
		}
	}
	if _, err := rewind.Fork(ctx, rewind.ForkOptions{Parent: parent, Dir: filepath.Join(t.TempDir(), "child"), AtStep: 4}, harness); err != nil {
		t.Errorf("fork at the last step: %v", err)
	}
}
