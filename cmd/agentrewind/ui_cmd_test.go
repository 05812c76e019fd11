package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/ui"
)

// searchAgent asks, searches and answers; system is its system prompt. The CLI's fixture session is
// its run without one.
func searchAgent(system string) replay.Harness {
	return func(ctx context.Context, ac replay.AgentContext) error {
		req := session.Request{Model: "fake-1", System: system, Messages: []session.Message{msg("user", "find it")}}
		if _, err := ac.Model(ctx, req, replay.Site("plan")); err != nil {
			return err
		}
		if _, err := ac.Tool(ctx, "search", map[string]string{"q": "it"}); err != nil {
			return err
		}
		req.Messages = append(req.Messages, msg("assistant", "searching"), msg("user", "results: r1"))
		_, err := ac.Model(ctx, req, replay.Site("answer"))
		return err
	}
}

// uiSessions records session "run" (0 start, 1 plan, 2 search, 3 answer, 4 end) and forks it at the
// answer with another system prompt into "run-fix", under one directory.
func uiSessions(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	tools := map[string]replay.Tool{"search": func(context.Context, json.RawMessage) (any, error) { return []string{"r1"}, nil }}
	if _, err := replay.Record(context.Background(), replay.RecordOptions{Dir: filepath.Join(root, "run"), ID: "run", Model: echoModel{}, Tools: tools},
		searchAgent("be brief")); err != nil {
		t.Fatal(err)
	}
	parent, err := session.Open(filepath.Join(root, "run"))
	if err != nil {
		t.Fatal(err)
	}
	fix := "be brief and cite the result"
	if _, err := replay.Fork(context.Background(), replay.ForkOptions{Parent: parent, Dir: filepath.Join(root, "run-fix"), ID: "run-fix", AtStep: 3,
		Model: echoModel{}, Overrides: replay.Overrides{System: &fix}}, searchAgent("be brief")); err != nil {
		t.Fatal(err)
	}
	return root
}

