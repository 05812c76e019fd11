package verdict_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/evidence"
	"github.com/agentrewind/agentrewind/internal/engine/evidence/gittest"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// The fixtures below are session logs as the recorder writes them: the agent's ledger records are
// AGENT_AUTHORED, the recorder's ANCHOR, SUSPEND and END are OS_RECORDED, tool answers THIRD_PARTY.

func modelCall(msgs ...string) session.Event {
	req := &session.Request{Model: "m", System: "sys"}
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		req.Messages = append(req.Messages, session.Message{Role: "user", Content: b})
	}
	return session.Event{Kind: session.KindModelCall, Request: req, Author: session.AuthorThirdParty}
}

func toolCall(name string, args, result any) session.Event {
	a, _ := json.Marshal(args)
	r, _ := json.Marshal(result)
	return session.Event{Kind: session.KindToolCall, Name: name, Args: a, Result: r, Author: session.AuthorThirdParty}
}

func agentSays(r ledger.Record) session.Event {
	return session.Event{Kind: session.KindLedger, CallSite: "ledger", Author: session.AuthorAgent, Ledger: r.JSON()}
}

func recorderSays(r ledger.Record) session.Event {
	return session.Event{Kind: session.KindLedger, CallSite: "recorder", Author: session.AuthorRecorder, Ledger: r.JSON()}
}

// anchorOf is the recorder's ANCHOR of turn, stamped with the digest of the model call that sent it.
func anchorOf(turn int, call session.Event) session.Event {
	return recorderSays(ledger.Anchor(turn, evidence.TurnDigest(call.Request)))
}

func suspendOf(turn int, call session.Event) session.Event {
	return recorderSays(ledger.Suspend(turn, evidence.TurnDigest(call.Request), ""))
}

func ended(how ledger.EndHow) session.Event {
	return recorderSays(ledger.End(ledger.RunEnd{How: how}))
}

func write(path string) session.Event {
	return toolCall("write_file", map[string]any{"path": path}, map[string]any{"ok": true})
}

// numbered gives the events their log steps, as the recorder would.
func numbered(events []session.Event) []session.Event {
	out := make([]session.Event, len(events))
	for i, ev := range events {
		ev.Step, ev.Seq, ev.Lane = int64(i), int64(i), "0"
		out[i] = ev
	}
	return out
}

