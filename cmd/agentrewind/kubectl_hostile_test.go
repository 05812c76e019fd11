package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/syncbuf"
)

// silentAPIServer is a TLS server that accepts every connection and request and never answers (until
// the test ends), and a kubeconfig pointing at it.
func silentAPIServer(t *testing.T) string {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: silent
  cluster: {server: %q, insecure-skip-tls-verify: true}
contexts:
- name: silent
  context: {cluster: silent, namespace: demo}
current-context: silent
users:
- name: u
  user: {token: t}
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// runInterrupted runs the plugin with args and stdin, cancels its context (what main does on Ctrl-C
// and SIGTERM) after a moment, and fails unless the command returned soon after, with exit 1.
func runInterrupted(t *testing.T, stdin io.Reader, args ...string) pluginRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	cmd := commandFor("/usr/local/bin/"+pluginBinary, args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetIn(stdin)
	done := make(chan int, 1)
	go func() {
		code := 0
		if err := cmd.ExecuteContext(ctx); err != nil {
			code = exitCode(err)
		}
		done <- code
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case code := <-done:
		r := pluginRun{stdout.String(), stderr.String(), code}
		if code != exitError || !strings.Contains(r.stderr, "interrupted") {
			t.Errorf("%v: exit %d, want %d saying it was interrupted:\n%s", args, code, exitError, r.stderr)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%v still running 10s after its context ended: Ctrl-C and SIGTERM would not stop it", args)
	}
	return pluginRun{}
}

// TestKubectlCommandsStopWhenInterrupted: every plugin command ends once its context does, whatever
// it is blocked on that takes no context: a --system-file FIFO no one writes, --system-file - read
// from a terminal no one types into, or a cluster that accepts connections and never answers (the
// API discovery before the first request takes no context).
func TestKubectlCommandsStopWhenInterrupted(t *testing.T) {
	silent := silentAPIServer(t)
	fifo := filepath.Join(t.TempDir(), "prompt.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // let the abandoned open of the FIFO finish
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = f.Close()
		}
	})
	prompt := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(prompt, []byte("be brief"), 0o600); err != nil {
		t.Fatal(err)
	}
	never, _ := io.Pipe() // a stdin that never ends
	for _, tc := range []struct {
		name  string
		stdin io.Reader
		args  []string
	}{
		{"a FIFO as --system-file", strings.NewReader(""), []string{"fork", "s", "--at-step", "1", "--system-file", fifo, "--kubeconfig", silent}},
		{"stdin that never ends", never, []string{"fork", "s", "--at-step", "1", "--system-file", "-", "--kubeconfig", silent}},
		{"fork on a silent cluster", strings.NewReader(""), []string{"fork", "s", "--at-step", "1", "--system-file", prompt, "--kubeconfig", silent}},
		{"fork --wait on a silent cluster", strings.NewReader(""), []string{"fork", "s", "--at-step", "1", "--wait", "--kubeconfig", silent}},
		{"inspect on a silent cluster", strings.NewReader(""), []string{"inspect", "s", "--kubeconfig", silent}},
		{"resume on a silent cluster", strings.NewReader(""), []string{"resume", "s", "--kubeconfig", silent}},
		{"suite status on a silent cluster", strings.NewReader(""), []string{"suite", "status", "nightly", "--kubeconfig", silent}},
	} {
		t.Run(tc.name, func(t *testing.T) { runInterrupted(t, tc.stdin, tc.args...) })
	}

	// A completion is bounded by completionTimeout even where the client's discovery blocks.
	for _, args := range [][]string{{"resume", "--kubeconfig", silent, ""}, {"suite", "status", "--kubeconfig", silent, ""}} {
		start := time.Now()
		done, _ := startPlugin(t.Context(), "", append([]string{cobra.ShellCompRequestCmd}, args...)...)
		select {
		case r := <-done:
			if r.code != 0 || strings.TrimSpace(r.stdout) != ":4" {
				t.Errorf("completion of %v on a silent cluster: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
			}
		case <-time.After(completionTimeout + 10*time.Second):
			t.Fatalf("completion of %v on a silent cluster still running after %s", args, time.Since(start))
		}
		if took := time.Since(start); took > completionTimeout+3*time.Second {
			t.Errorf("completion of %v took %s, past its %s", args, took, completionTimeout)
		}
	}
}

// endlessReader is a source that never ends: it counts what was read, and fails past limit so a
// reader without a bound ends too.
type endlessReader struct {
	read  atomic.Int64
	limit int64
}

func (r *endlessReader) Read(p []byte) (int, error) {
	if r.read.Load() > r.limit {
		return 0, errors.New("read without a bound")
	}
	for i := range p {
		p[i] = 'a'
	}
	r.read.Add(int64(len(p)))
	return len(p), nil
}

// TestKubectlForkReadsTheSystemFileOnlyUpToItsBound: a --system-file that never ends (a pipe, stdin,
// /dev/zero) or is far too long is refused after reading at most the bytes the longest allowed prompt
// can take, not read into memory; a prompt of the most characters, each of the longest UTF-8, is
// still taken.
func TestKubectlForkReadsTheSystemFileOnlyUpToItsBound(t *testing.T) {
	src := &endlessReader{limit: 64 << 20}
	o := forkOptions{systemFile: "-"}
	_, err := o.readSystemPrompt(src)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("holds more than %d characters", maxSystemPrompt)) {
		t.Errorf("an endless stdin: %v", err)
	}
	if n := src.read.Load(); n > 2*maxSystemPromptBytes {
		t.Errorf("an endless stdin was read for %d bytes", n)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		o.systemFile = "/dev/zero"
		if _, err := o.readSystemPrompt(nil); err == nil || !strings.Contains(err.Error(), "holds more than") {
			t.Errorf("/dev/zero: %v", err)
		}
	}
	longest := strings.Repeat("😀", maxSystemPrompt)
	if got, err := (&forkOptions{systemFile: "-"}).readSystemPrompt(strings.NewReader(longest)); err != nil || got != longest {
		t.Errorf("a prompt of %d four-byte characters: %v", maxSystemPrompt, err)
	}
	if _, err := (&forkOptions{systemFile: "-"}).readSystemPrompt(strings.NewReader(strings.Repeat("a", maxSystemPrompt+1))); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("holds %d characters", maxSystemPrompt+1)) {
		t.Errorf("a prompt one character too long: %v", err)
	}
	dir := t.TempDir()
	if _, err := (&forkOptions{systemFile: dir}).readSystemPrompt(nil); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: %v", err)
	}
}

