package checkpoint

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// readDir lists the workspace directory rel with getdents(2) and takes, with fstatat(2) on the
// directory's descriptor (never following a link), the stat of every regular file when stat is set,
// and of every entry whose type the listing does not give.
func readDir(root *os.Root, rel string, stat bool) ([]walkChild, error) {
	f, err := openDir(root, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	conn, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var children []walkChild
	var rerr error
	cerr := conn.Control(func(fd uintptr) {
		buf := make([]byte, 32<<10)
		for {
			n, err := unix.Getdents(int(fd), buf)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				rerr = &os.PathError{Op: "getdents", Path: rel, Err: err}
				return
			}
			if n <= 0 {
				return
			}
			for off := 0; off < n; {
				// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16, d_type u8, d_name.
				reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
				dtype := buf[off+18]
				name := buf[off+19 : off+reclen]
				off += reclen
				for i, b := range name {
					if b == 0 {
						name = name[:i]
						break
					}
				}
				if s := string(name); s != "." && s != ".." {
					c := walkChild{name: s, typ: direntType(dtype)}
					if c.typ == fs.ModeIrregular|fs.ModeType || (c.typ == 0 && stat) {
						statAt(int(fd), &c)
					}
					children = append(children, c)
				}
			}
		}
	})
	if cerr != nil {
		return nil, cerr
	}
	if rerr != nil {
		return nil, rerr
	}
	sortChildren(children)
	return children, nil
}

// direntType is the type a directory listing gives; fs.ModeIrregular|fs.ModeType when it gives none
// (DT_UNKNOWN: some file systems never do).
func direntType(t uint8) fs.FileMode {
	switch t {
	case unix.DT_REG:
		return 0
	case unix.DT_DIR:
		return fs.ModeDir
	case unix.DT_LNK:
		return fs.ModeSymlink
	case unix.DT_UNKNOWN:
		return fs.ModeIrregular | fs.ModeType
	}
	return fs.ModeIrregular
}

// statAt takes c's stat in the directory dirfd without following a link, and its type from it.
func statAt(dirfd int, c *walkChild) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(dirfd, c.name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			c.statErr = &os.PathError{Op: "fstatat", Path: c.name, Err: err}
			if c.typ == fs.ModeIrregular|fs.ModeType {
				c.typ = fs.ModeIrregular
				if errors.Is(err, syscall.ENOENT) {
					c.typ = 0 // a regular file as far as anyone knows: its open finds it gone
				}
			}
			return
		}
		break
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		c.typ = 0
	case unix.S_IFDIR:
		c.typ = fs.ModeDir
	case unix.S_IFLNK:
		c.typ = fs.ModeSymlink
	default:
		c.typ = fs.ModeIrregular
	}
	if c.typ == 0 {
		c.stat = FileStat{Size: st.Size, Mode: st.Mode & 0o777, MTime: st.Mtim.Nano(), CTime: st.Ctim.Nano(), Inode: st.Ino}
		c.statted = true
	}
}