// judged gathers the facts of a log (against the repository when repo is not nil) and evaluates them.
func judged(t *testing.T, events []session.Event, repo *gittest.Repo) (verdict.Facts, verdict.Report) {
	t.Helper()
	var ws *evidence.Workspace
	if repo != nil {
		var err error
		if ws, err = evidence.OpenGit(repo.Dir, ""); err != nil {
			t.Fatal(err)
		}
	}
	g, err := evidence.Gather(&session.Session{Meta: session.Meta{ID: "run"}, Events: numbered(events)}, ws, verdict.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	return g.Facts, verdict.Evaluate(g.Facts, verdict.DefaultPolicy())
}

// outcome is what a user reads off a judged run.
type outcome struct {
	Verdict      resume.Verdict
	Verified     []string
	Residual     []string
	Suspended    bool
	Stop         ledger.StopReason
	Reachability resume.Reachability
	Anchored     bool
	RulesVersion int
}

func outcomeOf(f verdict.Facts, r verdict.Report) outcome {
	o := outcome{Verdict: r.Resume.Verdict, Residual: r.Resume.Residual, Suspended: r.Reachability.Suspended,
		Stop: r.Reachability.Stop, Reachability: r.Reachability.Reachability, Anchored: f.Ledger.Checkpoint.Present,
		RulesVersion: r.Resume.RulesVersion}
	for _, s := range r.Resume.Verified {
		o.Verified = append(o.Verified, s.ID)
	}
	return o
}

var twoSteps = ledger.Intent("run", "split the library", "", ledger.Step{ID: "s1", Text: "write lib/a.go"},
	ledger.Step{ID: "s2", Text: "write lib/b.go"})

// TestTheRunsEndDecidesWhetherItIsSuspended folds recordings without a workspace, so the recorder's
// rung alone verifies steps. An anchor never parks a run; a run is suspended only when it stopped
// without finishing: a pause with no work after it, or an END saying the agent failed or was killed.
func TestTheRunsEndDecidesWhetherItIsSuspended(t *testing.T) {
	turn0, turn1 := modelCall("split the library"), modelCall("split the library", "lib/a.go written")
	cases := []struct {
		name   string
		events []session.Event
		want   outcome
	}{
		{
			// The demo's run: an anchor mid-run, every step witnessed, a clean end. COMPLETE and
			// collectible, and the anchor is still there for a rewind.
			name: "anchor then finish",
			events: []session.Event{agentSays(twoSteps), turn0, anchorOf(0, turn0), write("lib/a.go"), turn1,
				write("lib/b.go"), ended(ledger.EndFinished)},
			want: outcome{Verdict: resume.Complete, Verified: []string{"s1", "s2"}, Residual: []string{}, Stop: ledger.StopFinished,
				Reachability: resume.Collectible, Anchored: true, RulesVersion: resume.RulesVersion},
		},
		{
			// The anchor is the run's last act: were it a pause, the run would read as parked.
			name:   "anchor as the last act, then finish",
			events: []session.Event{agentSays(twoSteps), turn0, write("lib/a.go"), write("lib/b.go"), anchorOf(0, turn0), ended(ledger.EndFinished)},
			want: outcome{Verdict: resume.Complete, Verified: []string{"s1", "s2"}, Residual: []string{}, Stop: ledger.StopFinished,
				Reachability: resume.Collectible, Anchored: true, RulesVersion: resume.RulesVersion},
		},
		{
			name: "anchor then crash",
			events: []session.Event{agentSays(twoSteps), turn0, anchorOf(0, turn0), write("lib/a.go"), turn1,
				ended(ledger.EndKilled)},
			want: outcome{Verdict: resume.Resumable, Verified: []string{"s1"}, Residual: []string{"s2"}, Suspended: true,
				Stop: ledger.StopKilled, Reachability: resume.Reachable, Anchored: true, RulesVersion: resume.RulesVersion},
		},
		{
			name: "anchor then a non-zero exit",
			events: []session.Event{agentSays(twoSteps), turn0, anchorOf(0, turn0), write("lib/a.go"), turn1,
				ended(ledger.EndFailed)},
			want: outcome{Verdict: resume.Resumable, Verified: []string{"s1"}, Residual: []string{"s2"}, Suspended: true,
				Stop: ledger.StopFailed, Reachability: resume.Reachable, Anchored: true, RulesVersion: resume.RulesVersion},
		},
		{
			name:   "anchor then the deadline",
			events: []session.Event{agentSays(twoSteps), turn0, anchorOf(0, turn0), turn1, ended(ledger.EndDeadline)},
			want: outcome{Verdict: resume.Resumable, Residual: []string{"s1", "s2"}, Suspended: true,
				Stop: ledger.StopDeadline, Reachability: resume.Reachable, Anchored: true, RulesVersion: resume.RulesVersion},
		},
		{
			name: "pause then resume then finish",
			events: []session.Event{agentSays(twoSteps), turn0, write("lib/a.go"), suspendOf(0, turn0), turn1,
				write("lib/b.go"), ended(ledger.EndFinished)},
			want: outcome{Verdict: resume.Complete, Verified: []string{"s1", "s2"}, Residual: []string{}, Stop: ledger.StopFinished,
				Reachability: resume.Collectible, Anchored: true, RulesVersion: resume.RulesVersion},
		},
		{
			// A sidecar proxy only sees that it was stopped; the pending pause is what says the run
			// stopped short.
			name:   "pause then stop",
			events: []session.Event{agentSays(twoSteps), turn0, write("lib/a.go"), suspendOf(0, turn0), ended(ledger.EndStopped)},
			want: outcome{Verdict: resume.Resumable, Verified: []string{"s1"}, Residual: []string{"s2"}, Suspended: true,
				Stop: ledger.StopSuspended, Reachability: resume.Reachable, Anchored: true, RulesVersion: resume.RulesVersion},
		},
		{
			// Recorded before anchors had their own record: the run went on after the stamp, so it was
			// never parked, and nothing says how it ended.
			name:   "an older recording whose checkpoint was a SUSPEND mid-run",
			events: []session.Event{agentSays(twoSteps), turn0, suspendOf(0, turn0), write("lib/a.go"), turn1},
			want: outcome{Verdict: resume.Resumable, Verified: []string{"s1"}, Residual: []string{"s2"},
				Stop: ledger.StopUnrecorded, Reachability: resume.Reachable, Anchored: true, RulesVersion: resume.RulesVersion},
		},
		{
			// The agent cannot declare its own crash finished.
			name: "an END the agent wrote is ignored",
			events: []session.Event{agentSays(twoSteps), turn0, write("lib/a.go"), agentSays(ledger.End(ledger.RunEnd{How: ledger.EndFinished})),
				ended(ledger.EndKilled)},
			want: outcome{Verdict: resume.Resumable, Verified: []string{"s1"}, Residual: []string{"s2"}, Suspended: true,
				Stop: ledger.StopKilled, Reachability: resume.Reachable, RulesVersion: resume.RulesVersion},
		},
		{
			name:   "no plan",
			events: []session.Event{turn0, write("lib/a.go"), ended(ledger.EndFinished)},
			want: outcome{Verdict: resume.Unresumable, Residual: []string{}, Stop: ledger.StopFinished,
				Reachability: resume.Collectible, RulesVersion: resume.RulesVersion},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, r := judged(t, tc.events, nil)
			if diff := cmp.Diff(tc.want, outcomeOf(f, r)); diff != "" {
				t.Errorf("outcome (-want +got):\n%s\nmessage: %s", diff, r.Resume.Message)
			}
		})
	}
}

