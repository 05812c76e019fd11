package rewind_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/pkg/rewind"
)

// TestRecordAndForkRefuseADirectoryInsideASession: a fork or a recording written into its parent's
// directory — its blobs/, a new directory under it, the directory itself, through a symbolic link
// or ".." — would put its files among the parent's and break it. Each is refused before anything is
// written, and the parent still verifies; a sibling whose name merely extends the parent's is fine.
func TestRecordAndForkRefuseADirectoryInsideASession(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	parentDir := filepath.Join(base, "parent")
	tools := map[string]rewind.Tool{"search": func(context.Context, json.RawMessage) (any, error) { return "hit", nil }}
	harness := func(ctx context.Context, ac rewind.AgentContext) error {
		_, err := ac.Tool(ctx, "search", map[string]string{"q": "x"})
		return err
	}
	if _, err := rewind.Record(ctx, rewind.RecordOptions{Dir: parentDir, ID: "parent", Tools: tools}, harness); err != nil {
		t.Fatal(err)
	}
	parent, err := rewind.Open(parentDir)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(parentDir, link); err != nil {
		t.Skipf("cannot make symlinks here: %v", err)
	}
	blobsLink := filepath.Join(base, "blobs-link")
	if err := os.Symlink(filepath.Join(parentDir, session.BlobsDir), blobsLink); err != nil {
		t.Fatal(err)
	}
	before := tree(t, parentDir)
	record := func(dir string) error {
		_, err := rewind.Record(ctx, rewind.RecordOptions{Dir: dir, Tools: tools}, harness)
		return err
	}
	fork := func(dir string) error {
		_, err := rewind.Fork(ctx, rewind.ForkOptions{Parent: parent, Dir: dir, AtStep: 1}, harness)
		return err
	}
	for _, dir := range []string{
		parentDir,
		filepath.Join(parentDir, session.BlobsDir),
		filepath.Join(parentDir, session.BlobsDir, "new", "deeper"),
		filepath.Join(parentDir, "fork"),
		link,
		filepath.Join(link, "fork"),
		blobsLink,
		filepath.Join(base, "elsewhere", "..", "parent", "blobs"),
	} {
		for name, run := range map[string]func(string) error{"Record": record, "Fork": fork} {
			err := run(dir)
			var inside *session.InsideSessionError
			if err == nil || (dir != parentDir && dir != link && !errors.As(err, &inside)) {
				t.Errorf("%s into %s: %v, want it refused as inside the parent", name, dir, err)
			}
		}
	}
	if after := tree(t, parentDir); len(after) != len(before) {
		t.Fatalf("the parent's directory changed: %v, was %v", after, before)
	}
	if _, err := rewind.Open(parentDir); err != nil {
		t.Fatalf("the parent no longer verifies: %v", err)
	}
	if err := fork(filepath.Join(base, "parent-fork")); err != nil {
		t.Fatalf("a fork beside the parent: %v", err)
	}
	if err := record(filepath.Join(base, "parent2")); err != nil {
		t.Fatalf("a recording beside the parent: %v", err)
	}
}

// tree lists every path under dir.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		paths = append(paths, path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}
