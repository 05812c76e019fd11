package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// triageRoot records the triage run and its prompt-fix fork into a directory of sessions.
func triageRoot(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	forkTriage(t, root, recordTriage(t, root))
	return root
}

func serve(t testing.TB, root string, opts Options) *httptest.Server {
	t.Helper()
	src, err := NewDirSource(root, "")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(NewServer(src, opts))
	t.Cleanup(ts.Close)
	return ts
}

// get sends a GET with the path as written, escapes and dots included (no client-side cleaning).
func get(t testing.TB, ts *httptest.Server, rawPath string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = rawPath
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body), res.Header
}

func getJSON[T any](t testing.TB, ts *httptest.Server, path string) T {
	t.Helper()
	code, body, _ := get(t, ts, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return v
}

func TestServerAnswersOnlyGetAndHead(t *testing.T) {
	ts := serve(t, triageRoot(t), Options{})
	for _, path := range []string{"/", "/api/sessions", "/api/sessions/triage", "/assets/app.js"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions, "PROPFIND"} {
			req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader("{}"))
			res, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q; want 405 with Allow: GET, HEAD", method, path, res.StatusCode, res.Header.Get("Allow"))
			}
		}
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			req, _ := http.NewRequest(method, ts.URL+path, nil)
			res, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("%s %s: %d, want 200", method, path, res.StatusCode)
			}
		}
	}
}

func TestServerSendsAStrictContentSecurityPolicy(t *testing.T) {
	ts := serve(t, triageRoot(t), Options{})
	for _, path := range []string{"/", "/assets/app.js", "/assets/app.css", "/api/sessions", "/api/sessions/nope", "/nowhere"} {
		_, _, h := get(t, ts, path)
		csp := h.Get("Content-Security-Policy")
		if csp != ContentSecurityPolicy {
			t.Errorf("GET %s: Content-Security-Policy %q, want %q", path, csp, ContentSecurityPolicy)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: nosniff %q, frame options %q", path, h.Get("X-Content-Type-Options"), h.Get("X-Frame-Options"))
		}
	}
	directives := map[string]string{}
	for _, d := range strings.Split(ContentSecurityPolicy, ";") {
		f := strings.Fields(d)
		directives[f[0]] = strings.Join(f[1:], " ")
	}
	want := map[string]string{"default-src": "'none'", "script-src": "'self'", "style-src": "'self'", "img-src": "'self'", "connect-src": "'self'",
		"base-uri": "'none'", "form-action": "'none'", "frame-ancestors": "'none'"}
	if diff := cmp.Diff(want, directives); diff != "" {
		t.Errorf("CSP directives (-want +got):\n%s", diff)
	}
	// The page itself keeps to the policy: no inline script, handler attribute or style attribute,
	// nothing from another origin.
	_, page, _ := get(t, ts, "/")
	for _, bad := range []*regexp.Regexp{regexp.MustCompile(`<script(?:\s+[^>]*)?>\s*[^<\s]`), regexp.MustCompile(`\son[a-z]+=`),
		regexp.MustCompile(`\sstyle=`), regexp.MustCompile(`(?:src|href)="(?:https?:)?//`)} {
		if bad.MatchString(page) {
			t.Errorf("index.html matches %s: it would break or weaken the policy", bad)
		}
	}
}

func TestServerPathsNeverLeaveTheSessionRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "sessions")
	outside := filepath.Join(base, "outside")
	recordTriage(t, root)
	recordTriage(t, outside) // a valid session the server must never show: outside/triage
	if err := os.Symlink(filepath.Join(outside, "triage"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "secret.txt"), []byte("not for the browser"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := serve(t, root, Options{})
	for _, path := range []string{
		"/api/sessions/..", "/api/sessions/%2E%2E", "/api/sessions/..%2Foutside%2Ftriage", "/api/sessions/..%2foutside%2ftriage/events",
		"/api/sessions/%2e%2e%2f%2e%2e%2fetc/events", "/api/sessions/..%5Coutside", "/api/sessions/link", "/api/sessions/link/events",
		"/api/sessions/..%2Foutside%2Ftriage/steps/4", "/api/sessions/%2Fetc%2Fpasswd", "/api/sessions/triage%00", "/api/sessions/../../outside/triage",
		"/assets/..%2F..%2Fsecret.txt", "/assets/../../secret.txt", "/api/sessions/..%2Fsecret.txt/checkpoints",
	} {
		code, body, _ := get(t, ts, path)
		if code == http.StatusOK || strings.Contains(body, "not for the browser") {
			t.Errorf("GET %s: %d %.120s: a path outside the session root was served", path, code, body)
		}
	}
	// The list shows the one session under the root; the symlink out of it is not a session of it.
	list := getJSON[[]Listing](t, ts, "/api/sessions")
	if len(list) != 1 || list[0].ID != "triage" {
		t.Fatalf("listed %+v, want only triage", list)
	}
}

func TestServerRefusesForeignHostsWhenLoopbackOnly(t *testing.T) {
	ts := serve(t, triageRoot(t), Options{LoopbackOnly: true})
	for host, want := range map[string]int{"evil.example": http.StatusMisdirectedRequest, "evil.example:80": http.StatusMisdirectedRequest,
		"127.0.0.1.nip.io": http.StatusMisdirectedRequest, "localhost:8790": http.StatusOK, "127.0.0.1": http.StatusOK, "[::1]:8790": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/sessions", nil)
		req.Host = host
		res, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, res.StatusCode, want)
		}
	}
}

