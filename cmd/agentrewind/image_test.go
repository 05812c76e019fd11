package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/testenv"
)

// TestImageRunsRestricted builds the container image from the repository's Dockerfile on scratch and
// runs `agentrewind version` in it the way a restricted pod runs: read-only root filesystem, UID 65532,
// every capability dropped, no privilege escalation.
func TestImageRunsRestricted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a container image; skipped in -short mode")
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("no Docker engine answers here, so the image cannot be built (docker info: %v: %s)", err, bytes.TrimSpace(out))
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// A hang guard, not a speed test: the -trimpath build below compiles every dependency afresh (the
	// test build's cache does not apply), which takes minutes on two busy cores.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	// The build context mirrors what `make docker-build` stages: bin/agentrewind and the CA bundle.
	buildCtx := t.TempDir()
	binDir := filepath.Join(buildCtx, "bin")
	run(t, ctx, root, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath",
		"-ldflags", "-X github.com/agentrewind/agentrewind/internal/version.Version=image-test",
		"-o", filepath.Join(binDir, "agentrewind"), "./cmd/agentrewind")
	caBundle, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Skipf("no CA bundle on this machine to put in the image: %v", err)
	}
	writeFile(t, filepath.Join(binDir, "ca-certificates.crt"), caBundle)
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(buildCtx, "Dockerfile"), dockerfile)

	image := "agentrewind-image-test:" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	run(t, ctx, buildCtx, nil, "docker", "build", "--build-arg", "BASE_IMAGE=scratch", "-t", image, ".")
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })

	if user := strings.TrimSpace(run(t, ctx, buildCtx, nil, "docker", "image", "inspect", "-f", "{{.Config.User}}", image)); user != "65532:65532" {
		t.Errorf("image user is %q, want 65532:65532", user)
	}
	out := run(t, ctx, buildCtx, nil, "docker", "run", "--rm", "--read-only", "--user", "65532",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges", image, "version")
	if !strings.HasPrefix(out, "agentrewind image-test ") {
		t.Fatalf("`agentrewind version` in the image printed %q", out)
	}
}

func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
