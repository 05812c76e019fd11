// Package testenv gives tests the real servers of package devenv, tied to the test's life: started on
// demand, stopped and cleaned up when the test ends, their output shown when it failed; and the CPU
// time a process has used, for bounds that other packages' tests running beside it must not move.
// Only tests import it.
package testenv
