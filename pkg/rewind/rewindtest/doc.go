// Package rewindtest turns a recorded session into a Go test: replay the agent against its recording
// with zero live calls and fail the test, explained, at the first step where it drifts. It owns no
// logic beyond loading, replaying and reporting.
package rewindtest
