package inspect

import (
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestWhatMarksATruncatedStream: a model call whose stream the upstream cut off says so first, so a
// column that shortens it still shows the mark; any other error, or none, shows the model alone.
func TestWhatMarksATruncatedStream(t *testing.T) {
	req := &session.Request{Model: "claude-test"}
	for _, tc := range []struct {
		name string
		ev   session.Event
		want string
	}{
		{"whole", session.Event{Kind: session.KindModelCall, Request: req}, "claude-test"},
		{"truncated", session.Event{Kind: session.KindModelCall, Request: req,
			Error: &session.SerializedError{Name: session.ErrorNameStreamTruncated, Message: "cut off"}}, "[stream truncated] claude-test"},
		{"other error", session.Event{Kind: session.KindModelCall, Request: req,
			Error: &session.SerializedError{Name: "UpstreamHTTPError", Message: "{}"}}, "claude-test"},
		{"a tool error of that name is no stream", session.Event{Kind: session.KindToolCall, Name: "t",
			Error: &session.SerializedError{Name: session.ErrorNameStreamTruncated}}, "t"},
	} {
		if got := What(&tc.ev); got != tc.want {
			t.Errorf("%s: What = %q, want %q", tc.name, got, tc.want)
		}
	}
}
