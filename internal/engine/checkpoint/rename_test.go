package checkpoint

import (
	"bytes"
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

// TestStorePutsReplaceOnlyRegularFiles: a blob or manifest write renames its temporary into place,
// and a rename replaces whatever node is there. A FIFO (or a device) found where a blob or a manifest
// belongs is refused and left as it was, never swapped for a file.
func TestStorePutsReplaceOnlyRegularFiles(t *testing.T) {
	data := []byte(`{"kind":"manifest"}`)
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	dir := t.TempDir()
	blobs, manifests := DirBlobs{Dir: dir}, DirManifests{Dir: dir}
	blobPath, _ := blobs.path(hash)
	manifestPath, _ := manifests.path(hash)
	for _, p := range []string{blobPath, manifestPath} {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skipf("cannot make a FIFO here: %v", err)
		}
	}
	var ke *fsutil.OutputKindError
	if err := blobs.Put(ctx, hash, int64(len(data)), bytes.NewReader(data)); !errors.As(err, &ke) {
		t.Errorf("Put of a blob over a FIFO = %v, want *fsutil.OutputKindError", err)
	}
	if err := manifests.Put(ctx, hash, data); !errors.As(err, &ke) {
		t.Errorf("Put of a manifest over a FIFO = %v, want *fsutil.OutputKindError", err)
	}
	for _, p := range []string{blobPath, manifestPath} {
		if info, err := os.Lstat(p); err != nil || info.Mode().Type() != fs.ModeNamedPipe {
			t.Errorf("%s was replaced: %v %v", p, info.Mode(), err)
		}
	}
}
