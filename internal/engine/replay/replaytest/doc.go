// Package replaytest turns a recorded session into a Go test: replay the agent against its recording
// with zero live calls and fail the test, explained, at the first step where it drifts. It is the
// regression-test harness for agents written against the replay.Harness API; it owns no logic beyond
// loading, replaying and reporting.
package replaytest
