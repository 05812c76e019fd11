//go:build unix

package fsutil

import (
	"errors"
	"syscall"
)

// ProcessGone says whether no process has the id pid on this host.
func ProcessGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
