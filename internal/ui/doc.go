// Package ui serves the read-only web timeline of recorded sessions: a session list with verdicts, a
// session's steps, the context at a step, step and fork diffs, the resume plan and the checkpoints. It
// gathers sessions from a Source and asks the engine (inspect, replay, verdict, checkpoint) every
// question; it decides nothing itself, writes nothing and never opens a vault.
package ui
