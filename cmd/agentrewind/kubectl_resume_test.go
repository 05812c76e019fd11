package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

const resumeSHA = "0123456789abcdef0123456789abcdef01234567"

// resumableStatus is a ResumePlan status as the controller writes it for a run that can resume: two
// steps verified, two residual, the transcript to be rewound to turn 3.
func resumableStatus() v1alpha1.ResumePlanStatus {
	return v1alpha1.ResumePlanStatus{ObservedGeneration: 1,
		Conditions: []metav1.Condition{condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerdictComputed, "verdicts computed")},
		Verdict:    v1alpha1.VerdictResumable, Reason: "ResidualRemains", Message: "2 of 4 declared steps remain",
		ResumeSHA: resumeSHA, ResidualSteps: new(int32(2)),
		Residual: []v1alpha1.PlanStep{{ID: "s3"}, {ID: "s4"}},
		Verified: []v1alpha1.PlanStep{{ID: "s1", SHA: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, {ID: "s2", SHA: resumeSHA}},
		Stop:     v1alpha1.RunInterrupted,
		Rewind: v1alpha1.RewindPlan{Decision: v1alpha1.DecisionRewind, Reason: "RewindToMintedCheckpoint", Message: "the tests failed after turn 3",
			RewindToTurn: new(int32(3)), DroppedTurns: new(int32(2)), TranscriptDigest: strings.Repeat("cd", 32),
			NoGoodNote: []string{"do not retry: go test ./... failed (exit 1)"}},
		Reachability: v1alpha1.ReachabilityStatus{State: v1alpha1.Reachable, Reason: "ResumableRetained", Message: "a resumable run is kept however old"},
		Convergence: v1alpha1.Convergence{Verdict: v1alpha1.ConvergenceConverging, Reason: "ResidualReachedNewLow", Window: new(int32(4)),
			Observations: new(int32(4)), Changes: new(int32(2))},
		Drift:          v1alpha1.PlanDrift{Verdict: v1alpha1.DriftOnPlan},
		Reconciliation: v1alpha1.Reconciliation{Promised: new(int32(4)), MarkedDone: new(int32(3)), Evidenced: new(int32(2)), ClaimedWithoutEvidence: []string{"s3"}},
		Evidence:       v1alpha1.PlanEvidence{EventsHash: strings.Repeat("ef", 32), ResolvedCommit: resumeSHA, Plan: v1alpha1.PlanDeclared},
		EvaluatedAt:    &metav1.Time{Time: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)},
	}
}

// resumePlan creates a ResumePlan of session with status st (none when st is nil).
func resumePlan(t *testing.T, c client.Client, ns, name, session string, st *v1alpha1.ResumePlanStatus) {
	t.Helper()
	rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: session}}}
	ctx := context.Background()
	if err := c.Create(ctx, rp); err != nil {
		t.Fatal(err)
	}
	if st == nil {
		return
	}
	rp.Status = *st
	if err := c.Status().Update(ctx, rp); err != nil {
		t.Fatalf("status of ResumePlan %s: %v", name, err)
	}
}

