//go:build !linux

package checkpoint

import (
	"math"
	"os"
	"syscall"
)

// Inode flags are a Linux ext2-family notion; elsewhere a file has none that a restore reads.
const (
	flagAppend    = 0
	flagImmutable = 0
)

func inodeFlags(*os.Root, string, bool) (uint32, error) { return 0, nil }

// statFS knows no free space off Linux: the restore's own writes report a full disk there.
func statFS(string) (FreeSpace, error) {
	return FreeSpace{Bytes: math.MaxUint64, BlockSize: 1}, nil
}

// lockWorkspace is the restore lock; off Linux restores are not serialised.
func lockWorkspace(root *os.Root) (*os.File, error) { return root.Open(".") }

// shareWorkspace is a capture's share of the lock; off Linux there is none.
func shareWorkspace(root *os.Root) (*os.File, error) { return root.Open(".") }

// accessAt is access(2) of the workspace path rel of dir.
func accessAt(dir string, _ *os.Root, rel string, mode uint32) error {
	return syscall.Access(abs(dir, rel), mode)
}

// statFSAt is statFS of the workspace directory rel of dir.
func statFSAt(dir string, _ *os.Root, rel string) (FreeSpace, error) { return statFS(abs(dir, rel)) }

// fileStatOf is the quick-check stat of a file's lstat or fstat: off Linux only size, mode and mtime
// are compared.
func fileStatOf(fi os.FileInfo) FileStat {
	return FileStat{Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), MTime: fi.ModTime().UnixNano()}
}
