// Package rewind owns the conversation-rewind verdict and the no-good note.
//
// A failed fix attempt accretes corruption: every retry pastes its own dead end into the next prompt
// and the loop walks back into the same hole. Rewinding is the distrust primitive pointed at the
// transcript: roll back to a checkpoint the recorder stamped (never a turn the agent says it was at),
// drop the dead-end turns after it, and re-enter with a note built only from bytes nobody can forge.
// Subtract forged context; author nothing.
//
// Decide is pure and checks, in order:
//
//   - NO_REWIND unless the trigger is a ground-truth stop signal: resume DIVERGED, or convergence
//     THRASHING or STARVED. CONVERGING, RESUMABLE, COMPLETE or INSUFFICIENT leave the transcript alone —
//     the cap is on ground truth, never on the agent's "I'm close".
//   - UNANCHORED when the checkpoint is absent (no recorder-minted ANCHOR or SUSPEND) or the live turn at its
//     index is missing or does not digest to the minted stamp: the agent or a successor rewrote history
//     under the checkpoint, so the verdict rewinds to nothing rather than to an unstamped turn. The
//     no-good note is still built: the verdict and the environment's error are evidence an operator
//     wants.
//   - REWIND otherwise: truncate to the checkpoint turn and drop every turn strictly after it.
//
// The no-good note carries exactly two kinds of bytes, and the types make a third impossible:
//
//   - closed verdict Tokens, which only this package's constructors can make, from typed verdict values,
//     counts and well-formed SHAs, rendered by the kernel-owned templates of a Registry (a registry can
//     only narrow the built-in vocabulary, never add a template); a token whose kind the registry does
//     not know is dropped;
//   - an EnvExcerpt — an environment error excerpt — that attaches only when its author is the recorder
//     (OS_RECORDED) or a third party (THIRD_PARTY); anything the agent authored, or of unknown author,
//     is filtered out.
//
// There is no string parameter for advice, critique or a message anywhere on the note path; that
// absence is the lock. The verdict mints a belief and proposes a truncation; the consumer owns the
// transcript and enacts it. This package never mutates anything and does no I/O.
package rewind
