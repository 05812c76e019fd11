package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
)

// legacyGitCheckpoint stores a git checkpoint as earlier versions wrote them (a commit object of the
// work tree in the repository, parent HEAD, kept by a ref under checkpoint.GitRefPrefix), made here
// with the git binary, so prune's handling of their refs is still tested now that nothing writes them.
func legacyGitCheckpoint(t *testing.T, dir, storeDir string, step int64) {
	t.Helper()
	git := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("no usable git binary: git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	index := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
	git(index, "add", "--all")
	tree := git(index, "write-tree")
	commit := git(nil, "commit-tree", tree, "-p", "HEAD", "-m", fmt.Sprintf("agentrewind checkpoint: step %d", step))
	git(nil, "update-ref", checkpoint.GitRefPrefix+commit, commit)
	m, _, err := checkpoint.GitManifest(dir, commit)
	if err != nil {
		t.Fatal(err)
	}
	m.Anchor = checkpoint.Anchor{Session: "s1", Step: step, Author: checkpointAuthor}
	if _, err := checkpoint.OpenStore(storeDir).Save(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}
