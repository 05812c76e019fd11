package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/syncbuf"
)

// forkEnv is an API server with the CRDs, a namespace and a verified 9-step session "triage" that
// recorded with an agent and an Anthropic key, for the fork tests.
type forkEnv struct {
	t          *testing.T
	c          client.Client
	ns         string
	kubeconfig string
	prompt     string // a system prompt file
}

const forkPrompt = "You are the triage bot. Check CODEOWNERS first.\n"

func newForkEnv(t *testing.T) *forkEnv {
	c, kubeconfig := apiServerWithKubeconfig(t, "forker")
	e := &forkEnv{t: t, c: c, ns: newNamespace(t, c), kubeconfig: kubeconfig, prompt: filepath.Join(t.TempDir(), "prompt.txt")}
	if err := os.WriteFile(e.prompt, []byte(forkPrompt), 0o600); err != nil {
		t.Fatal(err)
	}
	verifiedSession(t, c, e.ns, "triage", 9, v1alpha1.AgentSessionSpec{
		Agent:        v1alpha1.AgentSpec{Image: "agent:1", Args: []string{"--issue", "42"}},
		ProviderKeys: v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: "llm-keys", Key: "anthropic"}}})
	return e
}

// args are the cluster flags, then args.
func (e *forkEnv) args(args ...string) []string {
	return append([]string{"--kubeconfig", e.kubeconfig, "-n", e.ns}, args...)
}

func (e *forkEnv) forkRun(name string) *v1alpha1.ForkRun {
	e.t.Helper()
	var fr v1alpha1.ForkRun
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &fr); err != nil {
		e.t.Fatal(err)
	}
	return &fr
}

// setStatus plays the ForkRun controller: it writes the status of the ForkRun's current generation.
func (e *forkEnv) setStatus(name string, st v1alpha1.ForkRunStatus) {
	e.t.Helper()
	fr := e.forkRun(name)
	st.ObservedGeneration = fr.Generation
	fr.Status = st
	if err := e.c.Status().Update(context.Background(), fr); err != nil {
		e.t.Fatalf("status of ForkRun %s: %v", name, err)
	}
}

// waitForStderr waits until the command's stderr holds want.
func waitForStderr(t *testing.T, stderr *syncbuf.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the command never printed %q to stderr:\n%s", want, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	runningStatus = v1alpha1.ForkRunStatus{Conditions: []metav1.Condition{
		condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonJobRunning, "fork Job fix-abc is running"),
		condition(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning, "fork Job fix-abc is running")}}
	liveUsage = v1alpha1.Usage{InputTokens: new(int64(1200)), OutputTokens: new(int64(80)), CacheCreationInputTokens: new(int64(0)),
		CacheReadInputTokens: new(int64(0)), TotalTokens: new(int64(1280)), CostMicroUSD: new(int64(4800))}
	replayedUsage = v1alpha1.Usage{InputTokens: new(int64(3000)), OutputTokens: new(int64(200)), CacheCreationInputTokens: new(int64(0)),
		CacheReadInputTokens: new(int64(0)), TotalTokens: new(int64(3200)), CostMicroUSD: new(int64(11000))}
)

// finishedStatus is the status of a finished run with outcome, as the controller writes it.
func finishedStatus(outcome v1alpha1.ForkOutcome, div *v1alpha1.Divergence) v1alpha1.ForkRunStatus {
	st := v1alpha1.ForkRunStatus{Outcome: outcome, Usage: v1alpha1.ForkUsage{Live: liveUsage, Replayed: replayedUsage},
		Provenance:      v1alpha1.Provenance{Recorded: new(int64(6)), Live: new(int64(2)), Stub: new(int64(1))},
		ChildSessionRef: v1alpha1.LocalObjectReference{Name: "fix-child-abc"}, Divergences: new(int64(0))}
	msg := "fork Job fix-abc: " + string(outcome)
	if outcome == v1alpha1.OutcomeGoalReached || outcome == v1alpha1.OutcomeCompleted || outcome == v1alpha1.OutcomePassed {
		st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionReady, metav1.ConditionTrue, string(outcome), msg)}
	} else {
		st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionReady, metav1.ConditionFalse, string(outcome), msg),
			condition(v1alpha1.ConditionStalled, metav1.ConditionTrue, string(outcome), msg)}
	}
	if div != nil {
		st.FirstDivergence, st.Divergences = *div, new(int64(1))
	}
	return st
}

