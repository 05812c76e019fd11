package controller

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// A ForkRun pod is the agent with the rewind proxy as a native sidecar. envtest has no kubelet, so the
// tests play it: runForkPod starts the proxy sidecar from the Job's own args and resolved environment
// (the real `agentrewind proxy`), waits for its /readyz as the startup probe does, runs a Go agent
// with the agent container's resolved environment, stops the proxy with SIGTERM once the agent exited,
// records the pod with the proxy's termination message, and finishes the Job as the Job controller
// would: complete when the agent exited 0, failed otherwise.

// startForkManager runs the AgentSession and ForkRun reconcilers in a manager of their own (see
// runManager); funcs, when given, intercept the manager's client.
func (e *env) startForkManager(funcs *interceptor.Funcs) (stop func()) {
	e.t.Helper()
	return e.runManager(funcs, cache.Options{}, forkReconcilers)
}

// forkReconcilers are the AgentSession and ForkRun reconcilers over deps.
func forkReconcilers(mgr ctrl.Manager, deps *Deps, n int64) []setupper {
	sessions := &AgentSessionReconciler{Deps: *deps}
	sessions.Recorder = mgr.GetEventRecorder(fmt.Sprintf("agentsession-test-%d", n))
	runs := &ForkRunReconciler{Deps: *deps}
	runs.Recorder = mgr.GetEventRecorder(fmt.Sprintf("forkrun-test-%d", n))
	return []setupper{sessions, runs}
}

// agentFunc is the agent container's program: it gets the container's resolved environment and
// returns its exit code.
type agentFunc func(env map[string]string) int

// askAgent is an agent that asks one question through the Anthropic SDK, configured only by its
// environment as a real agent would be, and exits 1 when the answer is an error (a drift is a 409).
func askAgent(question string) agentFunc {
	return func(env map[string]string) int {
		c := sdk.NewClient(option.WithBaseURL(env[EnvAnthropicBaseURL]), option.WithAPIKey(env[EnvAnthropicAPIKey]), option.WithMaxRetries(0))
		_, err := c.Messages.New(context.Background(), sdk.MessageNewParams{Model: "claude-test", MaxTokens: 16,
			Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(question))}})
		if err != nil {
			return 1
		}
		return 0
	}
}

// proxyProcess is a running `agentrewind proxy`.
type proxyProcess struct {
	cmd    *exec.Cmd
	url    string
	output *bytes.Buffer
	exited chan struct{}
}

// startProxy runs the built binary with args (whose --listen and --health-listen are replaced by free
// loopback ports) and waits for /readyz, on the health port when there is one, as the kubelet probes.
// A free port is free only until another process takes it: a proxy that could not bind one is
// started again on others.
func startProxy(t *testing.T, args, env []string) *proxyProcess {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, err := tryStartProxy(t, args, env)
		if err == nil {
			return p
		}
		if attempt == 3 || !strings.Contains(p.output.String(), "address already in use") {
			t.Fatalf("%v\n%s", err, p.output)
		}
	}
}

func tryStartProxy(t *testing.T, args, env []string) (*proxyProcess, error) {
	t.Helper()
	freeAddr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	addr, probe := freeAddr(), ""
	args = append([]string{}, args...)
	for i := range args {
		switch {
		case args[i] == "--listen" && i+1 < len(args):
			args[i+1] = addr
		case args[i] == "--health-listen" && i+1 < len(args):
			args[i+1] = freeAddr()
			probe = "http://" + args[i+1]
		}
	}
	p := &proxyProcess{cmd: exec.Command(engineBin, args...), url: "http://" + addr, output: &bytes.Buffer{}, exited: make(chan struct{})}
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.exited })
	probeURL := p.url
	if probe != "" {
		probeURL = probe
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(probeURL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.exited:
			return p, fmt.Errorf("the proxy exited before it was ready: %v", p.cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("the proxy was not ready after 20s:\n%s", p.output)
	return nil, nil
}

// stop sends SIGTERM, as the kubelet does to a sidecar once the main containers exited, and returns
// the exit code.
func (p *proxyProcess) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the proxy did not stop:\n%s", p.output)
	}
	return p.cmd.ProcessState.ExitCode()
}

// fakeLLM serves a fakellm script.
func fakeLLM(t *testing.T, script string) (*fakellm.Server, string) {
	t.Helper()
	s, err := fakellm.Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	fake := fakellm.New(s)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv.URL
}

