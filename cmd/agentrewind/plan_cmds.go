package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/engine/evidence"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/fsutil"
)

// planSources are the flags that say where the evidence beside the log comes from: the workspace,
// and how the agent ended when what ran it saw more than the recording holds.
type planSources struct {
	gitDir, gitURL, gitRef string
	agentEnd               string
}

func (s *planSources) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.gitDir, "git-dir", "", "a git work tree or bare repository to re-adjudicate the run's claimed steps against")
	cmd.Flags().StringVar(&s.gitURL, "git-url", "", "a repository to clone (https, ssh, file:// or a path) and re-adjudicate against")
	cmd.Flags().StringVar(&s.gitRef, "git-ref", "", "the branch, tag or full commit whose ancestry is the evidence (default: HEAD)")
	cmd.MarkFlagsMutuallyExclusive("git-dir", "git-url")
	cmd.Flags().StringVar(&s.agentEnd, "agent-end", "", "how the agent ended, as what ran it saw (Finished, Failed:<exit code>, Killed:<signal>, DeadlineExceeded), "+
		"for a recording that cannot tell: one without an END record, or whose recorder was stopped before the agent ended")
}

// observedEnd reads --agent-end; nil when it was not given.
func (s *planSources) observedEnd() (*ledger.RunEnd, error) {
	if s.agentEnd == "" {
		return nil, nil
	}
	end, err := ledger.ParseEnd(s.agentEnd)
	if err != nil {
		return nil, fmt.Errorf("--agent-end: %w", err)
	}
	return &end, nil
}

// gitAuthFromEnv reads the credentials a ResumePlan's Job carries in its Secret-backed environment.
func gitAuthFromEnv() evidence.GitAuth {
	auth := evidence.GitAuth{Username: os.Getenv(task.EnvGitUsername), Password: os.Getenv(task.EnvGitPassword)}
	if k := os.Getenv(task.EnvGitSSHPrivateKey); k != "" {
		auth.SSHPrivateKey, auth.SSHKnownHosts = []byte(k), []byte(os.Getenv(task.EnvGitSSHKnownHosts))
	}
	return auth
}

// checkJobGitURL refuses, in an engine Job, a repository that is not a remote one: a ResumePlan's URL
// is a tenant's choice, and a file:// URL or a path would make the Job read its own file system. The
// API server already refuses such URLs; this holds even for a Job created by hand.
func checkJobGitURL(url string) error {
	if url == "" {
		return nil
	}
	for _, scheme := range []string{"https://", "ssh://", "git://"} {
		if strings.HasPrefix(url, scheme) && len(url) > len(scheme) {
			return nil
		}
	}
	return fmt.Errorf("--git-url %q: an engine Job clones only https://, ssh:// or git:// repositories", url)
}

