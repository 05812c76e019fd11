package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentrewind/agentrewind/internal/testenv"
)

// The tests of this package start the manager command more than once in one process.
func init() { skipControllerNameValidation = true }

// TestManagerServesProbesAndMetricsAndLeadsThroughALease runs `agentrewind manager` against a real API
// server: the probes and the metrics endpoint answer, leader election takes the Lease, and on shutdown
// the manager returns cleanly and releases the Lease so a successor need not wait for it to expire.
func TestManagerServesProbesAndMetricsAndLeadsThroughALease(t *testing.T) {
	api, err := testenv.StartAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Stop() })

	user, err := api.Environment().AddUser(envtest.User{Name: "manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	// The controllers run too; the store is only opened when a session needs it.
	t.Setenv("AWS_ACCESS_KEY_ID", "manager-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "manager-test-secret")
	var (
		metricsAddr, probeAddr string
		ctx                    context.Context
		cancel                 context.CancelFunc
		done                   <-chan error
	)
	// controller-runtime binds the metrics and probe addresses it is given and reports neither port it
	// bound, so the test picks two free ports; another process can take one before the manager binds
	// it, and then the manager is started again on two others.
	for attempt := 1; ; attempt++ {
		metricsAddr, probeAddr = twoFreeLoopbackAddrs(t)
		ctx, cancel = context.WithCancel(context.Background())
		var err error
		if done, err = startManagerUntilServing(ctx, kubeconfigPath, metricsAddr, probeAddr); err == nil {
			break
		}
		cancel()
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
	}
	defer cancel()

	for _, path := range []string{"/healthz", "/readyz"} {
		if body := waitForHTTP200(t, done, "http://"+probeAddr+path); body != "ok" {
			t.Errorf("%s answered %q, want ok", path, body)
		}
	}

	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: "default", Name: "manager-test"}
	waitFor(t, done, "the manager to hold the leader election Lease", func() bool {
		return api.Client.Get(ctx, key, lease) == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != ""
	})
	metrics := waitForHTTP200(t, done, "http://"+metricsAddr+"/metrics")
	if !strings.Contains(metrics, `leader_election_master_status{name="manager-test"} 1`) {
		t.Errorf("metrics do not report this manager as leader:\n%.2000s", metrics)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("manager returned %v on shutdown, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("manager did not stop within 30s of its context being cancelled")
	}
	if err := api.Client.Get(context.Background(), key, lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("the Lease is still held by %q after shutdown; it should be released", *lease.Spec.HolderIdentity)
	}
}

// twoFreeLoopbackAddrs returns two distinct 127.0.0.1 addresses whose ports were free a moment ago:
// both are held open until both are chosen, so the system cannot hand out the same port twice.
func twoFreeLoopbackAddrs(t *testing.T) (string, string) {
	t.Helper()
	var addrs [2]string
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs[0], addrs[1]
}

// startManagerUntilServing runs `agentrewind manager` with leader election against the API server of
// kubeconfig, serving metrics (plain HTTP) and probes on the given addresses, and returns once both
// answer. If the manager exits first (it could not bind one of them), it returns why.
func startManagerUntilServing(ctx context.Context, kubeconfig, metricsAddr, probeAddr string) (<-chan error, error) {
	cmd := newRootCommand()
	cmd.SetArgs([]string{"manager", "--kubeconfig", kubeconfig,
		"--engine-image", "registry.example/agentrewind:test", "--store-endpoint", "http://127.0.0.1:1", "--store-bucket", "operator-store",
		"--metrics-bind-address", metricsAddr, "--metrics-secure=false",
		"--health-probe-bind-address", probeAddr,
		"--leader-elect", "--leader-election-namespace", "default", "--leader-election-id", "manager-test"})
	cmd.SetOut(io.Discard)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	// A port lost to another process may be held by one that accepts and never answers: each look
	// gives up after a second, so that the manager's exit is seen.
	look := &http.Client{Timeout: time.Second}
	answers := func(url string) bool {
		resp, err := look.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	deadline := time.Now().Add(30 * time.Second)
	for !answers("http://"+probeAddr+"/healthz") || !answers("http://"+metricsAddr+"/metrics") {
		select {
		case err := <-done:
			return nil, fmt.Errorf("the manager exited before serving metrics on %s and probes on %s: %v", metricsAddr, probeAddr, err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the manager did not serve metrics on %s and probes on %s within 30s", metricsAddr, probeAddr)
		}
	}
	return done, nil
}

// waitFor polls cond until it holds, failing if the manager exits first or 30s pass.
func waitFor(t *testing.T, exited <-chan error, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		select {
		case err := <-exited:
			t.Fatalf("the manager exited (%v) while waiting for %s", err, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitForHTTP200(t *testing.T, exited <-chan error, url string) string {
	t.Helper()
	var body string
	waitFor(t, exited, url+" to answer 200", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	return body
}

// TestManagerRefusesToRunControllersWithoutTheirSettings: the controllers need the engine image and the
// default store; a manager without them stops at once and says which flags, rather than reconciling
// sessions it cannot verify.
func TestManagerRefusesToRunControllersWithoutTheirSettings(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no engine image", []string{"--store-endpoint", "http://127.0.0.1:1", "--store-bucket", "b"}, "--engine-image, --store-endpoint and --store-bucket are required"},
		{"no credentials", []string{"--engine-image", "i", "--store-endpoint", "http://127.0.0.1:1", "--store-bucket", "b"}, "the manager's store credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newRootCommand()
			cmd.SetArgs(append([]string{"manager", "--kubeconfig", writeUnreachableKubeconfig(t), "--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, tc.args...))
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("manager %v: %v, want an error saying %q", tc.args, err, tc.want)
			}
		})
	}
}

// writeUnreachableKubeconfig is a kubeconfig for an API server nobody listens on: creating a manager
// does not contact it.
func writeUnreachableKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const cfg = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
