package checkpoint

import (
	"errors"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"
)

// The inode flags (chattr attributes) that stop a restore's writes, as FS_IOC_GETFLAGS reports them
// (FS_APPEND_FL and FS_IMMUTABLE_FL of <linux/fs.h>, which x/sys/unix does not export).
const (
	flagAppend    = 0x00000020
	flagImmutable = 0x00000010
)

// inodeFlags reads the inode flags of the workspace file (or directory, when dir) rel. A file system
// without them (the ioctl answers ENOTTY, EOPNOTSUPP or EINVAL) has none, and so has a file the
// caller may not open to ask: only root sets them, and a restore run by anyone else is then told by
// the write itself.
func inodeFlags(root *os.Root, rel string, dir bool) (uint32, error) {
	var f *os.File
	var err error
	if dir {
		f, err = openDir(root, rel)
	} else {
		f, _, err = openRegular(root, rel)
	}
	if errors.Is(err, os.ErrPermission) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	conn, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var flags uint32
	var ierr error
	if err := conn.Control(func(fd uintptr) { flags, ierr = unix.IoctlGetUint32(int(fd), unix.FS_IOC_GETFLAGS) }); err != nil {
		return 0, err
	}
	if errors.Is(ierr, unix.ENOTTY) || errors.Is(ierr, unix.EOPNOTSUPP) || errors.Is(ierr, unix.EINVAL) {
		return 0, nil
	}
	return flags, ierr
}

// statFS is statfs(2): the bytes and inodes an unprivileged writer may still use on the file system
// holding p.
func statFS(p string) (FreeSpace, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return FreeSpace{}, &os.PathError{Op: "statfs", Path: p, Err: err}
	}
	return freeSpaceOf(st), nil
}

// lockWorkspace takes the workspace's restore lock, an exclusive flock(2) on its top directory, without
// waiting: ErrRestoreInProgress when a restore or a capture holds it. The lock goes with the returned
// file (closing it releases it, and so does the death of the process holding it, even by SIGKILL).
func lockWorkspace(root *os.Root) (*os.File, error) { return flockWorkspace(root, unix.LOCK_EX) }

// shareWorkspace takes the workspace's lock shared, as a capture does, without waiting:
// ErrRestoreInProgress while a restore holds it exclusively. Captures share it with each other.
func shareWorkspace(root *os.Root) (*os.File, error) { return flockWorkspace(root, unix.LOCK_SH) }

func flockWorkspace(root *os.Root, how int) (*os.File, error) {
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	conn, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var ferr error
	if err := conn.Control(func(fd uintptr) { ferr = unix.Flock(int(fd), how|unix.LOCK_NB) }); err != nil {
		f.Close()
		return nil, err
	}
	switch {
	case errors.Is(ferr, unix.EWOULDBLOCK):
		f.Close()
		return nil, ErrRestoreInProgress
	case errors.Is(ferr, unix.ENOLCK), errors.Is(ferr, unix.EOPNOTSUPP), errors.Is(ferr, unix.ENOSYS):
		return f, nil // a file system without locks: nothing to serialise on
	case ferr != nil:
		f.Close()
		return nil, ferr
	}
	return f, nil
}

// accessAt is access(2) of the workspace path rel (of the workspace dir), asked through the descriptor
// of the directory holding it: an absolute path longer than PATH_MAX (ENAMETOOLONG), which the
// restore's own writes through the os.Root never meet, must not refuse the restore.
func accessAt(_ string, root *os.Root, rel string, mode uint32) error {
	parent, base := path.Dir(rel), path.Base(rel)
	if rel == "." {
		parent, base = ".", "."
	}
	d, err := openDir(root, parent)
	if err != nil {
		return err
	}
	defer d.Close()
	conn, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var aerr error
	if err := conn.Control(func(fd uintptr) { aerr = unix.Faccessat(int(fd), base, mode, 0) }); err != nil {
		return err
	}
	return aerr
}

// statFSAt is statFS of the workspace directory rel, through its descriptor (fstatfs(2)), however long
// its absolute path.
func statFSAt(_ string, root *os.Root, rel string) (FreeSpace, error) {
	d, err := openDir(root, rel)
	if err != nil {
		return FreeSpace{}, err
	}
	defer d.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(d.Fd()), &st); err != nil {
		return FreeSpace{}, &os.PathError{Op: "fstatfs", Path: rel, Err: err}
	}
	return freeSpaceOf(st), nil
}

func freeSpaceOf(st unix.Statfs_t) FreeSpace {
	return FreeSpace{Bytes: st.Bavail * uint64(st.Bsize), BlockSize: int64(st.Bsize), Inodes: st.Ffree, InodesLimited: st.Files > 0}
}

// openDir opens the workspace directory rel without waiting: O_DIRECTORY refuses anything else, and
// O_NONBLOCK keeps a named pipe swapped in for it from blocking the open.
func openDir(root *os.Root, rel string) (*os.File, error) {
	return root.OpenFile(rel, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
}

// fileStatOf is the quick-check stat of a file's lstat or fstat.
func fileStatOf(fi os.FileInfo) FileStat {
	st := FileStat{Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), MTime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.CTime, st.Inode = sys.Ctim.Nano(), sys.Ino
	}
	return st
}
