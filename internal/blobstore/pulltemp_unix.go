//go:build unix

package blobstore

import (
	"errors"
	"syscall"
)

// processGone says whether no process has the id pid on this host.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