// TestKubectlForkWaitDoesNotSpinOnAWatchTheServerCloses: a watch the server (or a proxy on the way)
// closes as soon as it opened is opened again after watchRetryDelay, not in a busy loop of reads and
// watches against the API server.
func TestKubectlForkWaitDoesNotSpinOnAWatchTheServerCloses(t *testing.T) {
	fr := &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "demo", Generation: 1},
		Spec: v1alpha1.ForkRunSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "s"}, Mode: v1alpha1.ModeReplay}}
	var gets, watches atomic.Int64
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(newScheme()).WithObjects(fr).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
		Watch: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
			watches.Add(1)
			return watch.NewEmptyWatch(), nil // closed at once
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	_, err := waitForkRun(ctx, c, client.ObjectKeyFromObject(fr), io.Discard)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waitForkRun: %v, want the deadline", err)
	}
	if g, w := gets.Load(), watches.Load(); g > 5 || w > 5 {
		t.Errorf("%d reads and %d watches in 2.5s of watches closed at once: a busy loop", g, w)
	}
}

// TestKubectlResumeSaysAPlanWithEveryOptionalFieldLeftOut: a ResumePlan status holding a verdict and
// nothing else (a hand-made plan, an older operator) prints without empty parentheses or doubled
// ones, for every verdict and every part of the plan whose reason is left out.
func TestKubectlResumeSaysAPlanWithEveryOptionalFieldLeftOut(t *testing.T) {
	statuses := []v1alpha1.ResumePlanStatus{{}, {
		Rewind:       v1alpha1.RewindPlan{Decision: v1alpha1.DecisionNoRewind},
		Reachability: v1alpha1.ReachabilityStatus{State: "Reachable"},
		Convergence:  v1alpha1.Convergence{Verdict: "Converged"},
	}, {Rewind: v1alpha1.RewindPlan{Decision: v1alpha1.DecisionUnanchored}}, {Rewind: v1alpha1.RewindPlan{Decision: v1alpha1.DecisionRewind}}}
	for _, verdict := range []v1alpha1.ResumeVerdict{v1alpha1.VerdictResumable, v1alpha1.VerdictComplete, v1alpha1.VerdictDiverged, v1alpha1.VerdictUnresumable} {
		for i, st := range statuses {
			st.Verdict = verdict
			rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "s"}}, Status: st}
			var b strings.Builder
			if err := printResume(&b, rp); err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{"()", "((", "))", "%!", " ."} {
				if strings.Contains(b.String(), bad) {
					t.Errorf("%s, status %d: %q in\n%s", verdict, i, bad, b.String())
				}
			}
		}
	}
}

// TestKubectlCommandsRefuseNamesNoObjectCanHave: a SESSION, --checkpoint or --plan that is not a DNS
// subdomain name (empty, upper case, a path, too long, control characters) is refused as such before
// the cluster is asked, for every command that takes one; the cluster here refuses every connection,
// so an answer from it would say something else.
func TestKubectlCommandsRefuseNamesNoObjectCanHave(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\n" +
		"contexts:\n- name: c\n  context: {cluster: c, namespace: demo}\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "A_B", "../x", "a/b", "a b", strings.Repeat("x", 254), "x\x1b[31m", "x-"} {
		for _, tc := range []struct {
			what string
			args []string
		}{
			{"SESSION", []string{"fork", name, "--at-step", "1"}},
			{"--checkpoint", []string{"fork", "s", "--checkpoint", name}},
			{"SESSION", []string{"inspect", name}},
			{"SESSION", []string{"resume", name}},
			{"--plan", []string{"resume", "s", "--plan", name}},
		} {
			if name == "" && tc.what != "SESSION" {
				continue // an empty flag is the flag left out
			}
			args := append([]string{"--kubeconfig", kubeconfig}, tc.args...)
			r := runPlugin(t, args...)
			want := fmt.Sprintf("%s %q is not a valid object name", tc.what, name)
			if r.code != exitError || !strings.Contains(r.stderr, printable(want)) {
				t.Errorf("%q: exit %d, want %d with %q:\n%s", args, r.code, exitError, want, r.stderr)
			}
		}
	}
}
