//go:build unix

package session

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentrewind/agentrewind/internal/fsutil"
)

// TestWriterReplacesOnlyRegularFiles: a blob, the vault and meta.json are renamed into place, and a
// rename replaces whatever node is there. A FIFO found at any of those paths is refused and left as
// it was, and the session is not committed over it.
func TestWriterReplacesOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	w := writerWithEvents(t, dir)
	blob := []byte(`{"blob":"in a FIFO's place"}`)
	sum := sha256.Sum256(blob)
	fifos := []string{
		filepath.Join(dir, BlobsDir, hex.EncodeToString(sum[:])),
		filepath.Join(dir, VaultFile),
		filepath.Join(dir, MetaFile),
	}
	for _, p := range fifos {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skipf("cannot make a FIFO here: %v", err)
		}
	}
	var ke *fsutil.OutputKindError
	if _, err := w.PutBlob(blob); !errors.As(err, &ke) {
		t.Errorf("PutBlob over a FIFO = %v, want *fsutil.OutputKindError", err)
	}
	if err := w.SetVault([]byte("sealed")); !errors.As(err, &ke) {
		t.Errorf("SetVault over a FIFO = %v, want *fsutil.OutputKindError", err)
	}
	if _, err := w.Close(nil); !errors.As(err, &ke) {
		t.Errorf("Close with a FIFO at meta.json = %v, want *fsutil.OutputKindError", err)
	}
	for _, p := range fifos {
		if info, err := os.Lstat(p); err != nil || info.Mode().Type() != fs.ModeNamedPipe {
			t.Errorf("%s was replaced: %v %v", p, info.Mode(), err)
		}
	}
}