// recordThroughProxy records session id into the test namespace's store as a user would: the real
// proxy in record mode in front of the fake LLM, an SDK agent asking question.
func (e *env) recordThroughProxy(id, script, question string) {
	e.t.Helper()
	_, upstream := fakeLLM(e.t, script)
	p := startProxy(e.t, []string{"proxy", "--mode", "record", "--listen", "", "--store", "s3://" + testBucket + "/" + e.storeKey(),
		"--endpoint", "http://" + s3.Endpoint, "--session-id", id, "--anthropic-upstream", upstream},
		[]string{"AWS_ACCESS_KEY_ID=" + s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3.SecretKey, "ANTHROPIC_API_KEY="})
	if code := askAgent(question)(map[string]string{EnvAnthropicBaseURL: p.url, EnvAnthropicAPIKey: "placeholder"}); code != 0 {
		e.t.Fatalf("recording %s: the agent failed\n%s", id, p.output)
	}
	if code := p.stop(e.t); code != 0 {
		e.t.Fatalf("recording %s: the proxy exited %d\n%s", id, code, p.output)
	}
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// runForkPod plays the kubelet and the Job controller for a ForkRun Job (see the top of this file).
// extraArgs are appended to the proxy's, for what the pod's network would give it (a fake upstream).
func (e *env) runForkPod(job *batchv1.Job, agent agentFunc, extraArgs ...string) (agentExit int, proxyOutput string) {
	e.t.Helper()
	pod := job.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || len(pod.Containers) != 1 {
		e.t.Fatalf("pod has %d init containers and %d containers", len(pod.InitContainers), len(pod.Containers))
	}
	ag := pod.Containers[0]

	args, env, termLog := e.proxyCommand(job)
	args = append(append(args, "--termination-log", termLog), extraArgs...)
	p := startProxy(e.t, args, env)

	// The agent, with its container's environment; the proxy's port is where this proxy listens.
	agentEnv := map[string]string{}
	for _, kv := range e.resolveEnv(job, ag.Env) {
		k, v, _ := strings.Cut(kv, "=")
		agentEnv[k] = strings.ReplaceAll(v, fmt.Sprintf("127.0.0.1:%d", ProxyPort), strings.TrimPrefix(p.url, "http://"))
	}
	agentExit = agent(agentEnv)
	proxyExit := p.stop(e.t)
	msg, _ := os.ReadFile(termLog)
	e.finishForkPod(job, agentExit, proxyExit, string(msg))
	return agentExit, p.output.String()
}

// finishForkPod records the Job's pod, its agent exited with agentExit and its proxy sidecar with
// proxyExit and message, then finishes the Job: complete when the agent exited 0, failed otherwise.
func (e *env) finishForkPod(job *batchv1.Job, agentExit, proxyExit int, msg string) {
	e.t.Helper()
	pod := job.Spec.Template.Spec
	proxy, ag := pod.InitContainers[0], pod.Containers[0]
	created := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-pod", Namespace: job.Namespace, Labels: job.Spec.Template.Labels,
		Annotations: job.Spec.Template.Annotations}, Spec: *pod.DeepCopy()}
	e.create(created)
	phase := corev1.PodSucceeded
	if agentExit != 0 {
		phase = corev1.PodFailed
	}
	created.Status = corev1.PodStatus{Phase: phase,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: proxy.Name, Image: proxy.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(proxyExit), Message: string(msg)}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: ag.Name, Image: ag.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(agentExit)}}}}}
	if err := e.c.Status().Update(e.ctx, created); err != nil {
		e.t.Fatal(err)
	}
	e.finishJob(job, agentExit == 0, "")
}

func volumeNamed(t *testing.T, volumes []corev1.Volume, name string) corev1.Volume {
	t.Helper()
	for _, v := range volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %s", name)
	return corev1.Volume{}
}

// mountVolume fills dir as the kubelet fills a volume: empty, the pod's annotations through the
// downward API, or a Secret's keys.
func (e *env) mountVolume(job *batchv1.Job, v corev1.Volume, dir string) {
	e.t.Helper()
	switch src := v.VolumeSource; {
	case src.EmptyDir != nil:
	case src.DownwardAPI != nil:
		for _, item := range src.DownwardAPI.Items {
			ann, ok := strings.CutPrefix(item.FieldRef.FieldPath, "metadata.annotations['")
			if !ok {
				e.t.Fatalf("volume %s: field %s is not an annotation", v.Name, item.FieldRef.FieldPath)
			}
			value := job.Spec.Template.Annotations[strings.TrimSuffix(ann, "']")]
			if err := os.WriteFile(filepath.Join(dir, item.Path), []byte(value), 0o644); err != nil {
				e.t.Fatal(err)
			}
		}
	case src.Secret != nil:
		var s corev1.Secret
		if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: job.Namespace, Name: src.Secret.SecretName}, &s); err != nil {
			if src.Secret.Optional != nil && *src.Secret.Optional {
				return
			}
			e.t.Fatalf("volume %s: %v", v.Name, err)
		}
		for _, item := range src.Secret.Items {
			if err := os.WriteFile(filepath.Join(dir, item.Path), s.Data[item.Key], 0o644); err != nil {
				e.t.Fatal(err)
			}
		}
	default:
		e.t.Fatalf("volume %s: a source the test kubelet does not know", v.Name)
	}
}

// proxyCommand is the command line and environment of a Job's proxy sidecar as the kubelet would run
// it here: its variables resolved, each volume it mounts standing in a directory of its own, and a
// termination log the kubelet would create.
func (e *env) proxyCommand(job *batchv1.Job) (args, env []string, termLog string) {
	e.t.Helper()
	pod := job.Spec.Template.Spec
	proxy := pod.InitContainers[0]
	env = e.resolveEnv(job, proxy.Env)
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	mounts := map[string]string{} // mount path → the directory standing in for it
	for _, m := range proxy.VolumeMounts {
		dir := e.t.TempDir()
		mounts[m.MountPath] = dir
		e.mountVolume(job, volumeNamed(e.t, pod.Volumes, m.Name), dir)
	}
	env = append(env, "TMPDIR="+mounts["/tmp"])
	args = append([]string{}, proxy.Args...)
	for i, a := range args {
		a = varRef.ReplaceAllStringFunc(a, func(ref string) string { return vars[varRef.FindStringSubmatch(ref)[1]] })
		longest := ""
		for path := range mounts {
			if rest, ok := strings.CutPrefix(a, path); ok && (rest == "" || strings.HasPrefix(rest, "/")) && len(path) > len(longest) {
				longest = path
			}
		}
		if longest != "" {
			a = mounts[longest] + strings.TrimPrefix(a, longest)
		}
		args[i] = a
	}
	termLog = filepath.Join(e.t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return args, env, termLog
}