// TestAnAnchorStaysAnchorForTheRewindAndTheOperator: an ANCHOR is found where a SUSPEND stamp was: by
// the fold (the rewind verdict's checkpoint) and by MintedAnchors (the operator's Checkpoints).
func TestAnAnchorStaysAnchorForTheRewindAndTheOperator(t *testing.T) {
	turn0, turn1 := modelCall("go"), modelCall("go", "more")
	events := numbered([]session.Event{agentSays(twoSteps), turn0, turn1, anchorOf(1, turn1), ended(ledger.EndFinished)})
	st := ledger.Fold(events)
	if !st.Checkpoint.Present || st.Checkpoint.TurnIndex != 1 || st.Suspended {
		t.Fatalf("checkpoint %+v suspended %v, want turn 1 anchored and the run not suspended", st.Checkpoint, st.Suspended)
	}
	anchors, total := task.MintedAnchors(events)
	if total != 1 || anchors[0].Step != 3 || anchors[0].TurnIndex != 1 {
		t.Fatalf("anchors %+v (%d), want the ANCHOR at step 3", anchors, total)
	}
	forged := numbered([]session.Event{turn0, agentSays(ledger.Anchor(0, evidence.TurnDigest(turn0.Request)))})
	if st := ledger.Fold(forged); st.Checkpoint.Present || st.UnmintedAnchors != 1 {
		t.Fatalf("an agent-written ANCHOR anchored %+v", st.Checkpoint)
	}
	if _, total := task.MintedAnchors(forged); total != 0 {
		t.Fatalf("an agent-written ANCHOR was listed")
	}
}

