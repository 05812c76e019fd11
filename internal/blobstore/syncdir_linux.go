//go:build linux

package blobstore

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncBarrier makes everything a pull writes under its temporary directory durable before the pull
// renames it into place. On Linux that is one syncfs(2) of the directory's file system instead of
// one fsync per file: a pull writes hundreds of small blobs, and an fsync apiece costs a journal
// commit apiece, which made a pull several times slower than the download it does. The directory
// is opened before anything is written, because syncfs reports the write-back errors of the file system since its
// descriptor was opened: an error writing back any file of the pull, before or during the call,
// fails it, as that file's own fsync would have. The guarantee is the one per-file fsyncs gave — no
// session at its destination with bytes still in flight — and a little more: the directory entries
// are synced too.
type syncBarrier struct{ dir *os.File }

func openSyncBarrier(dir string) (*syncBarrier, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return &syncBarrier{dir: f}, nil
}

// file is called on each file written, before it is closed; the barrier syncs it later.
func (b *syncBarrier) file(*os.File) error { return nil }

// sync returns once every file written since the barrier was opened is on disk.
func (b *syncBarrier) sync() error {
	if err := unix.Syncfs(int(b.dir.Fd())); err != nil {
		return fmt.Errorf("syncing %s to disk: %w", b.dir.Name(), err)
	}
	return nil
}

func (b *syncBarrier) close() { b.dir.Close() }
