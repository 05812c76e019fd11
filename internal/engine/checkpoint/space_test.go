package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fixedSpace is a StatFS that reports the given free bytes on every file system, in 4 KiB blocks,
// with inodes counted only when inodes is set; calls counts its answers.
func fixedSpace(bytes uint64, inodes *uint64, calls *int) StatFS {
	return func(string) (FreeSpace, error) {
		if calls != nil {
			*calls++
		}
		fs := FreeSpace{Bytes: bytes, BlockSize: 4096}
		if inodes != nil {
			fs.Inodes, fs.InodesLimited = *inodes, true
		}
		return fs, nil
	}
}

// spaceWorkspace holds a checkpoint of a.txt (first in write order), big.bin (10,000 bytes) and
// new/deep/c.txt, and then a workspace where a.txt and big.bin changed and new/ is gone: a restore
// overwrites 2 files and creates 1 in 2 new directories.
func spaceWorkspace(t *testing.T) (ws string, store *Store, id string) {
	t.Helper()
	ws, store = t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a.txt": "alpha", "big.bin": strings.Repeat("b", 10000), "new/deep/c.txt": "gamma"})
	id = create(t, store, ws, clock(), 1).ID
	must(t, os.RemoveAll(filepath.Join(ws, "new")))
	write(t, ws, map[string]string{"a.txt": "changed", "big.bin": "small"})
	return ws, store, id
}

// TestARestoreThatDoesNotFitIsRefusedBeforeAnythingIsWritten: the writes a restore needs — every file
// whole in a temporary copy, rounded up to blocks, never counting the old file as freed, and a block
// per directory it creates — are checked against the free space of the file system, and a restore
// that needs one byte more than there is writes nothing.
func TestARestoreThatDoesNotFitIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	// a.txt 4096 + big.bin 12288 + c.txt 4096 + 2 directories 8192.
	const need = 4096 + 12288 + 4096 + 8192
	ws, store, id := spaceWorkspace(t)
	before := tree(t, ws)

	_, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardOff, Now: clock(), StatFS: fixedSpace(need-1, nil, nil)})
	var ns *NoSpaceError
	if !errors.As(err, &ns) {
		t.Fatalf("restore with %d bytes free: %v, want a NoSpaceError", need-1, err)
	}
	if d := cmp.Diff(&NoSpaceError{At: ".", Need: need, Available: need - 1}, ns); d != "" {
		t.Errorf("refusal (-want +got):\n%s", d)
	}
	if msg := err.Error(); !strings.Contains(msg, "28672") || !strings.Contains(msg, "28671") {
		t.Errorf("the refusal %q does not name both figures", msg)
	}
	if d := cmp.Diff(before, tree(t, ws)); d != "" {
		t.Errorf("the refused restore wrote (-before +after):\n%s", d)
	}

	inodes := uint64(4) // 3 files and 2 directories need 5
	_, err = store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardOff, Now: clock(), StatFS: fixedSpace(need, &inodes, nil)})
	if !errors.As(err, &ns) || !ns.Inodes || ns.Need != 5 || ns.Available != 4 {
		t.Fatalf("restore with 4 inodes free: %v, want a NoSpaceError for 5 inodes", err)
	}
	if d := cmp.Diff(before, tree(t, ws)); d != "" {
		t.Errorf("the restore refused for inodes wrote (-before +after):\n%s", d)
	}

	res, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardOff, Now: clock(), StatFS: fixedSpace(need, nil, nil)})
	if err != nil || res.Written != 3 {
		t.Fatalf("restore with exactly %d bytes free: %+v, %v", need, res, err)
	}
}

