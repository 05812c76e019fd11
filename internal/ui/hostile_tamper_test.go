package ui

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestServerReportsALogTamperedWhileServed: a session's events.jsonl edited after the server loaded
// it (same length, meta.json untouched) is reported as tampered with on the next request, in the list too,, not
// served on from the copy verified before the edit.
func TestServerReportsALogTamperedWhileServed(t *testing.T) {
	root := triageRoot(t)
	ts := serve(t, root, Options{})
	getJSON[Summary](t, ts, "/api/sessions/triage")
	getJSON[Page](t, ts, "/api/sessions/triage/events")
	if list := getJSON[[]Listing](t, ts, "/api/sessions"); len(list) != 2 || list[0].Verdict == "" {
		t.Fatalf("the list before the edit: %+v", list)
	}
	path := filepath.Join(root, "triage", session.EventsFile)
	log, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(log, []byte("search_issues"), []byte("search_issuez"), 1)
	if bytes.Equal(edited, log) {
		t.Fatal("the log names no search_issues tool to edit")
	}
	fi, _ := os.Stat(path)
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	// The edit keeps the length and the modification time: only the bytes tell.
	if err := os.Chtimes(path, time.Time{}, fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/sessions/triage", "/api/sessions/triage/events", "/api/sessions/triage/steps/5", "/api/sessions/triage/plan"} {
		code, body, _ := get(t, ts, p)
		if code == http.StatusOK || !strings.Contains(body, "tampered with") {
			t.Errorf("GET %s after the log was edited: %d %.200s; want an error saying it was tampered with", p, code, body)
		}
	}
	list := getJSON[[]Listing](t, ts, "/api/sessions")
	for _, l := range list {
		if l.ID == "triage" && (l.Problem == "" || l.Verdict != "") {
			t.Errorf("the list shows the edited session as %+v; want its problem and no verdict", l)
		}
	}
}