func TestEventsArePagedOnTheServer(t *testing.T) {
	root := t.TempDir()
	writeLargeSession(t, filepath.Join(root, "big"), "big", 1000)
	ts := serve(t, root, Options{})
	page := getJSON[Page](t, ts, "/api/sessions/big/events?offset=990&limit=50")
	if page.Total != 1000 || page.Offset != 990 || len(page.Rows) != 10 || page.Rows[0].Step != 990 || page.Rows[9].Kind != "session_end" {
		t.Fatalf("page: total %d offset %d rows %d", page.Total, page.Offset, len(page.Rows))
	}
	if page := getJSON[Page](t, ts, "/api/sessions/big/events"); len(page.Rows) != defaultLimit {
		t.Fatalf("default page has %d rows, want %d", len(page.Rows), defaultLimit)
	}
	for q, param := range map[string]string{"limit=0": "limit", "limit=5000": "limit", "offset=-1": "offset", "offset=x": "offset"} {
		code, body, _ := get(t, ts, "/api/sessions/big/events?"+q)
		if code != http.StatusBadRequest || !strings.Contains(body, "parameter "+param) {
			t.Errorf("?%s: %d %s, want 400 naming %s", q, code, body, param)
		}
	}
	for _, r := range getJSON[Page](t, ts, "/api/sessions/big/events?offset=0&limit=30").Rows {
		if r.Forged != "" {
			t.Fatalf("step %d marked forged: %s", r.Step, r.Forged)
		}
	}
}

func TestStepViewShowsTheContextWithRedactionTokens(t *testing.T) {
	ts := serve(t, triageRoot(t), Options{})
	sv := getJSON[StepView](t, ts, "/api/sessions/triage/steps/7")
	if sv.Kind != "model_call" || sv.System != triageSystem || len(sv.Messages) != 3 {
		t.Fatalf("step 7: kind %s system %q, %d messages", sv.Kind, sv.System, len(sv.Messages))
	}
	roles := []string{sv.Messages[0].Role, sv.Messages[1].Parts[0].Type, sv.Messages[1].Parts[0].Name, sv.Messages[2].Parts[0].Type}
	if diff := cmp.Diff([]string{"user", "tool_use", "search_issues", "tool_result"}, roles); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	first := sv.Messages[0].Parts[0].Text
	if strings.Contains(first, leakedKey) || !strings.Contains(first, redact.TokenPrefix) {
		t.Errorf("the first message shows %q: want the redaction token, not the key", first)
	}
	if !strings.Contains(sv.Messages[2].Parts[0].Text, "crash on save") {
		t.Errorf("the tool result lost its recorded text: %q", sv.Messages[2].Parts[0].Text)
	}
	if tool := getJSON[StepView](t, ts, "/api/sessions/triage/steps/5"); !strings.Contains(tool.Result, "<img src=x onerror=") || !strings.Contains(tool.Result, "<script>window.__xss=2</script>") {
		t.Errorf("the search result is not the recorded text: %q", tool.Result)
	}
	code, body, _ := get(t, ts, "/api/sessions/triage/steps/99")
	if code != http.StatusNotFound || !strings.Contains(body, "step 99 does not exist") {
		t.Errorf("step 99: %d %s", code, body)
	}
	d := getJSON[DiffView](t, ts, "/api/sessions/triage/diff?from=4&to=7")
	if len(d.Added) != 2 || len(d.Removed) != 0 || d.SystemChanged {
		t.Errorf("diff 4→7: %d added, %d removed, system changed %v", len(d.Added), len(d.Removed), d.SystemChanged)
	}
	if code, body, _ := get(t, ts, "/api/sessions/triage/diff?from=4&to=5"); code != http.StatusUnprocessableEntity || !strings.Contains(body, "not a model_call") {
		t.Errorf("diff to a tool call: %d %s", code, body)
	}
}

