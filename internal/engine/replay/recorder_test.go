package replay

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/bundle"
	"github.com/agentrewind/agentrewind/internal/engine/evidence"
	"github.com/agentrewind/agentrewind/internal/engine/evidence/gittest"
	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/rewind"
)

func ledgerStep(id, text string, paths ...string) ledger.Step {
	return ledger.Step{ID: id, Text: text, Paths: paths}
}

// TestALedgerWrittenThroughTheHarnessIsJudgedAgainstTheWorkspace runs the whole path a crashed run
// takes: an agent records its intent and claims through AgentContext.Ledger, does half its work, and
// dies; the verdicts, gathered against the real repository, make it RESUMABLE from the verified step
// with the rest as residual — and a claim the repository does not back stays in the residual.
func TestALedgerWrittenThroughTheHarnessIsJudgedAgainstTheWorkspace(t *testing.T) {
	repo := gittest.New(t)
	start := repo.Commit("initial", map[string]string{"README.md": "service\n"})
	parser := repo.Commit("parse config", map[string]string{"config/parse.go": "package config\n"})

	dir := filepath.Join(t.TempDir(), "run")
	rec, err := Record(context.Background(), RecordOptions{Dir: dir, ID: "run-7"},
		func(ctx context.Context, ac AgentContext) error {
			steps := []ledger.Step{ledgerStep("parse", "write the parser", "config/parse.go"), ledgerStep("validate", "add validation", "config/validate.go")}
			for _, r := range []ledger.Record{
				ledger.Intent("run-7", "load the config safely", start, steps...),
				ledger.Verified("parse", parser, resume.ViaFilePath),
				ledger.Claimed("validate", parser), // claimed, but the commit does not touch validate.go
			} {
				if err := ac.Ledger(ctx, r); err != nil {
					return err
				}
			}
			panic("out of memory")
		})
	if err != nil {
		t.Fatal(err)
	}
	if rec.HarnessErr == nil {
		t.Fatal("the crash was not reported")
	}
	report := judge(t, dir, repo.Dir)
	for _, ev := range mustOpen(t, dir).Events {
		if ev.Kind == session.KindLedger && ev.CallSite != "recorder" && ev.Author != session.AuthorAgent {
			t.Fatalf("a ledger record written by the agent is authored %q", ev.Author)
		}
	}
	if report.Resume.Verdict != resume.Resumable {
		t.Fatalf("verdict %s (%s): %s", report.Resume.Verdict, report.Resume.Reason, report.Resume.Message)
	}
	if len(report.Resume.Verified) != 1 || report.Resume.Verified[0].ID != "parse" ||
		len(report.Resume.Residual) != 1 || report.Resume.Residual[0] != "validate" {
		t.Fatalf("verified %+v, residual %v", report.Resume.Verified, report.Resume.Residual)
	}
	if report.Resume.ResumeSHA != parser || report.Reachability.Reachability != resume.Reachable {
		t.Fatalf("re-entry %s, reachability %s", report.Resume.ResumeSHA, report.Reachability.Reachability)
	}
}

