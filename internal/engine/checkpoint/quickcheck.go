package checkpoint

import "time"

// RacyWindow is how close to the start of the capture that recorded it a file's modification time may
// be before the file is read again whatever its stat says. A file written in the same timestamp tick
// as, but after, the moment a capture read it keeps its size and mtime, so its stat cannot tell the
// write apart (git calls such index entries "racy"). Two seconds covers the coarsest timestamps
// checkpoints meet (FAT and some network file systems keep 2 s); ext4, xfs and btrfs keep
// nanoseconds, refreshed on each kernel tick.
const RacyWindow = 2 * time.Second

// FileStat is what a capture compares with the previous manifest before reading a file: git's index
// quick-check over size, mode, modification and change time and inode number. The change time is
// set by the kernel on every write and metadata change and cannot be set back by a program, so a tool
// that restores a file's mtime after writing it is still seen.
type FileStat struct {
	Size int64
	// Mode holds the permission bits, as Entry.Mode.
	Mode uint32
	// MTime and CTime are nanoseconds since the Unix epoch; 0 where the system does not report one.
	MTime, CTime int64
	Inode        uint64
}

// statOf is the FileStat an entry recorded; a manifest written before stat fields (schema 1) has an
// MTime of 0.
func statOf(e Entry) FileStat {
	return FileStat{Size: e.Size, Mode: e.Mode, MTime: e.MTimeNs, CTime: e.CTimeNs, Inode: e.Inode}
}

// withStat records st in e, for the next capture's quick-check.
func withStat(e Entry, st FileStat) Entry {
	e.MTimeNs, e.CTimeNs, e.Inode = st.MTime, st.CTime, st.Inode
	return e
}

// Unchanged decides whether the file prev recorded, captured by a capture that started at
// baselineStart, still holds the bytes prev names now that its stat is cur, so it need not be read:
// prev is a regular file with a recorded stat, every stat field is equal, and prev is not racy (its
// mtime lies more than RacyWindow before baselineStart). Anything else is read again.
//
// The blind spot, shared with git: a write that leaves size, mtime, ctime and inode as they were. On
// Linux only a file system whose timestamps are coarser than RacyWindow, a clock set back past the
// baseline's start, or a write through a shared memory map that the kernel has not yet stamped, can
// do that.
func Unchanged(prev Entry, cur FileStat, baselineStart time.Time) bool {
	if prev.Type != TypeFile || prev.MTimeNs == 0 {
		return false
	}
	if statOf(prev) != cur {
		return false
	}
	return prev.MTimeNs < baselineStart.Add(-RacyWindow).UnixNano()
}
