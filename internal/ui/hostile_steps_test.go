package ui

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestServerRefusesStepsABrowserCannotNumberExactly: a valid recording whose steps jump past 2^53
// (the log allows gaps) would be shown with neighbouring steps merged, since a page's numbers are
// doubles: the server says so, naming the step, instead of serving it.
func TestServerRefusesStepsABrowserCannotNumberExactly(t *testing.T) {
	root := t.TempDir()
	meta := session.Meta{ID: "far", CreatedAt: 1, RecorderVersion: "test", SchemaVersion: session.CurrentSchemaVersion, FingerprintMode: string(fingerprint.Strict)}
	w, err := session.Create(filepath.Join(root, "far"), meta, session.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const far = int64(1)<<53 + 1
	start, ok := meta, true
	for _, ev := range []session.Event{
		{Step: 0, Lane: "0", Kind: session.KindSessionStart, Meta: &start},
		{Step: far - 1, Lane: "0", Kind: session.KindNote, Text: "one"},
		{Step: far, Lane: "0", Seq: 1, Kind: session.KindNote, Text: "two"},
		{Step: far + 1, Lane: "0", Kind: session.KindSessionEnd, OK: &ok},
	} {
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, filepath.Join(root, "far"))
	ts := serve(t, root, Options{})
	for _, p := range []string{"/api/sessions/far", "/api/sessions/far/events", "/api/sessions/far/steps/9007199254740993"} {
		code, body, _ := get(t, ts, p)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "9007199254740992") {
			t.Errorf("GET %s: %d %.200s; want 422 naming step 9007199254740992", p, code, body)
		}
	}
}
