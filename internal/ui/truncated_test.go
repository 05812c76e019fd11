package ui

import (
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestATruncatedStreamIsMarkedOnItsRow: the timeline row of a model call whose stream the upstream cut
// off is marked (the page draws a ✂ from it) and its What says so; a whole call's row is not.
func TestATruncatedStreamIsMarkedOnItsRow(t *testing.T) {
	req := &session.Request{Model: "claude-test"}
	s := &session.Session{Events: []session.Event{
		{Step: 0, Lane: "0", Kind: session.KindModelCall, Request: req},
		{Step: 1, Lane: "0", Kind: session.KindModelCall, Request: req,
			Error: &session.SerializedError{Name: session.ErrorNameStreamTruncated, Message: "the anthropic stream was cut off after 5 events"}},
	}}
	rows := rowsOf(s, s.Events)
	if rows[0].Truncated || rows[0].What != "claude-test" {
		t.Errorf("whole call: %+v", rows[0])
	}
	if !rows[1].Truncated || !strings.Contains(rows[1].What, "stream truncated") || !strings.HasPrefix(rows[1].Error, session.ErrorNameStreamTruncated) {
		t.Errorf("truncated call: %+v", rows[1])
	}
}
