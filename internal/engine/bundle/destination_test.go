package bundle

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/fsutil"
)

// TestUnpackRefusesADestinationItCannotUse: a symbolic link (even to an empty directory) would be
// replaced by the session and its target left empty, and a file is not a directory. Both are a
// *DestinationError, about the local file system rather than the bundle, and change nothing.
func TestUnpackRefusesADestinationItCannotUse(t *testing.T) {
	src, _ := sampleSession(t)
	archive, _ := pack(t, src)
	for _, tc := range []struct {
		name string
		make func(t *testing.T, dest string)
		want string
	}{
		{"a symbolic link to an empty directory", func(t *testing.T, dest string) {
			if err := os.Symlink(t.TempDir(), dest); err != nil {
				t.Skipf("cannot create symlinks here: %v", err)
			}
		}, "is a symbolic link"},
		{"a dangling symbolic link", func(t *testing.T, dest string) {
			if err := os.Symlink(filepath.Join(t.TempDir(), "nowhere"), dest); err != nil {
				t.Skipf("cannot create symlinks here: %v", err)
			}
		}, "is a symbolic link"},
		{"a file", func(t *testing.T, dest string) {
			if err := os.WriteFile(dest, archive, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "x")
			tc.make(t, dest)
			before, _ := os.Lstat(dest)
			_, err := Unpack(context.Background(), bytes.NewReader(archive), dest, Limits{})
			var de *DestinationError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a *DestinationError saying %q", err, tc.want)
			}
			if after, err := os.Lstat(dest); err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
				t.Fatalf("the destination was replaced: %v", err)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 1 {
				t.Fatalf("left %v beside it", entries)
			}
		})
	}
}

// TestUnpackRemovesWhatKilledUnpacksLeft: an unpack killed half way leaves its temporary directory
// beside the destination, named as its process's; the next unpack into the same destination removes
// it, and leaves those of a live process and of another destination.
func TestUnpackRemovesWhatKilledUnpacksLeft(t *testing.T) {
	src, _ := sampleSession(t)
	archive, _ := pack(t, src)
	parent := t.TempDir()
	dest := filepath.Join(parent, "x")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("cannot run a process: %v", err)
	}
	// A temporary as a killed unpack names it: made by this process's MkdirTemp, renamed to a dead pid.
	name := func(target string, pid int) string {
		t.Helper()
		tmp, err := fsutil.MkdirTemp(target, tempPurpose)
		if err != nil {
			t.Fatal(err)
		}
		writeTree(t, tmp, map[string]string{"events.jsonl": "half"})
		renamed := strings.Replace(tmp, "-"+strconv.Itoa(os.Getpid())+"-", "-"+strconv.Itoa(pid)+"-", 1)
		if err := os.Rename(tmp, renamed); err != nil {
			t.Fatal(err)
		}
		return renamed
	}
	killed := name(dest, dead.ProcessState.Pid())
	alive := name(dest, os.Getppid())
	other := name(filepath.Join(parent, "y"), dead.ProcessState.Pid())

	sum, err := Unpack(context.Background(), bytes.NewReader(archive), dest, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.RemovedStale, []string{killed}) {
		t.Errorf("RemovedStale = %v, want [%s]", sum.RemovedStale, killed)
	}
	if _, err := os.Stat(killed); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", killed, err)
	}
	for _, kept := range []string{alive, other} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
}
