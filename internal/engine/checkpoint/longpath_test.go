package checkpoint

import (
	"os"
	"strings"
	"testing"
)

// TestAWorkspacePathLongerThanPathMaxIsRestored: the workspace's files may lie deeper than PATH_MAX
// (4096 bytes) below /, which a capture reads and a restore writes through the os.Root without
// trouble; the checks before writing asked access(2) and statfs(2) by absolute path, got
// ENAMETOOLONG and refused every preview and restore of such a checkpoint ("cannot be written: file
// name too long"): files captured that could never be got back. They ask through the directory's
// descriptor now.
func TestAWorkspacePathLongerThanPathMaxIsRestored(t *testing.T) {
	ws, st := t.TempDir(), OpenStore(t.TempDir())
	deep := strings.TrimSuffix(strings.Repeat(strings.Repeat("d", 200)+"/", 25), "/")
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := root.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(rel, content string) {
		t.Helper()
		if err := root.WriteFile(rel, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put(deep+"/a.txt", "one")
	put(deep+"/b.txt", "kept")
	now := clock()
	c := create(t, st, ws, now, 1)
	put(deep+"/a.txt", "two")
	if err := root.Remove(deep + "/b.txt"); err != nil {
		t.Fatal(err)
	}
	p, err := st.Preview(ctx, ws, c.ID, nil)
	if err != nil || p.Count(ActionOverwrite) != 1 || p.Count(ActionCreate) != 1 {
		t.Fatalf("preview of a checkpoint deeper than PATH_MAX: %+v, %v", p, err)
	}
	res, err := st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: now})
	if err != nil || res.Guard == "" || res.Written != 2 {
		t.Fatalf("restore of a checkpoint deeper than PATH_MAX: %+v, %v", res, err)
	}
	for rel, want := range map[string]string{deep + "/a.txt": "one", deep + "/b.txt": "kept"} {
		got, err := root.ReadFile(rel)
		if err != nil || string(got) != want {
			t.Errorf("%s… = %q, %v; want %q", rel[len(rel)-10:], got, err, want)
		}
	}
}