func mustOpen(t *testing.T, dir string) *session.Session {
	t.Helper()
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// judge gathers the evidence of a recorded session against a repository and computes every verdict.
func judge(t *testing.T, dir, repoDir string) verdict.Report {
	t.Helper()
	ws, err := evidence.OpenGit(repoDir, "")
	if err != nil {
		t.Fatal(err)
	}
	g, err := evidence.Gather(mustOpen(t, dir), ws, verdict.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	return verdict.Evaluate(g.Facts, verdict.DefaultPolicy())
}

// suspendingAgent declares two steps, does the first, asks the model twice, is suspended by the
// recorder, and then — unless honest — sends a transcript with its first message rewritten.
func suspendingAgent(repo *gittest.Repo, rewrite bool) Harness {
	return func(ctx context.Context, ac AgentContext) error {
		steps := []ledger.Step{ledgerStep("s1", "write lib/a.go"), ledgerStep("s2", "write lib/b.go")}
		// The agent claims it started from a commit of its choosing; the recorder's START outranks it.
		if err := ac.Ledger(ctx, ledger.Intent("run", "split the library", strings.Repeat("0", 40), steps...)); err != nil {
			return err
		}
		msgs := []session.Message{userMessage("split the library")}
		if _, err := ac.Model(ctx, session.Request{Model: "m", Messages: msgs}); err != nil {
			return err
		}
		a := repo.Commit("s1", map[string]string{"lib/a.go": "package lib"})
		if err := ac.Ledger(ctx, ledger.Verified("s1", a, resume.ViaFilePath)); err != nil {
			return err
		}
		msgs = append(msgs, userMessage("lib/a.go written"))
		if _, err := ac.Model(ctx, session.Request{Model: "m", Messages: msgs}); err != nil {
			return err
		}
		if err := ac.Suspend(ctx); err != nil {
			return err
		}
		// After the suspension a human lands work on the lane, so the run is DIVERGED and the rewind fires.
		repo.Commit("hotfix", map[string]string{"lib/b.go": "package lib // by hand"})
		if rewrite {
			msgs[1] = userMessage("lib/a.go and lib/b.go written")
		}
		_, err := ac.Model(ctx, session.Request{Model: "m", Messages: append(msgs, userMessage("continue"))})
		return err
	}
}

// TestARecordingReachesRewindOnlyThroughTheRecordersStamp records an agent against a real workspace:
// the recorder mints START (its HEAD, not the agent's start SHA) and the SUSPEND stamp, so the run can
// be rewound — unless the agent rewrote the turn under the stamp afterwards, which leaves it UNANCHORED.
func TestARecordingReachesRewindOnlyThroughTheRecordersStamp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rewrite bool
		want    rewind.Decision
	}{
		{"an untouched transcript rewinds to the minted turn", false, rewind.Rewind},
		{"a turn rewritten after the suspension is unanchored", true, rewind.Unanchored},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := gittest.New(t)
			start := repo.Commit("initial", map[string]string{"README.md": "x"})
			dir := filepath.Join(t.TempDir(), "run")
			model := &fakeModel{answer: func(req session.Request) string { return "ok " + lastUser(req) }}
			rec, err := Record(context.Background(), RecordOptions{Dir: dir, ID: "run", Model: model,
				Config: Config{Workspace: repo.Dir}}, suspendingAgent(repo, tc.rewrite))
			if err != nil || rec.HarnessErr != nil {
				t.Fatalf("record: %v / %v", err, rec.HarnessErr)
			}
			state := ledger.Fold(mustOpen(t, dir).Events)
			if !state.StartMinted || state.StartSHA != start {
				t.Fatalf("start %q minted=%v, want the recorder's %s", state.StartSHA, state.StartMinted, start)
			}
			if !state.Checkpoint.Present || state.Checkpoint.TurnIndex != 1 || state.SuspendSHA == "" {
				t.Fatalf("checkpoint %+v, suspend SHA %q", state.Checkpoint, state.SuspendSHA)
			}
			report := judge(t, dir, repo.Dir)
			if report.Resume.Verdict != resume.Diverged {
				t.Fatalf("resume %s (%s)", report.Resume.Verdict, report.Resume.Message)
			}
			if report.Rewind.Decision != tc.want {
				t.Fatalf("rewind %s/%s (%s), want %s", report.Rewind.Decision, report.Rewind.Reason, report.Rewind.Message, tc.want)
			}
			if tc.want == rewind.Rewind && (report.Rewind.RewindToTurn != 1 || len(report.Rewind.DroppedTurns) != 1) {
				t.Fatalf("rewind to %d dropping %v, want turn 1 dropping [2]", report.Rewind.RewindToTurn, report.Rewind.DroppedTurns)
			}
		})
	}
}

