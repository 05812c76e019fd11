//go:build linux

package blobstore

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// syncBarrier makes everything a pull writes under its temporary directory durable before the pull
// renames it into place. Each file's write-back starts as soon as the file is written
// (sync_file_range(2), which does not wait), so the disk works while the download goes on; sync then
// waits on every file with fdatasync, syncParallel at a time so that the file system commits one
// journal transaction for many of them, and syncs the directories that hold them. Two designs
// before this one were slow: an fsync apiece one after the other cost a journal commit apiece, and
// one syncfs(2) of the whole file system also wrote back every other process's dirty data on it (a
// build, the S3 server itself in tests): seconds on a busy machine, for a 100 MB pull. The
// guarantee is the same — no session at its destination with bytes still in flight, its directory
// entries included.
type syncBarrier struct {
	root  string
	mu    sync.Mutex
	files map[string]bool
}

// syncParallel is how many fdatasync calls wait at once: enough to share journal commits.
const syncParallel = 16

// testHookSynced, when set by a test, is called with every path sync made durable.
var testHookSynced func(path string)

func openSyncBarrier(dir string) (*syncBarrier, error) {
	return &syncBarrier{root: dir, files: map[string]bool{}}, nil
}

// file is called on each file written, before it is closed: its write-back starts now, and sync
// waits for it. A file system that cannot start write-back early (the call is only a hint) is
// still synced by sync.
func (b *syncBarrier) file(f *os.File) error {
	_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	b.mu.Lock()
	b.files[f.Name()] = true
	b.mu.Unlock()
	return nil
}

// sync returns once every file given to file, and the directories that hold them, are on disk.
func (b *syncBarrier) sync() error {
	b.mu.Lock()
	files := make([]string, 0, len(b.files))
	dirs := map[string]bool{b.root: true}
	for path := range b.files {
		files = append(files, path)
		dirs[filepath.Dir(path)] = true
	}
	b.mu.Unlock()
	err := forEach(context.Background(), syncParallel, files, func(_ context.Context, path string) error {
		return syncPath(path, unix.Fdatasync)
	})
	if err != nil {
		return err
	}
	// Deepest first: a directory's entry in its parent is synced after what it holds.
	for _, dir := range slices.Backward(slices.Sorted(maps.Keys(dirs))) {
		if err := syncPath(dir, unix.Fsync); err != nil {
			return err
		}
	}
	return nil
}

// syncPath opens path and waits until it is on disk. A write-back error of the file is reported to
// this descriptor too: Linux reports an error no descriptor has seen yet to the next fsync of the file.
func syncPath(path string, sync func(fd int) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("syncing %s to disk: %w", path, err)
	}
	defer f.Close()
	if err := sync(int(f.Fd())); err != nil {
		return fmt.Errorf("syncing %s to disk: %w", path, err)
	}
	if testHookSynced != nil {
		testHookSynced(path)
	}
	return nil
}

// placed makes durable the entry of the directory the session was just renamed to, in its parent:
// until then a crash could lose the whole pulled session (never leave half of one).
func (b *syncBarrier) placed(dir string) error {
	return syncPath(filepath.Dir(dir), unix.Fsync)
}

func (b *syncBarrier) close() {}