// unpricedStatus is st with a live usage the operator could not price.
func unpricedStatus(st v1alpha1.ForkRunStatus) v1alpha1.ForkRunStatus {
	st.Usage.Live.CostMicroUSD, st.Usage.Live.UnpricedModels = nil, []string{"openai/gpt-9", "anthropic/fake-1"}
	return st
}

// TestKubectlForkCreatesTheForkRunOfTheSession checks the ForkRun fork builds: the session, the step,
// the prompt byte for byte, the session's provider keys and its agent left to the controller; an
// --agent-image that keeps the rest of the session's agent; a replay with its suite label; and a
// generated name when --name is not given.
func TestKubectlForkCreatesTheForkRunOfTheSession(t *testing.T) {
	e := newForkEnv(t)
	r := runPlugin(t, e.args("fork", "triage", "--at-step", "4", "--system-file", e.prompt, "--name", "fix-1", "--goal-tool", "add_label",
		"--goal-args", `{"label":"needs-owner-review"}`, "--on-miss", "Stub")...)
	if r.code != 0 || r.stdout != "forkrun.agentrewind.io/fix-1 created\n" {
		t.Fatalf("fork: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got := e.forkRun("fix-1")
	want := v1alpha1.ForkRunSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "triage"}, Mode: v1alpha1.ModeFork,
		Fork: v1alpha1.ForkSpec{AtStep: new(int64(4)), Overrides: v1alpha1.ForkOverrides{System: forkPrompt},
			Tools: v1alpha1.ToolPolicy{OnMatch: v1alpha1.ToolServeRecorded, OnMiss: v1alpha1.ToolMissStub}, DriftPolicy: v1alpha1.DriftStrict,
			ProviderKeys: v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: "llm-keys", Key: "anthropic"}}},
		Goal: v1alpha1.Goal{Tool: "add_label", ArgsMatch: got.Spec.Goal.ArgsMatch}}
	if d := cmp.Diff(want, got.Spec); d != "" {
		t.Errorf("the ForkRun's spec (-want +got):\n%s", d)
	}
	if got.Spec.Goal.ArgsMatch == nil || string(got.Spec.Goal.ArgsMatch.Raw) != `{"label":"needs-owner-review"}` {
		t.Errorf("goal args %v", got.Spec.Goal.ArgsMatch)
	}

	// A new image keeps what else the session's agent says; the prompt comes from stdin; -o yaml
	// prints the created ForkRun, which parses back.
	done, _ := startPlugin(t.Context(), forkPrompt, e.args("fork", "triage", "--at-step", "0", "--system-file", "-", "--agent-image", "agent:2",
		"--anthropic-key", "other-keys/key", "-o", "yaml")...)
	r = <-done
	var printed v1alpha1.ForkRun
	if err := yaml.Unmarshal([]byte(r.stdout), &printed); err != nil || r.code != 0 {
		t.Fatalf("fork -o yaml: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if printed.Kind != "ForkRun" || !strings.HasPrefix(printed.Name, "triage-fork-") || printed.Spec.Fork.Overrides.System != forkPrompt ||
		!strings.Contains(r.stderr, "forkrun.agentrewind.io/"+printed.Name+" created") {
		t.Errorf("fork -o yaml printed %s %s (system %q)\n%s", printed.Kind, printed.Name, printed.Spec.Fork.Overrides.System, r.stderr)
	}
	stored := e.forkRun(printed.Name)
	wantAgent := v1alpha1.AgentSpec{Image: "agent:2", Args: []string{"--issue", "42"}}
	if d := cmp.Diff(wantAgent, stored.Spec.Agent); d != "" {
		t.Errorf("--agent-image: the ForkRun's agent (-want +got):\n%s", d)
	}
	if k := stored.Spec.Fork.ProviderKeys; k != (v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: "other-keys", Key: "key"}}) {
		t.Errorf("--anthropic-key: provider keys %+v", k)
	}

	r = runPlugin(t, e.args("fork", "triage", "--mode", "Replay", "--suite", "nightly", "-o", "json")...)
	var replay v1alpha1.ForkRun
	if err := json.Unmarshal([]byte(r.stdout), &replay); err != nil || r.code != 0 {
		t.Fatalf("fork --mode Replay -o json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if replay.Spec.Mode != v1alpha1.ModeReplay || replay.Labels[LabelSuite] != "nightly" || replay.Spec.Fork.AtStep != nil ||
		!strings.HasPrefix(replay.Name, "triage-replay-") {
		t.Errorf("replay: %s mode %s labels %v", replay.Name, replay.Spec.Mode, replay.Labels)
	}
}

// TestKubectlForkRefusesBadInputNamingIt checks that input fork cannot use is refused before anything
// is created, with an error that names the thing at fault and what to do.
func TestKubectlForkRefusesBadInputNamingIt(t *testing.T) {
	e := newForkEnv(t)
	noAgent := "bare"
	verifiedSession(t, e.c, e.ns, noAgent, 5, v1alpha1.AgentSessionSpec{})
	empty := filepath.Join(t.TempDir(), "empty.txt")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing session", []string{"fork", "nope", "--at-step", "1"}, "AgentSession nope not found in namespace " + e.ns + ": kubectl get agentsessions"},
		{"step past the end", []string{"fork", "triage", "--at-step", "9"}, "--at-step 9 is past the end of session triage: it has 9 steps (0 to 8)"},
		{"no step", []string{"fork", "triage", "--system-file", e.prompt}, "a fork needs --at-step N"},
		{"negative step", []string{"fork", "triage", "--at-step", "-2"}, "--at-step -2: a step is 0 or more"},
		{"unreadable prompt", []string{"fork", "triage", "--at-step", "1", "--system-file", "/nonexistent/prompt.txt"}, "--system-file: reading the system prompt: open /nonexistent/prompt.txt"},
		{"empty prompt", []string{"fork", "triage", "--at-step", "1", "--system-file", empty}, "--system-file " + empty + " is empty"},
		{"no agent", []string{"fork", noAgent, "--at-step", "1"}, "AgentSession bare has no spec.agent to run again: pass --agent-image IMAGE"},
		{"replay with a step", []string{"fork", "triage", "--mode", "Replay", "--at-step", "1"}, "--at-step is for --mode Fork"},
		{"bad mode", []string{"fork", "triage", "--mode", "Live"}, `--mode "Live": use Fork or Replay`},
		{"bad on-miss", []string{"fork", "triage", "--at-step", "1", "--on-miss", "Ignore"}, `--on-miss "Ignore": use Error or Stub`},
		{"goal args not an object", []string{"fork", "triage", "--at-step", "1", "--goal-tool", "t", "--goal-args", "[1]"}, "--goal-args must be a JSON object"},
		{"bad key", []string{"fork", "triage", "--at-step", "1", "--anthropic-key", "llm-keys"}, `--anthropic-key "llm-keys": write it SECRET/KEY`},
		{"bad name", []string{"fork", "triage", "--at-step", "1", "--name", "Fix_1"}, `--name "Fix_1" is not a valid object name`},
		{"bad output", []string{"fork", "triage", "--at-step", "1", "-o", "wide"}, `--output "wide" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(t, e.args(tc.args...)...)
			if r.code != exitError || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, want %d with %q:\n%s", r.code, exitError, tc.want, r.stderr)
			}
		})
	}
	var list v1alpha1.ForkRunList
	if err := e.c.List(context.Background(), &list, client.InNamespace(e.ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("bad input created %d ForkRuns (%v)", len(list.Items), err)
	}
	r := runPlugin(t, e.args("fork", "triage", "--at-step", "1", "--name", "taken")...)
	if r.code != 0 {
		t.Fatalf("fork: %s", r.stderr)
	}
	if r = runPlugin(t, e.args("fork", "triage", "--at-step", "1", "--name", "taken")...); r.code != exitError ||
		!strings.Contains(r.stderr, "ForkRun taken already exists in namespace "+e.ns+": pick another --name") {
		t.Errorf("a taken name: exit %d\n%s", r.code, r.stderr)
	}
}

// TestKubectlForkWaitFollowsTheRunToItsOutcome runs fork --wait while the test plays the controller:
// each state the run passes through is printed to stderr as it happens, the summary of the final
// status to stdout (or as yaml that parses back), and the exit code says how the run ended.
func TestKubectlForkWaitFollowsTheRunToItsOutcome(t *testing.T) {
	e := newForkEnv(t)
	diverged := &v1alpha1.Divergence{Step: new(int64(5)), Kind: v1alpha1.CallModel, Reason: "NoRecordedCall", ActualCallSite: "anthropic.messages"}
	stalled := v1alpha1.ForkRunStatus{Conditions: []metav1.Condition{
		condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec, "no agent to run"),
		condition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec, "spec.fork.driftPolicy Passthrough is not supported")}}
	for _, tc := range []struct {
		name    string
		final   v1alpha1.ForkRunStatus
		output  string
		code    int
		summary []string
	}{
		{"goal reached", finishedStatus(v1alpha1.OutcomeGoalReached, nil), "text", 0, []string{
			"forkrun/goal-reached: GoalReached (GoalReached)", "session:          triage, forked at step 4", "reached goal:     yes (tool add_label)",
			"diverged:         no", "answers:          6 recorded, 2 live, 1 stubbed", "tokens live:      1280 (1200 in, 80 out), $0.0048",
			"tokens replayed:  3200 (3000 in, 200 out), $0.0110 (recorded, not spent again)", "child session:    fix-child-abc"}},
		{"diverged", finishedStatus(v1alpha1.OutcomeDiverged, diverged), "text", exitDrift, []string{
			"forkrun/diverged: Diverged (Diverged)", "diverged:         step 5: ModelCall NoRecordedCall at anthropic.messages"}},
		{"goal missed", finishedStatus(v1alpha1.OutcomeGoalMissed, nil), "text", exitGoalMissed, []string{"reached goal:     no (tool add_label"}},
		{"unpriced", unpricedStatus(finishedStatus(v1alpha1.OutcomeGoalReached, nil)), "text", 0, []string{
			"tokens live:      1280 (1200 in, 80 out), cost unknown: no price for openai/gpt-9, anthropic/fake-1 (the chart's prices value adds one)"}},
		{"failed", finishedStatus(v1alpha1.OutcomeFailed, nil), "text", exitRunFailed, []string{"forkrun/failed: Failed (Failed)"}},
		{"stalled", stalled, "text", exitRunFailed, []string{"forkrun/stalled: Stalled (InvalidSpec)", "message:          spec.fork.driftPolicy Passthrough is not supported"}},
		{"diverged yaml", finishedStatus(v1alpha1.OutcomeDiverged, diverged), "yaml", exitDrift, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			done, stderr := startPlugin(t.Context(), "", e.args("fork", "triage", "--at-step", "4", "--system-file", e.prompt, "--name", name,
				"--goal-tool", "add_label", "--wait", "-o", tc.output)...)
			waitForStderr(t, stderr, "forkrun/"+name+": Pending")
			e.setStatus(name, runningStatus)
			waitForStderr(t, stderr, "forkrun/"+name+": JobRunning: fork Job fix-abc is running")
			e.setStatus(name, tc.final)
			r := <-done
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", r.code, tc.code, r.stdout, r.stderr)
			}
			for _, want := range tc.summary {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the summary lacks %q:\n%s", want, r.stdout)
				}
			}
			if tc.output != "yaml" {
				return
			}
			var sum forkSummary
			if err := yaml.Unmarshal([]byte(r.stdout), &sum); err != nil {
				t.Fatalf("--wait -o yaml does not parse: %v\n%s", err, r.stdout)
			}
			want := forkSummary{ForkRun: name, Namespace: e.ns, Session: "triage", Mode: v1alpha1.ModeFork, AtStep: new(int64(4)),
				Outcome: v1alpha1.OutcomeDiverged, Ready: "False", Reason: "Diverged", Message: "fork Job fix-abc: Diverged",
				DivergedAtStep: new(int64(5)), FirstDivergence: diverged, Divergences: new(int64(1)), Usage: tc.final.Usage,
				Provenance: tc.final.Provenance, ChildSession: "fix-child-abc"}
			if d := cmp.Diff(want, sum, cmp.AllowUnexported(forkSummary{})); d != "" {
				t.Errorf("--wait -o yaml summary (-want +got):\n%s", d)
			}
		})
	}
}

// TestKubectlForkWaitGivesUpAtItsTimeout checks that --timeout ends the wait, not the run, and says so.
func TestKubectlForkWaitGivesUpAtItsTimeout(t *testing.T) {
	e := newForkEnv(t)
	start := time.Now()
	r := runPlugin(t, e.args("fork", "triage", "--at-step", "2", "--name", "slow", "--wait", "--timeout", "2s")...)
	if r.code != exitError || !strings.Contains(r.stderr, "ForkRun slow has not finished within --timeout 2s; it goes on running") {
		t.Errorf("exit %d\n%s", r.code, r.stderr)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("a 2s --timeout returned after %s", took)
	}
	e.forkRun("slow") // still there
}

// TestForkExitCodeOfEveryOutcome pins fork --wait's exit code for each outcome a ForkRun can end with,
// and for a run stalled before it had one.
func TestForkExitCodeOfEveryOutcome(t *testing.T) {
	for outcome, want := range map[v1alpha1.ForkOutcome]int{
		v1alpha1.OutcomeGoalReached: 0, v1alpha1.OutcomeCompleted: 0, v1alpha1.OutcomePassed: 0,
		v1alpha1.OutcomeDiverged: exitDrift, v1alpha1.OutcomeGoalMissed: exitGoalMissed, v1alpha1.OutcomeFailed: exitRunFailed,
		"": exitRunFailed,
	} {
		got := 0
		if err := (forkSummary{ForkRun: "f", Outcome: outcome}).exitError(); err != nil {
			got = exitCode(err)
		}
		if got != want {
			t.Errorf("outcome %q: exit %d, want %d", outcome, got, want)
		}
	}
}

// TestForkGeneratedNamesStayLabelValues checks the generateName of a long session's ForkRun: with the
// API server's 5 characters it is still a label value, which its Job's pods need.
func TestForkGeneratedNamesStayLabelValues(t *testing.T) {
	long := strings.Repeat("s", 70)
	for _, session := range []string{"triage", long, strings.Repeat("a.", 40)} {
		prefix := generatedPrefix(session, "replay")
		if n := len(prefix) + 5; n > maxForkRunName || !strings.HasSuffix(prefix, "-") || !strings.HasPrefix(prefix, session[:min(len(session), 40)]) {
			t.Errorf("generatedPrefix(%q) = %q: %d characters with the suffix", session, prefix, n)
		}
	}
}