// TestAReplayOfARecordingWithAStartLinesUpStepForStep replays and forks a recording whose recorder
// minted START: the replay mints it again, so every step lines up and nothing drifts.
func TestAReplayOfARecordingWithAStartLinesUpStepForStep(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit("initial", map[string]string{"README.md": "x"})
	dir := filepath.Join(t.TempDir(), "run")
	model := &fakeModel{answer: func(req session.Request) string { return "ok " + lastUser(req) }}
	if _, err := Record(context.Background(), RecordOptions{Dir: dir, ID: "run", Model: model, Config: Config{Workspace: repo.Dir}},
		suspendingAgent(repo, false)); err != nil {
		t.Fatal(err)
	}
	recorded := mustOpen(t, dir)
	// failingModel fails the test on any live call; the recording's own model is not passed in.
	res, err := Replay(context.Background(), ReplayOptions{Session: recorded, Model: failingModel{t}}, suspendingAgent(gittest.New(t), false))
	if err != nil {
		t.Fatal(err)
	}
	if res.LiveCalls != 0 || len(res.Events) != len(recorded.Events) {
		t.Fatalf("replay made %d live calls and %d events, want 0 and %d", res.LiveCalls, len(res.Events), len(recorded.Events))
	}
	for i := range res.Events {
		if res.Events[i].Kind != recorded.Events[i].Kind || res.Events[i].Step != recorded.Events[i].Step {
			t.Fatalf("event %d: %s at step %d, recorded %s at step %d", i, res.Events[i].Kind, res.Events[i].Step,
				recorded.Events[i].Kind, recorded.Events[i].Step)
		}
	}
}

// failingModel fails the test if it is ever called: a replay must make no live call.
type failingModel struct{ t *testing.T }

func (m failingModel) Create(context.Context, session.Request) (*session.Response, error) {
	m.t.Error("a live model call was made")
	return nil, errors.New("no live calls in a replay")
}

// TestSecretsTheAgentNeverDeclaredAreNeverStored reads a credential with plain os.Getenv (not through
// AgentContext.Env) and takes a declared secret from the operator, and sends both in a request, a tool
// argument and a ledger record: not one stored byte — events, blobs, meta.json, the bundle — holds either.
func TestSecretsTheAgentNeverDeclaredAreNeverStored(t *testing.T) {
	const envCanary = "canary-env-7f3a9c2e41"
	const declared = "tenant-pw-Q8s!2x"
	t.Setenv("BILLING_API_TOKEN", envCanary)
	dir := filepath.Join(t.TempDir(), "run")
	model := &fakeModel{answer: func(req session.Request) string { return "echo " + lastUser(req) }}
	tools := map[string]Tool{"call_billing": func(_ context.Context, args json.RawMessage) (any, error) {
		return map[string]string{"echo": string(args)}, nil
	}}
	_, err := Record(context.Background(), RecordOptions{Dir: dir, ID: "run", Model: model, Tools: tools,
		Config: Config{Secrets: []string{declared}}},
		func(ctx context.Context, ac AgentContext) error {
			token := os.Getenv("BILLING_API_TOKEN")
			big := strings.Repeat("padding ", 4096) + token // large enough to be stored as a blob
			if _, err := ac.Model(ctx, session.Request{Model: "m", Messages: []session.Message{userMessage("use " + token + " and " + declared), userMessage(big)}}); err != nil {
				return err
			}
			if _, err := ac.Tool(ctx, "call_billing", map[string]string{"auth": token, "pw": declared}); err != nil {
				return err
			}
			ac.Note(ctx, "authenticated with "+declared)
			return ac.Ledger(ctx, ledger.Claimed("s1 with "+token, ""))
		})
	if err != nil {
		t.Fatal(err)
	}
	var packed bytes.Buffer
	if _, err := bundle.Pack(context.Background(), dir, &packed); err != nil {
		t.Fatal(err)
	}
	check := func(name string, data []byte) {
		for _, secret := range []string{envCanary, declared} {
			if bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds the secret %q", name, secret)
			}
		}
	}
	check("the bundle", gunzipAll(t, packed.Bytes()))
	stored := 0
	err = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		stored++
		check(path, data)
		return err
	})
	if err != nil || stored < 3 {
		t.Fatalf("walked %d stored files: %v", stored, err)
	}
}

