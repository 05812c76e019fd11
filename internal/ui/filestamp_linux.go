package ui

import (
	"fmt"
	"os"
	"syscall"
)

// fileStamp names the state of a file without reading it: its inode, size, modification time and
// change time. The change time moves with every write and cannot be set back by the file's owner
// (os.Chtimes sets only the access and modification times), so an edit that keeps the length and
// restores the modification time still shows.
func fileStamp(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano()), nil
	}
	return fmt.Sprintf("%d/%d/%d/%d.%d", st.Ino, fi.Size(), fi.ModTime().UnixNano(), st.Ctim.Sec, st.Ctim.Nsec), nil
}
