// Package replay records, replays and forks agent runs. An agent is a Harness — a function over an
// AgentContext whose model, tools, clock, random, uuid, note and ledger methods are the only sanctioned
// boundary crossings. The same harness runs in three modes:
//
//   - Record: every call goes live and is written to a session directory, redacted.
//   - Replay: every call is served from a recording through the Matcher, with zero live calls under
//     the Strict drift policy; a call the recording does not hold is a *DriftError that says where and
//     how the request differs from the nearest recorded one.
//   - Fork: the steps before AtStep are served from the recording, the rest go live with overrides, and
//     the result says whether a goal was reached, where the run diverged and what the live tail cost.
//
// Lanes follow context.Context: AgentContext.Go derives a child lane for a goroutine, and each lane
// numbers its calls at initiation so concurrent branches replay in their own order. I/O the harness does
// outside the AgentContext is not recorded and runs again on replay.
package replay