// gunzipAll is the uncompressed bytes of a gzip stream (a .rewind bundle is a tar.gz).
func gunzipAll(t *testing.T, data []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestADeclaredSecretTooShortToRedactIsRefused(t *testing.T) {
	_, err := Record(context.Background(), RecordOptions{Dir: filepath.Join(t.TempDir(), "run"), Config: Config{Secrets: []string{"pw"}}},
		func(context.Context, AgentContext) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "declared secret #1 is 2 bytes") {
		t.Fatalf("err = %v", err)
	}
}

// TestARequestWithInvalidTextIsRefusedNotRepaired sends requests whose plain string fields hold a
// byte that is not UTF-8: json.Marshal would turn it into U+FFFD, so "x\xff" and "x\ufffd" would be
// stored and matched as one request. Each is refused, naming the field, and nothing reaches the model.
func TestARequestWithInvalidTextIsRefusedNotRepaired(t *testing.T) {
	cases := map[string]session.Request{
		"model":            {Model: "m\xff"},
		"system":           {Model: "m", System: "be brief\xff"},
		"messages[1].role": {Model: "m", Messages: []session.Message{userMessage("a"), {Role: "us\xffer", Content: json.RawMessage(`"b"`)}}},
		"params":           {Model: "m", Params: map[string]json.RawMessage{"temp\xff": json.RawMessage(`1`)}},
	}
	for field, req := range cases {
		t.Run(field, func(t *testing.T) {
			rec, err := Record(context.Background(), RecordOptions{Dir: filepath.Join(t.TempDir(), "run"), Model: failingModel{t}},
				func(ctx context.Context, ac AgentContext) error {
					_, err := ac.Model(ctx, req)
					return err
				})
			if err != nil {
				t.Fatal(err)
			}
			var bad *fingerprint.InvalidUTF8Error
			if !errors.As(rec.HarnessErr, &bad) || bad.Path != field {
				t.Fatalf("harness error %v, want invalid UTF-8 at %s", rec.HarnessErr, field)
			}
		})
	}
}

// TestAnErrorNameAndACallSiteAreRedacted: a declared secret in the name of an error a model or tool
// returned, and in a call-site label, is stored as its token; the replay still matches the call.
func TestAnErrorNameAndACallSiteAreRedacted(t *testing.T) {
	const secret = "Decl-CANARY-pass-42"
	dir := filepath.Join(t.TempDir(), "run")
	tools := map[string]Tool{"login": func(context.Context, json.RawMessage) (any, error) {
		return nil, &session.SerializedError{Name: "AuthError-" + secret, Message: "denied"}
	}}
	agent := func(ctx context.Context, ac AgentContext) error {
		_, _ = ac.Tool(ctx, "login", 1, Site("login-as-"+secret))
		return nil
	}
	if _, err := Record(context.Background(), RecordOptions{Dir: dir, Tools: tools, Config: Config{Secrets: []string{secret}}}, agent); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, session.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(secret)) {
		t.Fatalf("events.jsonl holds the secret:\n%s", data)
	}
	if _, err := Replay(context.Background(), ReplayOptions{Session: mustOpen(t, dir), Config: Config{Secrets: []string{secret}}}, agent); err != nil {
		t.Fatalf("the redacted call site no longer matches on replay: %v", err)
	}
}

// TestACredentialInAURLInTheEnvironmentIsNeverStored: DATABASE_URL's name says nothing about secrets,
// but the password in its userinfo is one.
func TestACredentialInAURLInTheEnvironmentIsNeverStored(t *testing.T) {
	const password = "db-pw-7Hq2zK"
	t.Setenv("DATABASE_URL", "postgres://app:"+password+"@db.internal:5432/app")
	dir := filepath.Join(t.TempDir(), "run")
	tools := map[string]Tool{"query": func(_ context.Context, args json.RawMessage) (any, error) { return string(args), nil }}
	if _, err := Record(context.Background(), RecordOptions{Dir: dir, Tools: tools}, func(ctx context.Context, ac AgentContext) error {
		_, err := ac.Tool(ctx, "query", map[string]string{"dsn": os.Getenv("DATABASE_URL")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, session.EventsFile))
	if err != nil || bytes.Contains(data, []byte(password)) {
		t.Fatalf("events.jsonl holds the database password (%v):\n%s", err, data)
	}
}