func newResumePlanTaskCommand() *cobra.Command {
	var dir, outputFile string
	var src planSources
	var job jobFlags
	cmd := &cobra.Command{
		Use:   "resume-plan (--session <dir> | --store S --session-id ID --job-uid UID) [--git-dir D | --git-url U] [--output-file F]",
		Short: "Judge whether a recorded run can be resumed, and write the verdicts as JSON",
		Long: `Judge whether a recorded run can be resumed: the resume plan, reachability, the rewind plan
with its no-good note, convergence and plan coherence.

Without --git-dir or --git-url a step counts as done only when the recorded tool stream shows its work
(its promised path written, its named tool answering, its command passing); the agent's own claims
never count. With a repository, git must verify each step and the tool stream must not contradict it.
With --session the session is a local directory: with --output-file the JSON result goes to the file
and a one-line summary to stdout, otherwise the JSON goes to stdout; the file may not be inside the
session directory, and an existing one is replaced only once the new result is complete (a device or
FIFO is written into, never replaced). With
--session-id the session is pulled from the store and the result goes to results/<job-uid>.json there,
as an engine Job does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (dir == "") == (job.sessionID == "") {
				return errors.New("pass either --session <dir> or --session-id with --store")
			}
			if job.sessionID != "" {
				return runJob(cmd, &job, task.ResumePlan, func(ctx context.Context, dir string, pulled error, res *task.Result) error {
					if pulled != nil {
						return pulled
					}
					if err := checkJobGitURL(src.gitURL); err != nil {
						return &failure{task.ReasonInvalidInput, err}
					}
					if _, err := src.observedEnd(); err != nil {
						return &failure{task.ReasonInvalidInput, err}
					}
					plan, err := evaluatePlan(ctx, dir, src)
					if err != nil {
						return err
					}
					res.ResumePlan, err = resumePlanResult(plan)
					return err
				})
			}
			if outputFile != "" {
				if err := fsutil.CheckOutputOutside(outputFile, dir); err != nil {
					return fmt.Errorf("--output-file: %w", err)
				}
			}
			res, err := evaluatePlan(cmd.Context(), dir, src)
			if err != nil {
				return err
			}
			if outputFile == "" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			if err := writePlanResult(outputFile, res); err != nil {
				return err
			}
			summaryOut := cmd.OutOrStdout()
			if fsutil.IsStreamOutput(outputFile) { // the JSON went to /dev/stdout, say: keep it alone there
				summaryOut = cmd.ErrOrStderr()
			}
			_, err = fmt.Fprintln(summaryOut, planSummary(res))
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "session", "", "the session directory to judge")
	cmd.Flags().StringVar(&outputFile, "output-file", "", "with --session: write the JSON result here instead of stdout")
	src.register(cmd)
	job.register(cmd)
	return cmd
}

// resumePlanResult is the Job result of a resume plan: the verdicts in their wire form and the evidence
// they were computed from.
func resumePlanResult(p *planResult) (*task.ResumePlanResult, error) {
	report, err := task.NewReport(p.Report)
	if err != nil {
		return nil, err
	}
	ev := task.Evidence{EventsHash: p.EventsHash, Workspace: p.Git != nil, PlanPresent: p.Ledger.HasIntent}
	if p.Git != nil {
		ev.ResolvedCommit = p.Git.Head
	}
	return &task.ResumePlanResult{SessionID: p.Session, Evidence: ev, Report: report}, nil
}

// newPlanCommand prints every verdict on a local session.
func newPlanCommand() *cobra.Command {
	var output string
	var src planSources
	cmd := &cobra.Command{
		Use:   "plan <session-dir> [--git-dir D | --git-url U]",
		Short: "Print every verdict on a session: resume plan, reachability, rewind, convergence, plan coherence",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			res, err := evaluatePlan(cmd.Context(), args[0], src)
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			return printPlan(cmd.OutOrStdout(), res)
		},
	}
	outputFlag(cmd, &output)
	src.register(cmd)
	return cmd
}

// planResult is the JSON result of resume-plan and of plan -o json.
type planResult struct {
	Session    string              `json:"session"`
	SessionDir string              `json:"sessionDir"`
	EventsHash string              `json:"eventsHash"`
	Evidence   planEvidence        `json:"evidence"`
	Ledger     planLedger          `json:"ledger"`
	Git        *evidence.GitReport `json:"git,omitempty"`
	verdict.Report
}

// planEvidence says which workspace the verdicts were judged against.
type planEvidence struct {
	// Kind is none, git-dir or git-url.
	Kind     string `json:"kind"`
	Location string `json:"location,omitempty"`
	Ref      string `json:"ref,omitempty"`
	Head     string `json:"head,omitempty"`
}

// planLedger summarises the fold: how much of the ledger was readable and who minted the checkpoint.
type planLedger struct {
	HasIntent        bool              `json:"hasIntent"`
	Records          int               `json:"records"`
	Corrupt          int               `json:"corrupt"`
	Untagged         int               `json:"untagged"`
	UnreadableNewer  int               `json:"unreadableNewer"`
	UnmintedSuspends int               `json:"unmintedSuspends"`
	Suspended        bool              `json:"suspended"`
	Stop             ledger.StopReason `json:"stop,omitempty"`
	End              *ledger.RunEnd    `json:"end,omitempty"`
	Checkpoint       ledger.Checkpoint `json:"checkpoint"`
	Problems         []ledger.Problem  `json:"problems,omitempty"`
}

// evaluatePlan opens the session, gathers the evidence and computes every verdict.
func evaluatePlan(ctx context.Context, dir string, src planSources) (*planResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	observed, err := src.observedEnd()
	if err != nil {
		return nil, err
	}
	s, err := openSession(dir)
	if err != nil {
		return nil, err
	}
	ws, ev, cleanup, err := openPlanWorkspace(ctx, src)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	policy := verdict.DefaultPolicy()
	g, err := evidence.Gather(s, ws, policy)
	if err != nil {
		return nil, err
	}
	if observed != nil {
		g.Facts.Ledger = g.Facts.Ledger.Observed(*observed)
	}
	st := g.Facts.Ledger
	return &planResult{
		Session: s.Meta.ID, SessionDir: dir, EventsHash: s.Meta.EventsHash, Evidence: ev, Git: g.Git,
		Ledger: planLedger{HasIntent: st.HasIntent, Records: st.Records, Corrupt: st.Corrupt, Untagged: st.Untagged, UnreadableNewer: st.UnreadableNewer,
			UnmintedSuspends: st.UnmintedSuspends, Suspended: st.Suspended, Stop: st.Stop, End: st.End, Checkpoint: st.Checkpoint,
			Problems: st.Problems},
		Report: verdict.Evaluate(g.Facts, policy),
	}, nil
}

// openPlanWorkspace opens or clones the workspace evidence; with neither flag there is none.
func openPlanWorkspace(ctx context.Context, src planSources) (*evidence.Workspace, planEvidence, func(), error) {
	noop := func() {}
	switch {
	case src.gitDir != "":
		ws, err := evidence.OpenGit(src.gitDir, src.gitRef)
		if err != nil {
			return nil, planEvidence{}, noop, err
		}
		return ws, planEvidence{Kind: "git-dir", Location: src.gitDir, Ref: src.gitRef, Head: ws.Head()}, noop, nil
	case src.gitURL != "":
		tmp, err := os.MkdirTemp("", "agentrewind-evidence-*")
		if err != nil {
			return nil, planEvidence{}, noop, fmt.Errorf("making a directory to clone %s into: %w (set TMPDIR to a writable directory)", src.gitURL, err)
		}
		cleanup := func() { _ = os.RemoveAll(tmp) }
		ws, err := evidence.CloneGitWithAuth(ctx, src.gitURL, src.gitRef, filepath.Join(tmp, "repo"), gitAuthFromEnv())
		if err != nil {
			cleanup()
			return nil, planEvidence{}, noop, err
		}
		return ws, planEvidence{Kind: "git-url", Location: src.gitURL, Ref: src.gitRef, Head: ws.Head()}, cleanup, nil
	case src.gitRef != "":
		return nil, planEvidence{}, noop, errors.New("--git-ref needs --git-dir or --git-url")
	}
	return nil, planEvidence{Kind: "none"}, noop, nil
}

// writePlanResult replaces path atomically with the JSON result.
func writePlanResult(path string, res *planResult) error {
	err := fsutil.WriteFileAtomic(path, 0o644, func(w io.Writer) error { return writeJSON(w, res) })
	if err != nil {
		return fmt.Errorf("writing the result to %s: %w (check that --output-file names a writable path)", path, err)
	}
	return nil
}

// planSummary is the one line a Job prints (and a termination message can hold).
func planSummary(res *planResult) string {
	r := res.Report
	parts := []string{fmt.Sprintf("%s: %s (%s)", res.Session, r.Resume.Verdict, r.Resume.Reason)}
	if r.Resume.ResumeSHA != "" {
		parts = append(parts, "resume at "+short12(r.Resume.ResumeSHA))
	}
	parts = append(parts,
		fmt.Sprintf("%d residual, %d verified", len(r.Resume.Residual), len(r.Resume.Verified)),
		"reachability "+string(r.Reachability.Reachability),
		"rewind "+string(r.Rewind.Decision),
		"convergence "+string(r.Convergence.Verdict),
		"drift "+string(r.Drift.Verdict))
	return strings.Join(parts, "; ")
}

// printPlan renders every verdict as text.
func printPlan(w io.Writer, res *planResult) error {
	p := &planPrinter{w: w}
	r := res.Report
	p.line("session %s (run %s)", res.Session, r.Resume.RunID)
	p.evidence(res)
	l := res.Ledger
	p.line("ledger: %d record(s): %d corrupt, %d untagged, %d too new, %d SUSPEND not minted by the recorder",
		l.Records, l.Corrupt, l.Untagged, l.UnreadableNewer, l.UnmintedSuspends)
	p.resume(res)
	p.line("")
	p.line("REACHABILITY  %s (%s) — %s", r.Reachability.Reachability, r.Reachability.Reason, r.Reachability.Message)
	p.line("CONVERGENCE   %s (%s) — %s", r.Convergence.Verdict, r.Convergence.Reason, r.Convergence.Message)
	p.rewind(res)
	p.line("")
	p.line("DRIFT         %s", r.Drift.Verdict)
	if b := r.Drift.Banner(); b != "" {
		p.line("  %s", b)
	}
	for _, line := range r.Reconciliation.Lines() {
		p.line("%s", line)
	}
	return p.err
}

// planPrinter writes lines and keeps the first error, so printPlan reads top to bottom.
type planPrinter struct {
	w   io.Writer
	err error
}

func (p *planPrinter) line(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
	}
}

func (p *planPrinter) evidence(res *planResult) {
	if res.Git == nil {
		p.line("evidence: the recorded tool stream only — no git re-verification (pass --git-dir or --git-url)")
		return
	}
	p.line("evidence: %s %s at %s (%d commits in ancestry)", res.Evidence.Kind, res.Evidence.Location, short12(res.Git.Head), res.Git.Commits)
}

func (p *planPrinter) resume(res *planResult) {
	rp := res.Report.Resume
	p.line("")
	p.line("RESUME        %s (%s) — %s", rp.Verdict, rp.Reason, rp.Message)
	if rp.ResumeSHA != "" {
		p.line("  re-entry    %s", rp.ResumeSHA)
	} else if rp.ResumeAfterStep != nil {
		p.line("  re-entry    after step %d of the recording", *rp.ResumeAfterStep)
	}
	verified := make([]string, len(rp.Verified))
	for i, s := range rp.Verified {
		verified[i] = s.ID + "@" + short12(s.SHA)
		if s.SHA == "" && s.AtStep != nil {
			verified[i] = fmt.Sprintf("%s@step %d", s.ID, *s.AtStep)
		}
	}
	p.line("  verified    %s", orNone(verified))
	p.line("  residual    %s", orNone(rp.Residual))
	if res.Git == nil {
		return
	}
	for _, c := range res.Git.Steps {
		p.line("  re-adjudicated %-12s %-18s claimed %s", c.Step, c.Reason, short12(c.ClaimedSHA))
	}
	p.line("  lane        %s (advanced: %v, %d unaccounted commit(s))", res.Git.Lane.Reason, res.Git.Lane.Advanced, res.Git.Lane.ForeignCount)
}

func (p *planPrinter) rewind(res *planResult) {
	rw := res.Report.Rewind
	p.line("REWIND        %s (%s) — %s", rw.Decision, rw.Reason, rw.Message)
	lines := rw.Note.Lines()
	if len(lines) == 0 {
		return
	}
	p.line("  no-good note:")
	for _, l := range lines {
		p.line("    %s", l)
	}
}

func orNone(items []string) string {
	if len(items) == 0 {
		return "(none)"
	}
	return strings.Join(items, ", ")
}
