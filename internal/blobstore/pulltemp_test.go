package blobstore

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPullRemovesOnlyStaleTemporaryDirectoriesOfItsOwn leaves what killed pulls would leave beside
// the destination, and things that only look like it: the next pull removes exactly the first.
func TestPullRemovesOnlyStaleTemporaryDirectoriesOfItsOwn(t *testing.T) {
	dir, _, store, _ := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	leave := func(name string, owner *pullOwner, age time.Duration) string {
		t.Helper()
		tmp := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(tmp, "blobs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if owner != nil {
			data, _ := json.Marshal(owner)
			marker := filepath.Join(tmp, pullMarker)
			if err := os.WriteFile(marker, data, 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-age)
			if err := os.Chtimes(marker, old, old); err != nil {
				t.Fatal(err)
			}
		}
		return tmp
	}
	killed := leave(".out.pull-111", &pullOwner{Dir: out, Host: host, PID: dead.ProcessState.Pid()}, 0)
	ancient := leave(".out.pull-222", &pullOwner{Dir: out, Host: "another-host", PID: 1}, 25*time.Hour)
	kept := []string{
		leave(".out.pull-333", nil, 0), // no marker: not clearly a pull's
		leave(".out.pull-444", &pullOwner{Dir: out, Host: host, PID: os.Getppid()}, 0),                        // its process is alive
		leave(".out.pull-555", &pullOwner{Dir: out, Host: "another-host", PID: 1}, time.Hour),                 // another host's, recent
		leave(".out.pull-666", &pullOwner{Dir: out + ".pull-x", Host: host, PID: dead.ProcessState.Pid()}, 0), // another destination's
		leave(".other.pull-777", &pullOwner{Dir: filepath.Join(parent, "other"), Host: host, PID: dead.ProcessState.Pid()}, 0),
	}
	res, err := store.Pull(ctx, "s1", out)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(res.RemovedStale)
	if !slices.Equal(res.RemovedStale, []string{killed, ancient}) {
		t.Errorf("removed %v, want only %v", res.RemovedStale, []string{killed, ancient})
	}
	for _, tmp := range []string{killed, ancient} {
		if _, err := os.Stat(tmp); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", tmp, err)
		}
	}
	for _, tmp := range kept {
		if _, err := os.Stat(tmp); err != nil {
			t.Errorf("%s was removed: %v", tmp, err)
		}
	}
	assertSameSession(t, dir, out) // the marker is not part of the pulled session
}

// TestAFailedPullLeavesNothingItCreated: not the destination, not its temporary directory, not the
// parent directories it had to make.
func TestAFailedPullLeavesNothingItCreated(t *testing.T) {
	dir, _, store, mem := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	key := keys(t, mem, store.Layout().BlobsPrefix())[0]
	data, _ := mem.Bytes(key)
	data[0] ^= 1
	mem.Set(key, data)
	root := t.TempDir()
	if _, err := store.Pull(ctx, "s1", filepath.Join(root, "a", "b", "out")); err == nil {
		t.Fatal("pull of a damaged blob succeeded")
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("a failed pull left %v in %s", entries, root)
	}
}

// TestPullRefusesASymlinkedDestination: renaming the session over a link would replace the link
// and leave its target empty, so the pull says so instead.
func TestPullRefusesASymlinkedDestination(t *testing.T) {
	dir, _, store, _ := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Pull(ctx, "s1", link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("pull into a symbolic link: %v", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v", err)
	}
}
