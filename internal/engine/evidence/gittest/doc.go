// Package gittest builds git repositories inside tests with go-git, so evidence and the commands
// that gather it are tested against real commits, ancestry and empty commits without a git binary.
// It is imported only by tests.
package gittest
