package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/engine/evidence"
	"github.com/agentrewind/agentrewind/internal/engine/evidence/gittest"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// planRepo is a git fixture for the plan commands: a start commit and one commit per step.
type planRepo struct {
	dir              string
	start, s1, extra string
}

func newPlanRepo(t *testing.T, foreign bool) planRepo {
	t.Helper()
	repo := gittest.New(t)
	commit := func(msg, path string) string { return repo.Commit(msg, map[string]string{path: msg}) }
	r := planRepo{dir: repo.Dir}
	r.start = commit("init", "README.md")
	r.s1 = commit("store", "lib/store.go")
	if foreign {
		r.extra = commit("a human's hotfix", "lib/hotfix.go")
	}
	return r
}

// planModel is a model call whose transcript is texts: each turn's transcript extends the last, as an
// agent's conversation does, so the turn the recorder stamped still digests to its stamp.
func planModel(texts ...string) session.Event {
	msgs := make([]session.Message, len(texts))
	for i, text := range texts {
		b, _ := json.Marshal(text)
		msgs[i] = session.Message{Role: "user", Content: b}
	}
	return session.Event{Kind: session.KindModelCall, Lane: "0", Request: &session.Request{Model: "m", Messages: msgs}}
}

func planLedgerEvent(author session.Author, r ledger.Record) session.Event {
	return session.Event{Kind: session.KindLedger, Lane: "0", Author: author, Ledger: r.JSON()}
}

