//go:build !linux

package ui

import (
	"fmt"
	"os"
)

// fileStamp names the state of a file without reading it: its size and modification time (the
// change time, which an owner cannot set back, is read only on Linux).
func fileStamp(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano()), nil
}
