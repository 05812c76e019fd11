package fsutil

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestRemoveStaleTempsRemovesOnlyAbandonedOnesOfItsTarget leaves what killed writers would leave
// beside a target, and things that only look like it: only the first are removed.
func TestRemoveStaleTempsRemovesOnlyAbandonedOnesOfItsTarget(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "good.rewind")
	dead := deadPID(t)
	now := time.Now()
	leave := func(name string, dir bool, age time.Duration) string {
		t.Helper()
		path := filepath.Join(parent, name)
		if dir {
			mustMkdir(t, filepath.Join(path, "blobs"))
		} else {
			mustWrite(t, path, "half a bundle")
		}
		old := now.Add(-age)
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
		return path
	}
	owner := func(pid int, host string) string { return strconv.Itoa(pid) + "-" + host + "-12345" }
	here := hostTag()
	removed := []string{
		leave(".good.rewind.tmp-"+owner(dead, here), false, 0),                          // its process is gone
		leave(".good.rewind.tmp-"+owner(os.Getppid(), "0badc0de"), false, 25*time.Hour), // a day old, whoever made it
		leave(".good.rewind.tmp-"+owner(dead, here)+"9", true, 0),                       // a directory, its process gone
	}
	kept := []string{
		leave(".good.rewind.tmp-"+owner(os.Getppid(), here), false, 0),       // its process is alive
		leave(".good.rewind.tmp-"+owner(os.Getpid(), here), false, 0),        // this process's own
		leave(".good.rewind.tmp-"+owner(dead, "0badc0de"), false, time.Hour), // another host's, recent
		leave(".good.rewind.tmp-123", false, 48*time.Hour),                   // not named by an owner
		leave(".good.rewind.unpack-"+owner(dead, here), true, 0),             // another purpose's
		leave(".good.rewind.x.tmp-"+owner(dead, here), false, 0),             // another target's
		leave(".good.tmp-"+owner(dead, here), false, 0),                      // another target's
		leave("good.rewind.tmp-"+owner(dead, here), false, 0),                // not hidden: not one of ours
	}
	link := filepath.Join(parent, ".good.rewind.tmp-"+owner(dead, here)+"7")
	mustSymlink(t, kept[0], link)
	kept = append(kept, link)

	got := RemoveStaleTemps(target, "tmp", now)
	slices.Sort(got)
	slices.Sort(removed)
	if !slices.Equal(got, removed) {
		t.Errorf("removed %v, want %v", got, removed)
	}
	for _, p := range removed {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", p, err)
		}
	}
	for _, p := range kept {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

// TestWriteFileAtomicRemovesWhatAKilledWriteLeft: a kill -9 during a write leaves its temporary;
// the next write of the same file removes it, and names its own as this process's.
func TestWriteFileAtomicRemovesWhatAKilledWriteLeft(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "good.rewind")
	left := filepath.Join(dir, ".good.rewind.tmp-"+strconv.Itoa(deadPID(t))+"-"+hostTag()+"-42")
	mustWrite(t, left, "half a bundle")
	var tmp string
	if err := WriteFileAtomic(path, 0o644, func(w io.Writer) error {
		tmp = w.(*os.File).Name()
		_, err := w.Write([]byte("bundle"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "good.rewind" {
		t.Fatalf("left %v", entries)
	}
	want := ".good.rewind.tmp-" + strconv.Itoa(os.Getpid()) + "-" + hostTag() + "-"
	if base := filepath.Base(tmp); len(base) <= len(want) || base[:len(want)] != want {
		t.Fatalf("the temporary %s is not named as this process's (%s…)", base, want)
	}
}

// deadPID is the id of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run a process: %v", err)
	}
	return cmd.ProcessState.Pid()
}
