package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller"
)

func TestWatchCacheLimitsTheCacheToTheWatchedNamespaces(t *testing.T) {
	opts, err := watchCache([]string{"team-a", "team-b"}, []string{"team-b"}, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ns := range opts.DefaultNamespaces {
		got = append(got, ns)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"team-a", "team-b"}, got); diff != "" {
		t.Errorf("cached namespaces (-want +got):\n%s", diff)
	}
	if opts, err := watchCache(nil, []string{"x"}, "y"); err != nil || opts.DefaultNamespaces != nil {
		t.Errorf("no --watch-namespaces: %v, %v; want every namespace (no DefaultNamespaces) and no error", opts.DefaultNamespaces, err)
	}
}

func TestWatchCacheRefusesWhatItCannotSee(t *testing.T) {
	for _, tc := range []struct {
		name          string
		watch, gc     []string
		sync, wantErr string
	}{
		{"not a namespace name", []string{"Team_A"}, nil, "", `--watch-namespaces: "Team_A" is not a namespace name`},
		{"gc outside", []string{"a"}, []string{"a", "b"}, "", `--gc-namespaces names "b", which --watch-namespaces does not`},
		{"sync outside", []string{"a"}, nil, "c", `--store-sync-namespace "c" is not among --watch-namespaces`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := watchCache(tc.watch, tc.gc, tc.sync)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("watchCache(%v, %v, %q) = %v, want an error saying %q", tc.watch, tc.gc, tc.sync, err, tc.wantErr)
			}
		})
	}
}

// TestManagerReconcilesOnlyTheWatchedNamespaces runs `agentrewind manager --watch-namespaces` against a
// real API server: an AgentSession in the watched namespace gets the controller's finalizer, one in
// another namespace is never touched.
func TestManagerReconcilesOnlyTheWatchedNamespaces(t *testing.T) {
	api := startAPIServer(t)
	kubeconfigPath := kubeconfigOf(t, api, envtest.User{Name: "manager", Groups: []string{"system:masters"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	sessions := map[string]*v1alpha1.AgentSession{}
	for _, ns := range []string{"other", "watched"} {
		if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: ns}, Spec: v1alpha1.AgentSessionSpec{SessionID: "run-" + ns}}
		if err := api.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		sessions[ns] = s
	}

	t.Setenv("AWS_ACCESS_KEY_ID", "manager-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "manager-test-secret")
	cmd := newRootCommand()
	cmd.SetArgs([]string{"manager", "--kubeconfig", kubeconfigPath, "--watch-namespaces", "watched", "--gc=false",
		"--engine-image", "registry.example/agentrewind:test", "--store-endpoint", "http://127.0.0.1:1", "--store-bucket", "operator-store",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"})
	cmd.SetOut(io.Discard)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	hasFinalizer := func(s *v1alpha1.AgentSession) bool {
		var got v1alpha1.AgentSession
		if err := api.Client.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(got.Finalizers, controller.SessionFinalizer)
	}
	waitFor(t, done, "the watched namespace's session to get the finalizer", func() bool { return hasFinalizer(sessions["watched"]) })
	// The other session was created first: had the manager watched its namespace, it would have been
	// reconciled by now too. Give it a few more seconds all the same.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if hasFinalizer(sessions["other"]) {
			t.Fatal("the manager reconciled an AgentSession in a namespace --watch-namespaces does not name")
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("manager returned %v on shutdown, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("manager did not stop")
	}
}