// TestAGuardInALocalStoreCountsAgainstTheSameFileSystem: a guard written to a local store on the
// workspace's file system needs room too — a blob (and its directory) for every file the restore
// replaces and its manifest — checked up front; and as the guard may take more than foreseen, the
// space is checked again after it, still before the first write.
func TestAGuardInALocalStoreCountsAgainstTheSameFileSystem(t *testing.T) {
	const writes = 4096 + 12288 + 4096 + 8192
	// a.txt's and big.bin's current bytes (one block each) and a directory each; the manifest:
	// (2 workspace files + 3 changes) × 512 bytes in one block, and its directory.
	const guard = 2*(4096+4096) + 4096 + 4096
	ws, store, id := spaceWorkspace(t)
	before := tree(t, ws)

	_, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardRequire, Now: clock(), StatFS: fixedSpace(writes+guard-1, nil, nil)})
	var ns *NoSpaceError
	if !errors.As(err, &ns) || ns.Need != writes+guard || ns.GuardNeed != guard {
		t.Fatalf("restore behind a local guard with %d bytes free: %v, want a NoSpaceError for %d (%d of the guard)", writes+guard-1, err, writes+guard, guard)
	}
	if list, _ := store.List(ctx); len(list) != 1 {
		t.Errorf("the refused restore stored a guard: %d checkpoints", len(list))
	}
	// Enough before the guard, too little after it: refused once the guard is stored, nothing written.
	calls := 0
	shrinking := func(p string) (FreeSpace, error) {
		calls++
		if calls == 1 {
			return FreeSpace{Bytes: writes + guard, BlockSize: 4096}, nil
		}
		return FreeSpace{Bytes: writes - 1, BlockSize: 4096}, nil
	}
	res, err := store.Restore(ctx, ws, id, RestoreOptions{Guard: GuardRequire, Now: clock(), StatFS: shrinking})
	if !errors.As(err, &ns) || ns.Need != writes || ns.GuardNeed != 0 || res.Guard == "" {
		t.Fatalf("restore whose guard took the space: %+v, %v; want a NoSpaceError for %d naming the guard taken", res, err, writes)
	}
	if d := cmp.Diff(before, tree(t, ws)); d != "" {
		t.Errorf("the refused restore wrote (-before +after):\n%s", d)
	}
	if calls != 2 {
		t.Errorf("statfs called %d times, want once before the guard and once after", calls)
	}

	// A remote store's guard takes nothing here: the writes alone must fit.
	remote := &Store{Manifests: store.Manifests, Blobs: wrappedBlobs{store.Blobs}}
	res, err = remote.Restore(ctx, ws, id, RestoreOptions{Guard: GuardRequire, Now: clock(), StatFS: fixedSpace(writes, nil, nil)})
	if err != nil || res.Guard == "" || res.Written != 3 {
		t.Fatalf("restore behind a remote guard with %d bytes free: %+v, %v", writes, res, err)
	}
}

// wrappedBlobs hides that a blob space is a local directory, as a remote store's is.
type wrappedBlobs struct{ Blobs }

// TestARestoreOntoAFullTmpfsWritesNothing: on a real 1 MiB tmpfs a restore of a 600 KiB file, next to
// a 500 KiB file written since, is refused up front; a.txt, first in order, would otherwise have been
// written before the big file's temporary copy hit ENOSPC.
func TestARestoreOntoAFullTmpfsWritesNothing(t *testing.T) {
	mnt := mountTmpfs(t, "1m")
	ws, store := filepath.Join(mnt, "ws"), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a.txt": "alpha", "big.bin": strings.Repeat("b", 600<<10)})
	c := create(t, store, ws, clock(), 1)
	// big.bin shrinks before filler.bin is written: both at once do not fit (map order is random).
	write(t, ws, map[string]string{"a.txt": "changed", "big.bin": "small"})
	write(t, ws, map[string]string{"filler.bin": strings.Repeat("f", 500<<10)})
	before := tree(t, ws)

	_, err := store.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardRequire, Now: clock()})
	var ns *NoSpaceError
	if !errors.As(err, &ns) || ns.Need != 4096+600<<10 || ns.Available >= ns.Need {
		t.Fatalf("restore onto a full tmpfs: %v, want a NoSpaceError for %d bytes", err, 4096+600<<10)
	}
	if d := cmp.Diff(before, tree(t, ws)); d != "" {
		t.Errorf("the refused restore wrote (-before +after):\n%s", d)
	}
	must(t, os.Remove(filepath.Join(ws, "filler.bin")))
	if _, err := store.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardOff, Now: clock()}); err != nil {
		t.Fatalf("restore once there is room: %v", err)
	}
}

// mountTmpfs mounts a tmpfs of the given size on a temporary directory and unmounts it when the test
// ends; it skips the test when mounting is not allowed here.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	d := t.TempDir()
	if err := run(t, "mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", d); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if run(t, "umount", d) != nil {
			_ = run(t, "umount", "-l", d)
		}
	})
	return d
}
