package ui

import (
	"os"
	"path/filepath"
	"testing"
)

// Attacks on the server by a careless or hostile user, each found failing before its fix.

// TestServerReloadsASessionReRecordedUnderItsID: a session directory replaced by another recording
// under the same id while the page is open is shown as it is now, summary and timeline alike, not
// from the cache of the recording it replaced.
func TestServerReloadsASessionReRecordedUnderItsID(t *testing.T) {
	root := t.TempDir()
	recordTriage(t, root)
	ts := serve(t, root, Options{})
	before := getJSON[Summary](t, ts, "/api/sessions/triage")
	if before.Events != 11 || before.ToolCalls != 2 {
		t.Fatalf("the triage recording: %+v", before)
	}
	dir := filepath.Join(root, "triage")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	writeLargeSession(t, dir, "triage", 50)
	after := getJSON[Summary](t, ts, "/api/sessions/triage")
	if after.Events != 50 {
		t.Errorf("after re-recording, the summary counts %d events, want the new recording's 50", after.Events)
	}
	if page := getJSON[Page](t, ts, "/api/sessions/triage/events?limit=5"); page.Total != 50 {
		t.Errorf("after re-recording, the timeline has %d events, want 50", page.Total)
	}
	list := getJSON[[]Listing](t, ts, "/api/sessions")
	if len(list) != 1 || list[0].Events != 50 {
		t.Errorf("list after re-recording: %+v", list)
	}
}
