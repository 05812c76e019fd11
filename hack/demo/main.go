package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentrewind/agentrewind/internal/devenv"
)

func main() {
	keep := flag.Bool("keep", false, "keep the control plane and manager running until interrupted")
	manager := flag.String("manager", "bin/agentrewind", "the agentrewind binary to run as the manager")
	flag.Parse()
	if err := run(*keep, *manager); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run(keep bool, managerBin string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	step("Starting a control plane (kube-apiserver + etcd) with the agentrewind CRDs")
	api, err := devenv.StartAPIServer()
	if err != nil {
		return err
	}
	defer func() { _ = api.Stop() }()

	dir, err := os.MkdirTemp("", "agentrewind-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	user, err := api.Environment().AddUser(envtest.User{Name: "demo", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}
	kubectl := filepath.Join(api.Environment().BinaryAssetsDirectory, "kubectl")

	// This control plane has no kubelet, so the controllers' engine Jobs could never run: the manager
	// starts without them here (make e2e runs them on a real cluster).
	step("Starting agentrewind manager with leader election (controllers off: no kubelet here to run their Jobs)")
	mgr := exec.CommandContext(ctx, managerBin, "manager", "--kubeconfig", kubeconfigPath, "--controllers=false",
		"--leader-elect", "--leader-election-namespace", "default",
		"--metrics-bind-address", "127.0.0.1:0", "--metrics-secure=false", "--health-probe-bind-address", "127.0.0.1:0")
	logFile, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return err
	}
	mgr.Stdout, mgr.Stderr = logFile, logFile
	if err := mgr.Start(); err != nil {
		return fmt.Errorf("starting %s: %w (run 'make build' first)", managerBin, err)
	}
	defer func() { _ = mgr.Process.Signal(syscall.SIGTERM); _ = mgr.Wait() }()
	if err := waitForLease(ctx, kubectl, kubeconfigPath); err != nil {
		out, _ := os.ReadFile(logFile.Name())
		return fmt.Errorf("%w; manager log:\n%s", err, out)
	}

	k := func(args ...string) error { return kubectlRun(ctx, kubectl, kubeconfigPath, args...) }
	step("kubectl apply -k config/samples")
	if err := k("apply", "-k", "config/samples"); err != nil {
		return err
	}
	step("kubectl get agentrewind (every kind in the category)")
	if err := k("get", "agentrewind"); err != nil {
		return err
	}
	step("kubectl get forkruns -o wide")
	if err := k("get", "fork", "-o", "wide"); err != nil {
		return err
	}
	step("kubectl explain forkrun.spec.mode")
	if err := k("explain", "forkrun.spec.mode"); err != nil {
		return err
	}
	step("kubectl apply of a ForkRun that does not say whether to spend money: no mode (expected to be refused)")
	bad := filepath.Join(dir, "bad-forkrun.yaml")
	if err := os.WriteFile(bad, []byte(badForkRun), 0o600); err != nil {
		return err
	}
	if err := k("apply", "-f", bad); err == nil {
		return fmt.Errorf("the API server accepted an invalid ForkRun")
	}

	if err := engineDemo(ctx, dir, managerBin); err != nil {
		return err
	}

	if !keep {
		step("Done. Run 'make demo DEMO_FLAGS=-keep' to keep the cluster up and use kubectl yourself.")
		return nil
	}
	step("The control plane stays up until you press Ctrl-C. From another shell:")
	fmt.Printf("  export KUBECONFIG=%s\n  %s get agentrewind\n", kubeconfigPath, kubectl)
	<-ctx.Done()
	return nil
}

const badForkRun = `apiVersion: agentrewind.io/v1alpha1
kind: ForkRun
metadata:
  name: fork-or-replay-unsaid
spec:
  sessionRef:
    name: triage-bot-run-42
  fork:
    atStep: 11
    overrides:
      system: "a different prompt"
`

func step(msg string) { fmt.Printf("\n==> %s\n", msg) }

func kubectlRun(ctx context.Context, kubectl, kubeconfig string, args ...string) error {
	fmt.Printf("$ kubectl %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	return cmd.Run()
}

// waitForLease waits until the manager holds its leader election Lease, which proves it reached the
// API server with its own credentials.
func waitForLease(ctx context.Context, kubectl, kubeconfig string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "get", "lease", "-n", "default",
			"agentrewind.agentrewind.io", "-o", "jsonpath={.spec.holderIdentity}").Output()
		if err == nil && len(out) > 0 {
			fmt.Printf("manager is leader: %s\n", out)
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the manager did not take its leader election Lease within 30s")
}