// planSession records a run that declared two steps, verified the first at s1, failed a test run, was
// parked by the recorder at turn 1 and went on after it. Like a crashed run, it has no END and no
// session_end: plan must judge it.
func planSession(t *testing.T, repo planRepo) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	w, err := session.Create(dir, session.Meta{ID: "run-session"}, session.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	turn1 := planModel("start", "next")
	events := []session.Event{
		{Kind: session.KindSessionStart, Lane: "0"},
		planModel("start"),
		planLedgerEvent(session.AuthorAgent, ledger.Intent("run-7", "port the store", repo.start,
			ledger.Step{ID: "s1", Text: "write lib/store.go"}, ledger.Step{ID: "s2", Text: "write lib/parse.go"})),
		{Kind: session.KindToolCall, Lane: "0", Name: "write_file", Args: json.RawMessage(`{"path":"lib/store.go"}`), Result: json.RawMessage(`{"ok":true}`)},
		planLedgerEvent(session.AuthorAgent, ledger.Verified("s1", repo.s1[:10], "file-path")),
		turn1,
		{Kind: session.KindToolCall, Lane: "0", Name: "run_command", Args: json.RawMessage(`{"command":"go test ./..."}`),
			Result: json.RawMessage(`{"exitCode":1,"stderr":"FAIL lib/parse_test.go"}`)},
		planLedgerEvent(session.AuthorRecorder, ledger.Suspend(1, evidence.TurnDigest(turn1.Request), repo.s1)),
		planModel("start", "next", "after the suspend"),
	}
	for i, ev := range events {
		ev.Step, ev.Seq = int64(i), int64(i)
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runPlanCmd(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	return out.String(), err
}

// planDoc is the part of the JSON result the tests read.
type planDoc struct {
	Session  string `json:"session"`
	Evidence struct {
		Kind, Head string
	} `json:"evidence"`
	Ledger struct {
		Records   int  `json:"records"`
		Suspended bool `json:"suspended"`
	} `json:"ledger"`
	Resume struct {
		Verdict   string   `json:"verdict"`
		ResumeSHA string   `json:"resumeSHA"`
		Residual  []string `json:"residual"`
	} `json:"resume"`
	Reachability struct {
		Reachability string `json:"reachability"`
	} `json:"reachability"`
	Rewind struct {
		Decision     string `json:"decision"`
		RewindToTurn int    `json:"rewindToTurn"`
		NoGoodNote   struct {
			Lines []string `json:"lines"`
		} `json:"noGoodNote"`
	} `json:"rewind"`
	Convergence    struct{ Verdict string } `json:"convergence"`
	Drift          struct{ Verdict string } `json:"drift"`
	Reconciliation struct {
		Promised int `json:"promised"`
	} `json:"reconciliation"`
	Git *struct {
		Steps []struct{ Step, Reason string } `json:"steps"`
	} `json:"git"`
}

func decodePlan(t *testing.T, data []byte) planDoc {
	t.Helper()
	var d planDoc
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("result is not JSON: %v\n%s", err, data)
	}
	return d
}

func TestEngineResumePlanWritesTheResultFileAndASummaryLine(t *testing.T) {
	repo := newPlanRepo(t, false)
	dir := planSession(t, repo)
	outFile := filepath.Join(t.TempDir(), "result.json")
	out, err := runPlanCmd(t, newEngineCommand(), "resume-plan", "--session", dir, "--git-dir", repo.dir, "--output-file", outFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "run-session: RESUMABLE (ResidualRemains); resume at "+repo.s1[:12]) ||
		!strings.Contains(out, "reachability REACHABLE; rewind NO_REWIND") {
		t.Fatalf("summary = %q", out)
	}
	data, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	d := decodePlan(t, data)
	if d.Session != "run-session" || d.Evidence.Kind != "git-dir" || d.Evidence.Head != repo.s1 || d.Ledger.Records != 3 || d.Ledger.Suspended {
		t.Fatalf("result = %+v", d)
	}
	if d.Resume.Verdict != "RESUMABLE" || d.Resume.ResumeSHA != repo.s1 || strings.Join(d.Resume.Residual, ",") != "s2" {
		t.Fatalf("resume = %+v", d.Resume)
	}
	if d.Git == nil || len(d.Git.Steps) != 1 || d.Git.Steps[0].Reason != "Verified" || d.Reconciliation.Promised != 2 {
		t.Fatalf("git = %+v reconciliation = %+v", d.Git, d.Reconciliation)
	}
}

func TestEngineResumePlanClonesAGitURL(t *testing.T) {
	repo := newPlanRepo(t, true)
	dir := planSession(t, repo)
	out, err := runPlanCmd(t, newEngineCommand(), "resume-plan", "--session", dir, "--git-url", "file://"+repo.dir)
	if err != nil {
		t.Fatal(err)
	}
	d := decodePlan(t, []byte(out))
	if d.Evidence.Kind != "git-url" || d.Evidence.Head != repo.extra {
		t.Fatalf("evidence = %+v", d.Evidence)
	}
	// The hotfix landed after the recorder parked the run: the residual cannot be grafted over it, and
	// the diverged run rewinds to its minted checkpoint.
	if d.Resume.Verdict != "DIVERGED" || d.Reachability.Reachability != "REACHABLE" {
		t.Fatalf("resume %+v reachability %+v", d.Resume, d.Reachability)
	}
	if d.Rewind.Decision != "REWIND" || d.Rewind.RewindToTurn != 1 {
		t.Fatalf("rewind = %+v", d.Rewind)
	}
	note := strings.Join(d.Rewind.NoGoodNote.Lines, "\n")
	for _, want := range []string{"resume verdict: DIVERGED", "env error excerpt [THIRD_PARTY]:", "FAIL lib/parse_test.go"} {
		if !strings.Contains(note, want) {
			t.Errorf("note lacks %q:\n%s", want, note)
		}
	}
	if strings.Contains(note, "port the store") {
		t.Errorf("the agent's goal reached the note:\n%s", note)
	}
}

// TestEngineResumePlanWithoutEvidenceStandsOnTheRecorder: without a repository the recorded write of
// lib/store.go verifies s1 on the recorder's rung; s2 was never written.
func TestEngineResumePlanWithoutEvidenceStandsOnTheRecorder(t *testing.T) {
	dir := planSession(t, newPlanRepo(t, false))
	out, err := runPlanCmd(t, newEngineCommand(), "resume-plan", "--session", dir)
	if err != nil {
		t.Fatal(err)
	}
	d := decodePlan(t, []byte(out))
	if d.Evidence.Kind != "none" || d.Git != nil || d.Resume.Verdict != "RESUMABLE" || d.Resume.ResumeSHA != "" ||
		strings.Join(d.Resume.Residual, ",") != "s2" {
		t.Fatalf("result = %+v", d)
	}
}

// What ran the agent saw of its end (--agent-end, the kubelet's word in an engine Job) decides how a
// recording without an END stopped: killed, the run is suspended and kept whatever its age.
func TestEngineResumePlanTakesTheAgentsEndFromWhatRanIt(t *testing.T) {
	dir := planSession(t, newPlanRepo(t, false))
	type doc struct {
		Ledger struct {
			Suspended bool   `json:"suspended"`
			Stop      string `json:"stop"`
		} `json:"ledger"`
		Reachability struct {
			Stop    string `json:"stop"`
			Message string `json:"message"`
		} `json:"reachability"`
	}
	for _, tc := range []struct {
		end, stop string
		suspended bool
		message   string
	}{
		{"", "", false, "RESUMABLE: a residual"},
		{"Killed:SIGKILL", "Killed", true, "the agent was killed before finishing"},
		{"Failed:3", "Failed", true, "the agent failed before finishing"},
		{"DeadlineExceeded", "DeadlineExceeded", true, "ran out of time"},
	} {
		args := []string{"resume-plan", "--session", dir}
		if tc.end != "" {
			args = append(args, "--agent-end", tc.end)
		}
		out, err := runPlanCmd(t, newEngineCommand(), args...)
		if err != nil {
			t.Fatal(err)
		}
		var d doc
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatal(err)
		}
		if d.Ledger.Stop != tc.stop || d.Reachability.Stop != tc.stop || d.Ledger.Suspended != tc.suspended || !strings.Contains(d.Reachability.Message, tc.message) {
			t.Errorf("--agent-end %q: %+v; want stop %q, suspended %v, a message saying %q", tc.end, d, tc.stop, tc.suspended, tc.message)
		}
	}
}

