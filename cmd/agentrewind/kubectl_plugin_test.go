package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/syncbuf"
)

// pluginRun is a plugin command run: its outputs and exit code.
type pluginRun struct {
	stdout, stderr string
	code           int
}

// startPlugin runs the binary's command as kubectl-rewind with args, in the background; the returned
// buffer shows its stderr as it goes.
func startPlugin(ctx context.Context, stdin string, args ...string) (<-chan pluginRun, *syncbuf.Buffer) {
	done := make(chan pluginRun, 1)
	var stdout, stderr syncbuf.Buffer
	cmd := commandFor("/usr/local/bin/"+pluginBinary, args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetIn(strings.NewReader(stdin))
	go func() {
		err := cmd.ExecuteContext(ctx)
		code := 0
		if err != nil {
			code = exitCode(err)
		}
		done <- pluginRun{stdout.String(), stderr.String(), code}
	}()
	return done, &stderr
}

// runPlugin runs the binary's command as kubectl-rewind with args and waits for it.
func runPlugin(t *testing.T, args ...string) pluginRun {
	t.Helper()
	done, _ := startPlugin(t.Context(), "", args...)
	return <-done
}

// newNamespace creates a namespace of a generated name.
func newNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rewind-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// condition is a status condition as the controllers write it, of generation 1.
func condition(typ string, st metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, LastTransitionTime: metav1.Now(), ObservedGeneration: 1}
}

// verifiedSession creates an AgentSession of steps steps whose status says it was verified, as the
// session controller writes it.
func verifiedSession(t *testing.T, c client.Client, ns, name string, steps int64, spec v1alpha1.AgentSessionSpec) *v1alpha1.AgentSession {
	t.Helper()
	if spec.SessionID == "" {
		spec.SessionID = name
	}
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	ctx := context.Background()
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	zero := func() *int64 { return new(int64(0)) }
	s.Status = v1alpha1.AgentSessionStatus{ObservedGeneration: 1,
		Conditions: []metav1.Condition{condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified, "verified")},
		Recording: v1alpha1.SessionRecording{EventsHash: strings.Repeat("ab", 32), LogState: v1alpha1.LogClosed, Events: new(steps + 2), Steps: new(steps),
			ModelCalls: new(int64(2)), ToolCalls: new(int64(1)), Blobs: zero(), Bytes: new(int64(4096)),
			Usage: v1alpha1.Usage{InputTokens: zero(), OutputTokens: zero(), CacheCreationInputTokens: zero(), CacheReadInputTokens: zero(), TotalTokens: zero(), CostMicroUSD: zero()}}}
	if err := c.Status().Update(ctx, s); err != nil {
		t.Fatalf("status of AgentSession %s: %v", name, err)
	}
	return s
}