// startUI runs agentrewind ui with args on a free loopback port until the test ends, and returns the
// URL it printed.
func startUI(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	cmd := newRootCommand()
	cmd.SetArgs(append([]string{"ui", "--addr", "127.0.0.1:0"}, args...))
	cmd.SetOut(pw)
	var stderr strings.Builder
	cmd.SetErr(&stderr)
	done := make(chan error, 1)
	go func() {
		err := cmd.ExecuteContext(ctx)
		_ = pw.CloseWithError(fmt.Errorf("agentrewind ui returned: %v", err))
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agentrewind ui stopped with %v\n%s", err, stderr.String())
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`serving (http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("agentrewind ui printed %q (%v)\n%s", line, err, stderr.String())
	}
	return m[1]
}

func uiGet[T any](t *testing.T, base, path string) T {
	t.Helper()
	res, err := http.Get(base + strings.TrimPrefix(path, "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	return v
}

func TestUICommandNeedsExactlyOneSource(t *testing.T) {
	t.Setenv(envStore, "")
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ui"}, "name the sessions to show: a SESSION-DIR, --store"},
		{[]string{"ui", dir, "--cluster"}, "SESSION-DIR, --store and --cluster name different sources"},
		{[]string{"ui", dir, "--store", "s3://b/p"}, "SESSION-DIR, --store and --cluster name different sources"},
		{[]string{"ui", "--store", "s3://b/p", "--checkpoints-dir", dir}, "--checkpoints-dir goes with SESSION-DIR"},
		{[]string{"ui", filepath.Join(dir, "missing")}, "no such file or directory"},
		{[]string{"ui", dir, "--addr", "256.0.0.1:1"}, "--addr 256.0.0.1:1"},
		{[]string{"ui", dir, "--price", "fake-1=1,2"}, "--price: price"},
	} {
		_, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestUICommandServesADirectoryReadOnlyOnLoopback serves a directory of sessions as a user starts it:
// the list, a timeline, the fork against its parent, and only to loopback names with GET.
func TestUICommandServesADirectoryReadOnlyOnLoopback(t *testing.T) {
	base := startUI(t, uiSessions(t))
	list := uiGet[[]ui.Listing](t, base, "/api/sessions")
	if len(list) != 2 || list[0].Verdict == "" || list[1].Parent != "run" {
		t.Fatalf("list: %+v", list)
	}
	if page := uiGet[ui.Page](t, base, "/api/sessions/run/events"); page.Total != 6 || page.Rows[3].CallSite != "answer" {
		t.Errorf("timeline of run: %+v", page)
	}
	if f := uiGet[ui.ForkView](t, base, "/api/sessions/run-fix/fork"); f.ForkPoint == nil || f.ForkPoint.Step != 3 || f.Divergence != nil {
		t.Errorf("fork view: %+v", f)
	}
	// fake-1 has no price: its cost is unknown, not $0.
	if sum := uiGet[ui.Summary](t, base, "/api/sessions/run"); sum.Cost.MicroUSD != nil || !strings.Contains(sum.Cost.Unknown, "fake-1") {
		t.Errorf("cost of run without a price: %+v", sum.Cost)
	}
	res, err := http.Post(base+"api/sessions", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", res.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"api/sessions", nil)
	req.Host = "attacker.example"
	if res, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host on a loopback server: %d, want 421", res.StatusCode)
	}
}

// TestUICommandPricesWithItsFlags: --price prices a model the built-in table lacks.
func TestUICommandPricesWithItsFlags(t *testing.T) {
	base := startUI(t, uiSessions(t), "--price", "acme/fake-1=1,2")
	// run's calls: 10 and 30 input tokens, 2 output each; at $1 and $2 a million, 40 + 8 micro-dollars.
	if sum := uiGet[ui.Summary](t, base, "/api/sessions/run"); sum.Cost.MicroUSD == nil || *sum.Cost.MicroUSD != 48 {
		t.Errorf("cost of run at the flag's price: %+v", sum.Cost)
	}
}

// TestUICommandServesAStore serves the sessions pushed to a real S3 server.
func TestUICommandServesAStore(t *testing.T) {
	storeServer(t)
	root := uiSessions(t)
	for _, id := range []string{"run", "run-fix"} {
		if _, _, err := runStoreCommand(t, newPushCommand, filepath.Join(root, id), "--store", "s3://ui-bucket/team", "--create-bucket"); err != nil {
			t.Fatal(err)
		}
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runStoreCommand(t, newCheckpointCommand, "create", ws, "--store", "s3://ui-bucket/team", "--session", "run", "--turn", "1", "--step", "2"); err != nil {
		t.Fatal(err)
	}
	base := startUI(t, "--store", "s3://ui-bucket/team")
	list := uiGet[[]ui.Listing](t, base, "/api/sessions")
	if len(list) != 2 || list[0].ID != "run" || list[0].Verdict == "" || list[1].Parent != "run" {
		t.Fatalf("list: %+v", list)
	}
	if sv := uiGet[ui.StepView](t, base, "/api/sessions/run/steps/3"); sv.System != "be brief" || len(sv.Messages) != 3 {
		t.Errorf("context at step 3: %+v", sv)
	}
	if f := uiGet[ui.ForkView](t, base, "/api/sessions/run-fix/fork"); f.ForkPoint == nil || f.ForkPoint.Step != 3 || f.Divergence != nil {
		t.Errorf("fork view: %+v", f)
	}
	cps := uiGet[[]ui.CheckpointView](t, base, "/api/sessions/run/checkpoints")
	if len(cps) != 1 || cps[0].Source != "store" || cps[0].Step != 2 || cps[0].Turn != 1 || cps[0].Files != 1 {
		t.Errorf("checkpoints of run in the store: %+v", cps)
	}
	if cps := uiGet[[]ui.CheckpointView](t, base, "/api/sessions/run-fix/checkpoints"); len(cps) != 0 {
		t.Errorf("run-fix has no checkpoint, but %+v were listed", cps)
	}
}

// TestUICommandServesTheCluster shows a namespace as the cluster sees it: AgentSessions with the
// verdicts of their ResumePlans, the ForkRun that made a fork, the recordings read from the store.
func TestUICommandServesTheCluster(t *testing.T) {
	storeServer(t)
	c, kubeconfig := apiServerWithKubeconfig(t, "viewer")
	ns := newNamespace(t, c)
	root := uiSessions(t)
	for _, id := range []string{"run", "run-fix"} {
		if _, _, err := runStoreCommand(t, newPushCommand, filepath.Join(root, id), "--store", "s3://ops-bucket/agentrewind/"+ns, "--create-bucket"); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	run := verifiedSession(t, c, ns, "run", 3, v1alpha1.AgentSessionSpec{SessionID: "run"})
	run.Status.ResumeVerdict = v1alpha1.VerdictResumable
	if err := c.Status().Update(ctx, run); err != nil {
		t.Fatal(err)
	}
	verifiedSession(t, c, ns, "run-fix", 3, v1alpha1.AgentSessionSpec{SessionID: "run-fix", ParentRef: v1alpha1.LocalObjectReference{Name: "run"}, ForkedAtStep: new(int64(3))})
	st := resumableStatus()
	resumePlan(t, c, ns, "run-plan", "run", &st)
	fr := &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: "fix", Namespace: ns},
		Spec: v1alpha1.ForkRunSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "run"}, Mode: v1alpha1.ModeFork,
			Fork: v1alpha1.ForkSpec{AtStep: new(int64(3))}}}
	if err := c.Create(ctx, fr); err != nil {
		t.Fatal(err)
	}
	fr.Status = finishedStatus(v1alpha1.OutcomeGoalReached, nil)
	fr.Status.ChildSessionRef.Name = "run-fix"
	if err := c.Status().Update(ctx, fr); err != nil {
		t.Fatal(err)
	}

	digest := strings.Repeat("ab", 32)
	cp := &v1alpha1.Checkpoint{ObjectMeta: metav1.ObjectMeta{Name: "run-turn-1", Namespace: ns},
		Spec: v1alpha1.CheckpointSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "run"}, Step: new(int64(3)), TurnIndex: new(int32(1)), TranscriptDigest: digest}}
	if err := c.Create(ctx, cp); err != nil {
		t.Fatal(err)
	}

	base := startUI(t, "--cluster", "--kubeconfig", kubeconfig, "-n", ns, "--store", "s3://ops-bucket/agentrewind")
	list := uiGet[[]ui.Listing](t, base, "/api/sessions")
	byID := map[string]ui.Listing{}
	for _, l := range list {
		byID[l.ID] = l
	}
	if l := byID["run"]; len(list) != 2 || l.Verdict != string(v1alpha1.VerdictResumable) || l.Object != "AgentSession "+ns+"/run" {
		t.Errorf("list: %+v", list)
	}
	if l := byID["run-fix"]; l.Parent != "run" || l.ForkRun != "ForkRun fix (GoalReached)" {
		t.Errorf("the fork's listing: %+v", l)
	}
	p := uiGet[ui.PlanView](t, base, "/api/sessions/run/plan")
	if p.Source != "ResumePlan "+ns+"/run-plan" || p.Verdict != string(v1alpha1.VerdictResumable) || p.Rewind.Decision != string(v1alpha1.DecisionRewind) ||
		p.Rewind.RewindToTurn == nil || *p.Rewind.RewindToTurn != 3 || len(p.Rewind.NoGoodNote) != 1 {
		t.Errorf("plan from the ResumePlan: %+v", p)
	}
	if page := uiGet[ui.Page](t, base, "/api/sessions/run/events"); page.Total != 6 {
		t.Errorf("timeline read from the store: %+v", page)
	}
	if f := uiGet[ui.ForkView](t, base, "/api/sessions/run-fix/fork"); f.ForkPoint == nil || f.ForkPoint.Step != 3 || f.Divergence != nil {
		t.Errorf("fork view: %+v", f)
	}
	cps := uiGet[[]ui.CheckpointView](t, base, "/api/sessions/run/checkpoints")
	if len(cps) != 1 || cps[0].ID != "run-turn-1" || cps[0].Step != 3 || cps[0].Turn != 1 || !cps[0].AnchorsRewind {
		t.Errorf("checkpoints of run: %+v", cps)
	}
	if cps := uiGet[[]ui.CheckpointView](t, base, "/api/sessions/run-fix/checkpoints"); len(cps) != 0 {
		t.Errorf("run-fix has no Checkpoint, but %+v were listed", cps)
	}
}
