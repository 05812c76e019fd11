// Package testenv gives tests the real servers of package devenv, tied to the test's life: started on
// demand, stopped and cleaned up when the test ends, their output shown when it failed. Only tests
// import it.
package testenv
