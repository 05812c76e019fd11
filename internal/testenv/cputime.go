package testenv

import (
	"syscall"
	"testing"
	"time"
)

// CPUTime is the CPU time this process has used, user and system. A bound on a ratio of CPU times
// holds while go test runs other packages beside the test; a bound on wall time does not.
func CPUTime(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