// TestKubectlResumeSaysThePlanInWords runs resume against ResumePlans the way the controller writes
// them: the verdict, where to re-enter, the steps, the rewind and what to do next in words; the
// status itself with -o json|yaml; the plan picked by --plan, or asked for when there are several; and
// an error naming what is missing when there is no plan or no verdict yet.
func TestKubectlResumeSaysThePlanInWords(t *testing.T) {
	c, kubeconfig := apiServerWithKubeconfig(t, "resumer")
	ns := newNamespace(t, c)
	for _, s := range []string{"triage", "done", "fresh", "busy", "twice"} {
		verifiedSession(t, c, ns, s, 9, v1alpha1.AgentSessionSpec{})
	}
	st := resumableStatus()
	resumePlan(t, c, ns, "triage", "triage", &st)
	complete := v1alpha1.ResumePlanStatus{ObservedGeneration: 1,
		Conditions: []metav1.Condition{condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerdictComputed, "verdicts computed")},
		Verdict:    v1alpha1.VerdictComplete, Reason: "AllStepsVerified", ResidualSteps: new(int32(0)), Stop: v1alpha1.RunInterrupted,
		Rewind: v1alpha1.RewindPlan{Decision: v1alpha1.DecisionNoRewind, Reason: "NothingToRewind"}}
	resumePlan(t, c, ns, "done-by-hand", "done", &complete)
	busy := v1alpha1.ResumePlanStatus{Conditions: []metav1.Condition{
		condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonJobRunning, "resume-plan Job busy-rp-abc is running"),
		condition(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning, "resume-plan Job busy-rp-abc is running")}}
	resumePlan(t, c, ns, "busy", "busy", &busy)
	resumePlan(t, c, ns, "twice-a", "twice", nil)
	resumePlan(t, c, ns, "twice-b", "twice", nil)
	args := func(a ...string) []string {
		return append([]string{"resume", "--kubeconfig", kubeconfig, "-n", ns}, a...)
	}

	r := runPlugin(t, args("triage")...)
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"resumeplan/triage (session triage): Resumable (ResidualRemains)\n  2 of 4 declared steps remain\n",
		"Where to re-enter:  commit " + resumeSHA + "\n",
		"How it stopped:     interrupted: nothing recorded says how the agent ended (its recorder died or was stopped first)\n",
		"Verified steps:     2: s1 @ aaaaaaaaaaaa, s2 @ 0123456789ab\n",
		"Residual steps:     2: s3, s4\n",
		"Transcript:         rewind to turn 3, dropping 2 turn(s) after it (checkpoint digest cdcdcdcdcdcd) — the tests failed after turn 3\n",
		"| do not retry: go test ./... failed (exit 1)\n",
		"Garbage collection: Reachable (ResumableRetained) — a resumable run is kept however old\n",
		"Plan vs evidence:   4 promised, 3 marked done, 2 evidenced\n",
		"claimed done without evidence: s3\n",
		"Next: check out commit 0123456789ab in the agent's workspace, then rewind the agent's transcript to turn 3 and hand it the no-good note above, then restart the agent on the residual steps (s3, s4).\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("resume lacks %q:\n%s", want, r.stdout)
		}
	}

	for _, format := range []string{"json", "yaml"} {
		r = runPlugin(t, args("triage", "-o", format)...)
		var got v1alpha1.ResumePlanStatus
		var err error
		if format == "json" {
			err = json.Unmarshal([]byte(r.stdout), &got)
		} else {
			err = yaml.Unmarshal([]byte(r.stdout), &got)
		}
		if err != nil || r.code != 0 {
			t.Fatalf("resume -o %s: exit %d, %v\n%s", format, r.code, err, r.stdout)
		}
		want := resumableStatus()
		// The condition's time is when the test wrote it, second-precise, and want's is now: a loaded
		// machine puts seconds between them.
		if d := cmp.Diff(want, got, cmp.Comparer(func(a, b metav1.Time) bool { return a.Sub(b.Time).Abs() < time.Minute })); d != "" {
			t.Errorf("resume -o %s is not the status (-want +got):\n%s", format, d)
		}
	}

	// A plan made by hand, found by its sessionRef.
	if r = runPlugin(t, args("done")...); r.code != 0 || !strings.Contains(r.stdout, "resumeplan/done-by-hand (session done): Complete (AllStepsVerified)") ||
		!strings.Contains(r.stdout, "Transcript:         keep it as it is (NothingToRewind)") ||
		!strings.Contains(r.stdout, "Next: nothing to resume: every declared step is verified.") {
		t.Errorf("resume of a session with a hand-made plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no session", args("nope"), "AgentSession nope not found in namespace " + ns},
		{"no plan yet", args("fresh"), "no ResumePlan judges session fresh yet: the operator makes one named fresh once the session is verified"},
		{"no verdict yet", args("busy"), "ResumePlan busy has no verdict yet (JobRunning): resume-plan Job busy-rp-abc is running"},
		{"several plans", args("twice"), "session twice has 2 ResumePlans (twice-a, twice-b): pick one with --plan"},
		{"plan of another session", args("twice", "--plan", "triage"), "ResumePlan triage judges session triage, not twice"},
		{"missing plan", args("twice", "--plan", "twice-c"), "ResumePlan twice-c not found in namespace " + ns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(t, tc.args...)
			if r.code != exitError || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, want %d with %q:\n%s%s", r.code, exitError, tc.want, r.stdout, r.stderr)
			}
		})
	}
	if r = runPlugin(t, args("twice", "--plan", "twice-b")...); r.code != exitError || !strings.Contains(r.stdout, "resumeplan/twice-b (session twice): no verdict yet") {
		t.Errorf("resume --plan twice-b: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