// TestForkViewShowsTheForkPointAsTheForksChange: a fork parts from its parent at its fork point on
// purpose; the view says so (the fork point, what changed, the request diff) and reports no drift.
func TestForkViewShowsTheForkPointAsTheForksChange(t *testing.T) {
	ts := serve(t, triageRoot(t), Options{})
	f := getJSON[ForkView](t, ts, "/api/sessions/triage-fix/fork")
	if f.Parent != "triage" || f.ForkedAtStep != decideStep || f.From != decideStep || f.ForkPoint == nil || f.Divergence != nil {
		t.Fatalf("fork view: %+v", f)
	}
	fp := f.ForkPoint
	if fp.Step != decideStep || !cmp.Equal(fp.Changes, []string{"system prompt"}) || !strings.Contains(strings.Join(fp.Diff, "\n"), "request.system") ||
		fp.ParentStep == nil || *fp.ParentStep != decideStep {
		t.Errorf("fork point: %+v", fp)
	}
	var diverged, forkPoint []int64
	for _, r := range f.Rows {
		if r.Diverged {
			diverged = append(diverged, r.Step)
		}
		if r.ForkPoint {
			forkPoint = append(forkPoint, r.Step)
		}
	}
	if len(diverged) != 0 || !cmp.Equal(forkPoint, []int64{decideStep}) || f.Total != 4 || f.Rows[0].Step != decideStep {
		t.Errorf("rows from the fork point: total %d, drift at %v, fork point at %v", f.Total, diverged, forkPoint)
	}
	if code, body, _ := get(t, ts, "/api/sessions/triage/fork"); code != http.StatusNotFound || !strings.Contains(body, "not a fork") {
		t.Errorf("fork view of a session that is no fork: %d %s", code, body)
	}
	// The list shows both with the engine's verdicts.
	list := getJSON[[]Listing](t, ts, "/api/sessions")
	if len(list) != 2 || list[0].Verdict == "" || list[1].Parent != "triage" {
		t.Errorf("list: %+v", list)
	}
	p := getJSON[PlanView](t, ts, "/api/sessions/triage/plan")
	if p.Verdict == "" || p.Rewind.Decision == "" || !strings.Contains(p.Source, "engine") {
		t.Errorf("plan: %+v", p)
	}
}

// TestPageScriptBuildsNoMarkupFromStrings reads the page's script as served: it puts strings in the
// page only as text (no innerHTML and the like, no eval), and marks redaction tokens by the prefix the
// redactor mints.
func TestPageScriptBuildsNoMarkupFromStrings(t *testing.T) {
	js, err := assets.ReadFile("assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setTimeout('", "javascript:"} {
		if strings.Contains(string(js), sink) {
			t.Errorf("app.js uses %s: recorded strings must reach the page only as text", sink)
		}
	}
	re := fmt.Sprintf("/%s[0-9a-f]{%d}(?:[0-9a-f]{%d})?/g", regexp.QuoteMeta(redact.TokenPrefix), redact.LegacyTokenHexLen, redact.TokenHexLen-redact.LegacyTokenHexLen)
	if !strings.Contains(string(js), re) {
		t.Errorf("app.js does not mark redaction tokens as the redactor mints them: want %s", re)
	}
}

// TestCheckpointsOfASessionComeFromTheCheckpointStore captures a workspace twice into a local
// checkpoint store (as agentrewind checkpoint create does) anchored in the triage run, and once in
// another session: the triage run lists its two, newest first.
func TestCheckpointsOfASessionComeFromTheCheckpointStore(t *testing.T) {
	root := triageRoot(t)
	storeDir := filepath.Join(t.TempDir(), "ckpts")
	store := checkpoint.OpenStore(storeDir)
	ws := t.TempDir()
	ctx := context.Background()
	for i, a := range []checkpoint.Anchor{{Session: "triage", Turn: 1, Step: 4, Author: session.AuthorRecorder},
		{Session: "triage", Turn: 2, Step: 7, Author: session.AuthorAgent}, {Session: "other", Turn: 1, Step: 2, Author: session.AuthorRecorder}} {
		if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte(strings.Repeat("x", i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Create(ctx, ws, checkpoint.CaptureOptions{Anchor: a}); err != nil {
			t.Fatal(err)
		}
	}
	src, err := NewDirSource(root, storeDir)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(NewServer(src, Options{}))
	t.Cleanup(ts.Close)
	cps := getJSON[[]CheckpointView](t, ts, "/api/sessions/triage/checkpoints")
	got := []string{}
	for _, c := range cps {
		got = append(got, fmt.Sprintf("step %d turn %d anchors %v files %d", c.Step, c.Turn, c.AnchorsRewind, c.Files))
	}
	want := []string{"step 7 turn 2 anchors false files 1", "step 4 turn 1 anchors true files 1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("checkpoints of triage (-want +got):\n%s", diff)
	}
	if cps := getJSON[[]CheckpointView](t, ts, "/api/sessions/triage-fix/checkpoints"); len(cps) != 0 {
		t.Errorf("triage-fix has no checkpoint, got %+v", cps)
	}
}