// TestKubectlRewindBinaryDispatchesOnItsName builds the binary, links it as kubectl-rewind and
// kubectl_complete-rewind as `make build` does, and runs it as kubectl runs a plugin: the same file
// is the plugin by its name, reads the cluster with the flags kubectl users pass (given before the
// subcommand too), prints yaml that parses back, exits with the documented code, and completes
// session names from the cluster for `kubectl rewind resume <Tab>`.
func TestKubectlRewindBinaryDispatchesOnItsName(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "agentrewind")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range []string{pluginBinary, pluginCompleteBinary} {
		if err := os.Symlink("agentrewind", filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	c, kubeconfig := apiServerWithKubeconfig(t, "plugin-user")
	ns := newNamespace(t, c)
	ctx := context.Background()
	for _, name := range []string{"triage-42", "triage-43"} {
		verifiedSession(t, c, ns, name, 9, v1alpha1.AgentSessionSpec{Agent: v1alpha1.AgentSpec{Image: "agent:1"}})
	}
	fr := &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: "triage-42-replay", Namespace: ns, Labels: map[string]string{LabelSuite: "nightly"}},
		Spec: v1alpha1.ForkRunSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "triage-42"}, Mode: v1alpha1.ModeReplay}}
	if err := c.Create(ctx, fr); err != nil {
		t.Fatal(err)
	}
	step := int64(3)
	fr.Status = v1alpha1.ForkRunStatus{ObservedGeneration: 1, Outcome: v1alpha1.OutcomeDiverged,
		FirstDivergence: v1alpha1.Divergence{Step: &step, Kind: v1alpha1.CallModel, Reason: "NoRecordedCall", ActualCallSite: "anthropic.messages"},
		Conditions: []metav1.Condition{condition(v1alpha1.ConditionReady, metav1.ConditionFalse, "Diverged", "diverged"),
			condition(v1alpha1.ConditionStalled, metav1.ConditionTrue, "Diverged", "diverged")}}
	if err := c.Status().Update(ctx, fr); err != nil {
		t.Fatal(err)
	}

	exe := func(name string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(filepath.Join(dir, name), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return stdout.String(), stderr.String(), code
	}

	out, _, code := exe(pluginBinary, "--help")
	if code != 0 || !strings.Contains(out, "kubectl rewind [command]") || !strings.Contains(out, "kubectl rewind fork triage-42 --at-step 6") ||
		!strings.Contains(out, "completion") || strings.Contains(out, "manager") {
		t.Errorf("kubectl-rewind --help (exit %d) is not the plugin's:\n%s", code, out)
	}
	out, _, code = exe("agentrewind", "rewind", "--help")
	if code != 0 || !strings.Contains(out, "agentrewind rewind [command]") || !strings.Contains(out, "resume") {
		t.Errorf("agentrewind rewind --help (exit %d):\n%s", code, out)
	}

	out, errOut, code := exe(pluginBinary, "--kubeconfig", kubeconfig, "-n", ns, "suite", "status", "nightly", "-o", "yaml")
	var rep suiteReport
	if err := yaml.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("suite status -o yaml does not parse: %v\n%s", err, out)
	}
	want := suiteReport{Suite: "nightly", Namespace: ns, Runs: []suiteRun{{Name: "triage-42-replay", Mode: v1alpha1.ModeReplay, Ready: "False",
		Outcome: v1alpha1.OutcomeDiverged, Reason: "Diverged", FirstDivergence: &fr.Status.FirstDivergence}}}
	if d := cmp.Diff(want, rep); d != "" || code != exitDrift {
		t.Errorf("kubectl-rewind suite status -o yaml: exit %d, want %d; report (-want +got):\n%s\n%s", code, exitDrift, d, errOut)
	}

	out, _, code = exe(pluginCompleteBinary, "resume", "--kubeconfig", kubeconfig, "-n", ns, "")
	if code != 0 || !strings.HasPrefix(out, "triage-42\ntriage-43\n:4\n") {
		t.Errorf("kubectl_complete-rewind resume <Tab> (exit %d) should list the namespace's sessions:\n%s", code, out)
	}
	out, _, _ = exe(pluginCompleteBinary, "suite", "status", "--kubeconfig", kubeconfig, "-n", ns, "")
	if !strings.HasPrefix(out, "nightly\n:4\n") {
		t.Errorf("kubectl_complete-rewind suite status <Tab> should list the namespace's suites:\n%s", out)
	}
	out, _, code = exe(pluginBinary, "completion", "bash")
	if code != 0 || !strings.Contains(out, "__start_kubectl-rewind") {
		t.Errorf("kubectl-rewind completion bash (exit %d) is not a bash completion of kubectl-rewind:\n%.300s", code, out)
	}
}

// TestKubectlVersionPrintsYAML checks the plugin's version in each output format.
func TestKubectlVersionPrintsYAML(t *testing.T) {
	r := runPlugin(t, "version", "-o", "yaml")
	var v map[string]any
	if err := yaml.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != 0 || v["version"] == nil {
		t.Errorf("version -o yaml: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	if r = runPlugin(t, "version", "-o", "toml"); r.code != exitError || !strings.Contains(r.stderr, `--output "toml" is not supported: use text, json or yaml`) {
		t.Errorf("version -o toml: exit %d\n%s", r.code, r.stderr)
	}
}