func TestEngineResumePlanRefusesBadInput(t *testing.T) {
	repo := newPlanRepo(t, false)
	dir := planSession(t, repo)
	uncommitted := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
		code int
	}{
		{"both git sources", []string{"resume-plan", "--session", dir, "--git-dir", repo.dir, "--git-url", repo.dir}, "none of the others can be", exitError},
		{"a missing session flag", []string{"resume-plan"}, "pass either --session", exitError},
		{"a ref without a repository", []string{"resume-plan", "--session", dir, "--git-ref", "main"}, "--git-ref needs --git-dir or --git-url", exitError},
		{"a directory that is not a repository", []string{"resume-plan", "--session", dir, "--git-dir", t.TempDir()}, "--git-dir", exitError},
		{"an uncommitted session", []string{"resume-plan", "--session", uncommitted}, "not committed", exitCorrupt},
		{"an agent end that is not one", []string{"resume-plan", "--session", dir, "--agent-end", "Crashed:3"}, "--agent-end", exitError},
		{"an unwritable output file", []string{"resume-plan", "--session", dir, "--output-file", filepath.Join(t.TempDir(), "no", "such", "dir.json")}, "--output-file", exitError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runPlanCmd(t, newEngineCommand(), tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != tc.code {
				t.Fatalf("err = %v (exit %d), want %q (exit %d)", err, exitCode(err), tc.want, tc.code)
			}
		})
	}
}

func TestEngineIsAParentCommand(t *testing.T) {
	cmd := newEngineCommand()
	if sub, _, err := cmd.Find([]string{"resume-plan"}); err != nil || sub.Name() != "resume-plan" {
		t.Fatalf("engine resume-plan: %v", err)
	}
	out, err := runPlanCmd(t, newEngineCommand())
	if err != nil || !strings.Contains(out, "resume-plan") {
		t.Fatalf("engine without a task prints its tasks: %v\n%s", err, out)
	}
}

func TestPlanPrintsEveryVerdict(t *testing.T) {
	repo := newPlanRepo(t, true)
	dir := planSession(t, repo)
	out, err := runPlanCmd(t, newPlanCommand(), dir, "--git-dir", repo.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"session run-session (run run-7)",
		"evidence: git-dir " + repo.dir,
		"ledger: 3 record(s): 0 corrupt",
		"RESUME        DIVERGED (LaneAdvancedPastResumePoint)",
		"verified    s1@" + repo.s1[:12],
		"residual    s2",
		"re-adjudicated s1           Verified",
		"lane        UnrecordedCommitsPastResumePoint (advanced: true, 1 unaccounted commit(s))",
		"REACHABILITY  REACHABLE (DivergedRetained)",
		"CONVERGENCE   INSUFFICIENT",
		"REWIND        REWIND (RewindToMintedCheckpoint)",
		"no-good note:",
		"    resume verdict: DIVERGED",
		"DRIFT         insufficient-history",
		"RECONCILIATION — what changed vs what was promised",
		"promised 2 · marked done 1 · evidenced 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
}

func TestPlanPrintsJSON(t *testing.T) {
	dir := planSession(t, newPlanRepo(t, false))
	out, err := runPlanCmd(t, newPlanCommand(), dir, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	d := decodePlan(t, []byte(out))
	if d.Resume.Verdict != "RESUMABLE" || d.Rewind.Decision != "NO_REWIND" || d.Convergence.Verdict != "INSUFFICIENT" ||
		d.Drift.Verdict != "insufficient-history" || d.Reconciliation.Promised != 2 {
		t.Fatalf("result = %+v", d)
	}
	if _, err := runPlanCmd(t, newPlanCommand(), dir, "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "use text or json") {
		t.Fatalf("unsupported output: %v", err)
	}
}

// TestGitCredentialsComeFromTheEnvironment: the Job's Secret-backed environment reaches the clone, and
// a password is refused for a URL it must not travel to.
func TestGitCredentialsComeFromTheEnvironment(t *testing.T) {
	repo := newPlanRepo(t, false)
	dir := planSession(t, repo)
	t.Setenv(task.EnvGitPassword, "s3cret-token")
	_, _, err := runStoreCommand(t, newEngineCommand, "resume-plan", "--session", dir, "--git-url", "http://git.example.com/r.git")
	if err == nil || !strings.Contains(err.Error(), "a password is only sent over https") {
		t.Fatalf("resume-plan with a password from the environment over http: %v", err)
	}
	if strings.Contains(fmt.Sprint(err), "s3cret-token") {
		t.Fatalf("the error shows the password: %v", err)
	}
}
