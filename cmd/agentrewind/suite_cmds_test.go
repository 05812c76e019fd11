package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/devenv"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

// apiServerWithKubeconfig starts a real API server with the CRDs for the test and returns a client and
// the path of a kubeconfig of user, an administrator, for the command under test.
func apiServerWithKubeconfig(t *testing.T, user string) (client.Client, string) {
	t.Helper()
	api := startAPIServer(t)
	return api.Client, kubeconfigOf(t, api, envtest.User{Name: user, Groups: []string{"system:masters"}})
}

// startAPIServer starts a real API server with the CRDs, stopped when the test ends.
func startAPIServer(t *testing.T) *devenv.APIServer {
	t.Helper()
	api, err := testenv.StartAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Stop() })
	return api
}

// kubeconfigOf writes a kubeconfig of user on api and returns its path.
func kubeconfigOf(t *testing.T, api *devenv.APIServer, user envtest.User) string {
	t.Helper()
	u, err := api.Environment().AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// TestSuiteStatusReadsTheSuitesForkRuns runs `agentrewind suite status` against a real API server
// holding ForkRuns with the statuses the controller writes (the CRD's rules admit only consistent
// ones): a suite whose runs all passed exits 0; one with a diverged or unfinished run exits 3 and
// names the first divergence; a suite with no ForkRuns exits 1.
func TestSuiteStatusReadsTheSuitesForkRuns(t *testing.T) {
	c, kubeconfig := apiServerWithKubeconfig(t, "suite-reader")
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "suite-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cond := func(typ string, st metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: reason, LastTransitionTime: metav1.Now(), ObservedGeneration: 1}
	}
	run := func(name, suite string, outcome v1alpha1.ForkOutcome, div *v1alpha1.Divergence) {
		t.Helper()
		fr := &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name, Labels: map[string]string{LabelSuite: suite}},
			Spec: v1alpha1.ForkRunSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "golden"}, Mode: v1alpha1.ModeReplay}}
		if err := c.Create(ctx, fr); err != nil {
			t.Fatal(err)
		}
		switch {
		case outcome == "":
			fr.Status.Conditions = []metav1.Condition{cond(v1alpha1.ConditionReady, metav1.ConditionFalse, "JobRunning"),
				cond(v1alpha1.ConditionReconciling, metav1.ConditionTrue, "JobRunning")}
		case outcome == v1alpha1.OutcomePassed:
			fr.Status.Conditions = []metav1.Condition{cond(v1alpha1.ConditionReady, metav1.ConditionTrue, string(outcome))}
		default:
			fr.Status.Conditions = []metav1.Condition{cond(v1alpha1.ConditionReady, metav1.ConditionFalse, string(outcome)),
				cond(v1alpha1.ConditionStalled, metav1.ConditionTrue, string(outcome))}
		}
		fr.Status.Outcome = outcome
		if div != nil {
			fr.Status.FirstDivergence = *div
		}
		if err := c.Status().Update(ctx, fr); err != nil {
			t.Fatalf("status of %s: %v", name, err)
		}
	}
	drift := &v1alpha1.Divergence{Step: new(int64(4)), Kind: v1alpha1.CallModel, Reason: "NoRecordedCall", ActualCallSite: "anthropic.messages"}
	run("a-pass", "nightly", v1alpha1.OutcomePassed, nil)
	run("b-drift", "nightly", v1alpha1.OutcomeDiverged, drift)
	run("green-1", "green", v1alpha1.OutcomePassed, nil)
	run("green-2", "green", v1alpha1.OutcomePassed, nil)
	run("slow", "pending", "", nil)

	status := func(args ...string) (string, int) {
		t.Helper()
		cmd := newRootCommand()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"suite", "status", "--kubeconfig", kubeconfig, "-n", ns.Name}, args...))
		err := cmd.Execute()
		if err == nil {
			return out.String(), 0
		}
		return out.String() + errOut.String(), exitCode(err)
	}

	out, code := status("green")
	if code != 0 || !strings.Contains(out, "suite green: PASSED (2 ForkRuns)") {
		t.Errorf("green suite: exit %d\n%s", code, out)
	}
	out, code = status("nightly")
	if code != exitDrift || !strings.Contains(out, "b-drift  Replay  False  Diverged  4         ModelCall NoRecordedCall at anthropic.messages") ||
		!strings.Contains(out, "suite nightly: FAILED (2 ForkRuns)") {
		t.Errorf("nightly suite: exit %d\n%s", code, out)
	}
	out, code = status("nightly", "-o", "json")
	var rep suiteReport
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &rep); err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	want := suiteReport{Suite: "nightly", Namespace: ns.Name, Passed: false, Runs: []suiteRun{
		{Name: "a-pass", Mode: v1alpha1.ModeReplay, Ready: "True", Outcome: v1alpha1.OutcomePassed, Reason: "Passed"},
		{Name: "b-drift", Mode: v1alpha1.ModeReplay, Ready: "False", Outcome: v1alpha1.OutcomeDiverged, Reason: "Diverged", FirstDivergence: drift},
	}}
	if d := cmp.Diff(want, rep); d != "" || code != exitDrift {
		t.Errorf("json report, exit %d (-want +got):\n%s", code, d)
	}
	if out, code = status("pending"); code != exitDrift || !strings.Contains(out, "Pending (JobRunning)") {
		t.Errorf("a suite with a run still going: exit %d\n%s", code, out)
	}
	if out, code = status("no-such-suite"); code != exitError || !strings.Contains(out, "has no ForkRuns") {
		t.Errorf("a suite with no ForkRuns: exit %d\n%s", code, out)
	}
}
