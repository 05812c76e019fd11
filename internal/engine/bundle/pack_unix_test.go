//go:build unix

package bundle

import (
	"context"
	"io"
	"path/filepath"
	"syscall"
	"testing"
)

func TestPackRefusesAFIFO(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "session")
	writeTree(t, dir, map[string]string{"meta.json": "{}", "events.jsonl": ""})
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600); err != nil {
		t.Skipf("cannot create a FIFO here: %v", err)
	}
	_, err := Pack(context.Background(), dir, io.Discard)
	assertError(t, err, &UnsafeEntryError{Name: "pipe", Reason: reasonFIFO})
}
