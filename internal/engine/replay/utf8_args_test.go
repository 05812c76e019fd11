package replay

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// badArgs are tool arguments given as Go values with a string that is not UTF-8, in every place a
// value holds one. json.Marshal turned each bad byte into U+FFFD, so "x\xfe" and "x\xff" were the
// same call and a replay served one the other's answer.
func badArgs(b string) map[string]any {
	type query struct {
		Q string `json:"q"`
	}
	return map[string]any{
		"string":    b,
		"map value": map[string]string{"q": b},
		"map key":   map[string]int{b: 1},
		"struct":    query{Q: b},
		"pointer":   &query{Q: b},
		"list":      []any{"ok", b},
	}
}

// TestToolArgumentsWithInvalidUTF8AreRefusedNotRepaired: such arguments are refused with the place
// of the bad string, when recording and when replaying, and a replay of "x\xfe" is never served the
// recording of "x\uFFFD" (what "x\xff" was recorded as before). A result or a ledger record given
// as a Go value, and a note's text, are refused the same way.
func TestToolArgumentsWithInvalidUTF8AreRefusedNotRepaired(t *testing.T) {
	ran := 0
	tools := map[string]Tool{"search": func(context.Context, json.RawMessage) (any, error) { ran++; return "hit", nil }}
	refused := func(t *testing.T, err error, what string) {
		t.Helper()
		var se *SerializationError
		var ie *jsonscan.InvalidUTF8Error
		if !errors.As(err, &se) || se.What != what || !errors.As(err, &ie) {
			t.Errorf("got %v, want a SerializationError of the %s for invalid UTF-8", err, what)
		}
	}
	// The recording holds one call whose argument is U+FFFD itself: valid text.
	dir := filepath.Join(t.TempDir(), "run")
	_, err := Record(context.Background(), RecordOptions{Dir: dir, Tools: tools}, func(ctx context.Context, ac AgentContext) error {
		for name, args := range badArgs("x\xff") {
			if _, err := ac.Tool(ctx, "search", args); err == nil {
				t.Errorf("recording %s args with invalid UTF-8 succeeded", name)
			} else {
				refused(t, err, "args")
			}
		}
		_, err := ac.Tool(ctx, "search", "x\uFFFD")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if ran != 1 {
		t.Fatalf("the tool ran %d times, want once (the valid call)", ran)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ran = 0
	_, err = Replay(context.Background(), ReplayOptions{Session: s, Tools: tools}, func(ctx context.Context, ac AgentContext) error {
		for name, args := range badArgs("x\xfe") {
			if out, err := ac.Tool(ctx, "search", args); err == nil {
				t.Errorf("replaying %s args with invalid UTF-8 was served %s", name, out)
			} else {
				refused(t, err, "args")
			}
		}
		_, err := ac.Tool(ctx, "search", "x\uFFFD")
		return err
	})
	if err != nil || ran != 0 {
		t.Fatalf("the replay of the valid call: %v, the tool ran %d times", err, ran)
	}

	// A result, a ledger record and a note.
	tools["bad"] = func(context.Context, json.RawMessage) (any, error) { return map[string]string{"out": "\xfe"}, nil }
	_, err = Record(context.Background(), RecordOptions{Dir: filepath.Join(t.TempDir(), "results"), Tools: tools}, func(ctx context.Context, ac AgentContext) error {
		_, err := ac.Tool(ctx, "bad", map[string]string{})
		refused(t, err, "result")
		refused(t, ac.Ledger(ctx, map[string]string{"claim": "\xfe"}), "record")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Record(context.Background(), RecordOptions{Dir: filepath.Join(t.TempDir(), "note"), Tools: tools}, func(ctx context.Context, ac AgentContext) error {
		ac.Note(ctx, "half a rune: \xe2\x82")
		return nil
	})
	var ie *jsonscan.InvalidUTF8Error
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), ".text") {
		t.Fatalf("recording a note with invalid UTF-8: %v, want it refused naming .text", err)
	}
}
