//go:build unix

package fsutil

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWriteFileAtomicWritesIntoDevicesAndFIFOs covers every kind of node an output path can name,
// directly and through a symbolic link: a character device or FIFO is written into and stays what
// it was, a block device, a socket and a dangling link are refused and left alone, and only a
// regular file is ever replaced.
func TestWriteFileAtomicWritesIntoDevicesAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	null := filepath.Join(dir, "null")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, int(mkdev(1, 3))); err != nil {
		null = os.DevNull // not root: the machine's own, which only a broken writer could replace
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	block := filepath.Join(dir, "block")
	haveBlock := syscall.Mknod(block, syscall.S_IFBLK|0o600, int(mkdev(7, 200))) == nil
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("cannot make a socket here: %v", err)
	}
	defer l.Close()
	mustSymlink(t, null, filepath.Join(dir, "to-null"))
	mustSymlink(t, fifo, filepath.Join(dir, "to-fifo"))
	mustSymlink(t, filepath.Join(dir, "missing"), filepath.Join(dir, "dangling"))
	mustSymlink(t, sock, filepath.Join(dir, "to-sock"))

	payload := strings.Repeat("bundle bytes ", 1000)
	write := func(w io.Writer) error { _, err := io.WriteString(w, payload); return err }
	for _, tc := range []struct {
		name, path string
		kind       fs.FileMode // the node that must still be at path (Lstat)
		fifo       bool        // read what is written
		refused    string      // the error's text, when refused
	}{
		{"a character device", null, fs.ModeDevice | fs.ModeCharDevice, false, ""},
		{"a link to a character device", filepath.Join(dir, "to-null"), fs.ModeSymlink, false, ""},
		{"a FIFO", fifo, fs.ModeNamedPipe, true, ""},
		{"a link to a FIFO", filepath.Join(dir, "to-fifo"), fs.ModeSymlink, true, ""},
		{"a block device", block, fs.ModeDevice, false, "is a block device"},
		{"a socket", sock, fs.ModeSocket, false, "is a socket"},
		{"a link to a socket", filepath.Join(dir, "to-sock"), fs.ModeSymlink, false, "is a socket"},
		{"a dangling link", filepath.Join(dir, "dangling"), fs.ModeSymlink, false, "a symbolic link to a missing file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.path == block && !haveBlock {
				t.Skip("cannot make a block device node here")
			}
			got := make(chan string, 1)
			if tc.fifo {
				go func() {
					f, err := os.Open(fifo)
					if err != nil {
						got <- err.Error()
						return
					}
					defer f.Close()
					data, _ := io.ReadAll(f)
					got <- string(data)
				}()
			}
			err := WriteFileAtomic(tc.path, 0o600, write)
			var ke *OutputKindError
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("WriteFileAtomic(%s) = %v, want it written into", tc.path, err)
			case tc.refused != "" && (!errors.As(err, &ke) || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("WriteFileAtomic(%s) = %v, want *OutputKindError saying %q", tc.path, err, tc.refused)
			}
			info, err := os.Lstat(tc.path)
			if err != nil || info.Mode().Type() != tc.kind {
				t.Fatalf("%s is now %v (%v), want %v left in place", tc.path, info.Mode().Type(), err, tc.kind)
			}
			if tc.fifo {
				if data := <-got; data != payload {
					t.Fatalf("the FIFO's reader got %d bytes, want %d", len(data), len(payload))
				}
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 9 && len(entries) != 8 {
		t.Fatalf("temporaries were left beside the outputs: %v", entries)
	}
}

// TestRenameOverFileReplacesOnlyARegularFile is the check every atomic writer makes right before its
// rename, after the path may have changed.
func TestRenameOverFileReplacesOnlyARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	mustSymlink(t, filepath.Join(dir, "file"), filepath.Join(dir, "link"))
	mustWrite(t, filepath.Join(dir, "file"), "old")
	for _, tc := range []struct {
		path   string
		kind   fs.FileMode
		refuse bool
	}{
		{fifo, fs.ModeNamedPipe, true},
		{filepath.Join(dir, "link"), fs.ModeSymlink, true},
		{dir, fs.ModeDir, true},
		{filepath.Join(dir, "file"), 0, false},
		{filepath.Join(dir, "new"), 0, false},
	} {
		tmp := filepath.Join(dir, "tmp")
		mustWrite(t, tmp, "new")
		err := RenameOverFile(tmp, tc.path)
		if (err != nil) != tc.refuse {
			t.Fatalf("RenameOverFile(%s) = %v, want refused=%v", tc.path, err, tc.refuse)
		}
		if info, err := os.Lstat(tc.path); err != nil || info.Mode().Type() != tc.kind {
			t.Fatalf("%s is now %v (%v), want %v", tc.path, info.Mode().Type(), err, tc.kind)
		}
		os.Remove(tmp)
	}
}

func mkdev(major, minor uint32) uint64 {
	return uint64(major)<<8 | uint64(minor)
}
