package checkpoint

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestAFileSwappedForAFIFOWhileItIsOpenedHangsNothing: a regular file replaced by a named pipe between
// the lstat that saw a file and the open used to block that open forever (no writer ever comes), and
// with it the capture, the restore's survey and the command's --timeout. The open no longer waits and
// the swapped path is refused.
func TestAFileSwappedForAFIFOWhileItIsOpenedHangsNothing(t *testing.T) {
	ws, st := t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a.txt": "one"})
	c := create(t, st, ws, clock(), 1)
	write(t, ws, map[string]string{"a.txt": "two"})
	swap := func(rel string) {
		p := filepath.Join(ws, filepath.FromSlash(rel))
		if err := os.Remove(p); err != nil {
			t.Error(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Error(err)
		}
		afterLstat = nil
	}
	defer func() { afterLstat = nil }()
	for name, run := range map[string]func() error{
		"capture": func() error {
			_, err := st.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(2), Now: clock()})
			return err
		},
		"restore": func() error {
			_, err := st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardOff, Now: clock()})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			must(t, os.RemoveAll(filepath.Join(ws, "a.txt")))
			write(t, ws, map[string]string{"a.txt": "two"})
			afterLstat = swap
			done := make(chan error, 1)
			go func() { done <- run() }()
			select {
			case err := <-done:
				if err == nil {
					t.Errorf("%s of a file swapped for a FIFO succeeded", name)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s blocked opening a FIFO swapped in for a file", name)
			}
		})
	}
}
