package ui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// hostileID is a session directory name a file system allows and a page must never take as markup.
const hostileID = `<img src=x onerror="window.__xss=3">"'><svg onload=window.__xss=4>`

// TestBrowserShowsHostileSessionIDsAndLinksAsText: a session named with markup is listed, opened and
// shown by its name as text, and a hand-edited link the page cannot decode says so instead of
// leaving the page as it was.
func TestBrowserShowsHostileSessionIDsAndLinksAsText(t *testing.T) {
	ctx := browser(t)
	root := t.TempDir()
	recordTriage(t, root)
	if err := os.Rename(filepath.Join(root, "triage"), filepath.Join(root, hostileID)); err != nil {
		t.Fatal(err)
	}
	ts := serve(t, root, Options{})
	run(t, ctx, "opening the list", chromedp.Navigate(ts.URL+"/"), visible("#sessions .session-link"))
	if got := textOf(t, ctx, "#sessions .session-link"); got != hostileID {
		t.Errorf("the list names the session %q, want %q", got, hostileID)
	}
	run(t, ctx, "opening the session", click("#sessions .session-link"), visible(`#timeline-rows .row[data-step="6"]`))
	if got := textOf(t, ctx, "#crumb-session"); got != hostileID {
		t.Errorf("the session header names it %q, want %q", got, hostileID)
	}
	run(t, ctx, "waiting for an injected handler", chromedp.Sleep(300*time.Millisecond))
	if ran, injected := eval[bool](t, ctx, `window.__xss !== undefined`), count(t, ctx, "#main img, #main svg, #crumbs img, #crumbs svg, [onerror], [onload]"); ran || injected != 0 {
		t.Fatalf("the session name became page markup: window.__xss set %v, %d injected elements", ran, injected)
	}
	run(t, ctx, "following a link with a broken escape", goTo("#/s/%E0%A4%A"), visible("#error"))
	if msg := textOf(t, ctx, "#error"); !strings.Contains(msg, "%E0%A4%A") {
		t.Errorf("a link the page cannot decode shows %q; want an error quoting it", msg)
	}
}
