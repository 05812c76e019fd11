package evidence

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// TestALedgerWrittenThroughTheHarnessIsJudgedAgainstTheWorkspace runs the whole path a crashed run takes:
// an agent records its intent and claims through AgentContext.Ledger, does half its work, and dies; the
// verdicts, gathered against the real repository, make it RESUMABLE from the verified step with the rest
// as residual — and a claim the repository does not back stays in the residual.
func TestALedgerWrittenThroughTheHarnessIsJudgedAgainstTheWorkspace(t *testing.T) {
	repo := newFixture(t)
	start := repo.commit("initial", map[string]string{"README.md": "service\n"})
	parser := repo.commit("parse config", map[string]string{"config/parse.go": "package config\n"})

	dir := filepath.Join(t.TempDir(), "run")
	rec, err := replay.Record(context.Background(), replay.RecordOptions{Dir: dir, ID: "run-7"},
		func(ctx context.Context, ac replay.AgentContext) error {
			steps := []ledger.Step{step("parse", "write the parser", "config/parse.go"), step("validate", "add validation", "config/validate.go")}
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
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range s.Events {
		if ev.Kind == session.KindLedger && ev.Author != session.AuthorAgent {
			t.Fatalf("a ledger record written by the agent is authored %q", ev.Author)
		}
	}
	g, err := Gather(s, repo.open(""), verdict.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	report := verdict.Evaluate(g.Facts, verdict.DefaultPolicy())
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
