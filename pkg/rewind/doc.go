// Package rewind is the public Go SDK of agentrewind: a Go agent in any module writes its run as a
// Harness against AgentContext and records, replays and forks it in-process. It re-exports the
// engine's types under stable names and owns no logic of its own; package rewindtest turns a
// recording into a Go test.
package rewind