// TestOnlyTheRecordersRungAndGitVerifyAStep: the agent's STEP_CLAIMED and STEP_VERIFIED never count by
// themselves. Without a workspace the recorded tool stream decides; with one, git decides where the
// recorder is silent and both must agree where both speak.
func TestOnlyTheRecordersRungAndGitVerifyAStep(t *testing.T) {
	type want struct {
		verdict  resume.Verdict
		verified map[string]resume.Rung
		residual []string
	}
	threeSteps := func(start string) ledger.Record {
		return ledger.Intent("run", "split the library", start, ledger.Step{ID: "s1", Text: "write lib/a.go"},
			ledger.Step{ID: "s2", Text: "write lib/b.go"}, ledger.Step{ID: "s3", Text: "write lib/c.go"})
	}
	cases := []struct {
		name   string
		git    bool
		events func(repo *gittest.Repo) []session.Event
		want   want
	}{
		{
			name: "witnessed counts, claimed and self-verified do not",
			events: func(*gittest.Repo) []session.Event {
				return []session.Event{agentSays(threeSteps("")), modelCall("go"), write("lib/a.go"),
					agentSays(ledger.Claimed("s1", "")), agentSays(ledger.Claimed("s2", "")),
					agentSays(ledger.Verified("s3", strings.Repeat("c", 40), resume.ViaFilePath)), ended(ledger.EndFinished)}
			},
			want: want{resume.Resumable, map[string]resume.Rung{"s1": resume.RungRecorder}, []string{"s2", "s3"}},
		},
		{
			name: "the named tool's successful answer witnesses a step that writes nothing",
			events: func(*gittest.Repo) []session.Event {
				intent := ledger.Intent("run", "triage", "", ledger.Step{ID: "search", Text: "search related issues", Tools: []string{"search_issues"}},
					ledger.Step{ID: "label", Text: "label the issue", Tools: []string{"add_label"}})
				return []session.Event{agentSays(intent), modelCall("go"), toolCall("search_issues", map[string]any{"q": "crash"}, []string{"#41"}),
					toolCall("add_label", map[string]any{"label": "bug"}, map[string]any{"ok": false}), agentSays(ledger.Claimed("label", "")),
					ended(ledger.EndFinished)}
			},
			want: want{resume.Resumable, map[string]resume.Rung{"search": resume.RungRecorder}, []string{"label"}},
		},
		{
			name: "git-verified, witnessed or not",
			git:  true,
			events: func(repo *gittest.Repo) []session.Event {
				start := repo.Commit("initial", map[string]string{"README.md": "x"})
				a := repo.Commit("s1", map[string]string{"lib/a.go": "package lib"})
				b := repo.Commit("s2", map[string]string{"lib/b.go": "package lib"})
				return []session.Event{recorderSays(ledger.Start(start)), agentSays(threeSteps(start)), modelCall("go"), write("lib/a.go"),
					agentSays(ledger.Verified("s1", a, resume.ViaFilePath)), agentSays(ledger.Verified("s2", b, resume.ViaFilePath)),
					ended(ledger.EndFinished)}
			},
			want: want{resume.Resumable, map[string]resume.Rung{"s1": resume.RungBoth, "s2": resume.RungGit}, []string{"s3"}},
		},
		{
			// The write happened but was never committed: with a workspace, a step whose commit is not
			// in ancestry is not done, however well the recorder saw it.
			name: "witnessed but not in ancestry",
			git:  true,
			events: func(repo *gittest.Repo) []session.Event {
				start := repo.Commit("initial", map[string]string{"README.md": "x"})
				return []session.Event{recorderSays(ledger.Start(start)), agentSays(threeSteps(start)), modelCall("go"), write("lib/a.go"),
					write("lib/b.go"), write("lib/c.go"), ended(ledger.EndFinished)}
			},
			want: want{resume.Resumable, map[string]resume.Rung{}, []string{"s1", "s2", "s3"}},
		},
		{
			// Git holds the step's commit, but the last run of its tests failed at the boundary.
			name: "in ancestry but contradicted by the recorder",
			git:  true,
			events: func(repo *gittest.Repo) []session.Event {
				start := repo.Commit("initial", map[string]string{"README.md": "x"})
				c := repo.Commit("tests", map[string]string{"lib/a_test.go": "package lib"})
				intent := ledger.Intent("run", "test the library", start, ledger.Step{ID: "t1", Text: "run the tests in lib/a_test.go"})
				return []session.Event{recorderSays(ledger.Start(start)), agentSays(intent), modelCall("go"),
					toolCall("run_command", map[string]any{"command": "go test ./lib"}, map[string]any{"exitCode": 1}),
					agentSays(ledger.Verified("t1", c, resume.ViaFilePath)), ended(ledger.EndFinished)}
			},
			want: want{resume.Resumable, map[string]resume.Rung{}, []string{"t1"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var repo *gittest.Repo
			if tc.git {
				repo = gittest.New(t)
			}
			_, r := judged(t, tc.events(repo), repo)
			got := want{verdict: r.Resume.Verdict, verified: map[string]resume.Rung{}, residual: r.Resume.Residual}
			for _, s := range r.Resume.Verified {
				got.verified[s.ID] = s.Rung
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s\nmessage: %s", diff, r.Resume.Message)
			}
		})
	}
}

// TestAResumePointWithoutGitIsAStepOfTheRecording: a run killed after step 2 of 3, recorded without a
// workspace, re-enters after the call that witnessed step 2.
func TestAResumePointWithoutGitIsAStepOfTheRecording(t *testing.T) {
	intent := ledger.Intent("run", "g", "", ledger.Step{ID: "s1", Text: "write a.go"}, ledger.Step{ID: "s2", Text: "write b.go"},
		ledger.Step{ID: "s3", Text: "write c.go"})
	events := []session.Event{agentSays(intent), modelCall("go"), write("a.go"), modelCall("go", "on"), write("b.go"), ended(ledger.EndKilled)}
	_, r := judged(t, events, nil)
	if r.Resume.Verdict != resume.Resumable || r.Resume.ResumeAfterStep == nil || *r.Resume.ResumeAfterStep != 4 {
		t.Fatalf("plan %+v, want RESUMABLE after step 4 (the write of b.go)", r.Resume)
	}
	if !strings.Contains(r.Resume.Message, "after step 4 of the recording") {
		t.Errorf("message %q does not name the re-entry step", r.Resume.Message)
	}
}

// TestNoPlanSaysSoInWords: a run that declared nothing is UNRESUMABLE and the message says why in words
// a user reading kubectl understands.
func TestNoPlanSaysSoInWords(t *testing.T) {
	_, r := judged(t, []session.Event{modelCall("hi"), ended(ledger.EndFinished)}, nil)
	if r.Resume.Verdict != resume.Unresumable || r.Resume.Reason != resume.ReasonNoIntent ||
		!strings.HasPrefix(r.Resume.Message, "no plan declared") || !r.Reachability.Collectible() {
		t.Fatalf("plan %s/%s %q, reachability %s", r.Resume.Verdict, r.Resume.Reason, r.Resume.Message, r.Reachability.Reachability)
	}
}
