// Package ledger owns the intent-ledger record schema and its fold.
//
// An agent run declares what it means to do and how far it believes it got by appending ledger
// records to its session (session.KindLedger events): INTENT (goal, declared steps, start SHA),
// STEP_CLAIMED, STEP_VERIFIED (sha, via), SUSPEND (turn index, transcript digest, resume SHA),
// RESUME_PROPOSED, and three records only the recorder writes: START (the workspace HEAD when the
// recording began), ANCHOR (a conversation anchor: turn index and transcript digest) and END (how the
// run ended). Every record carries a schema tag ("agentrewind.io/ledger/v1"). Fold turns the records
// of a session into a State that the verdicts read.
//
// The ledger is written by the run it describes, so almost everything in it is a claim. The fold
// keeps those claims as claims; the verdicts re-adjudicate them against evidence. Two rules are
// enforced here because only the fold sees who wrote each record:
//
//   - Trust of the SUSPEND stamp. The conversation checkpoint (turn index + transcript digest) and the
//     resume SHA of a SUSPEND are facts only the recorder can mint: it sees the transcript at the
//     boundary and hashes it; the agent cannot. A SUSPEND record is therefore honoured only when its
//     event's Author is session.AuthorRecorder (OS_RECORDED). An agent-authored SUSPEND is treated as
//     absent — no checkpoint, no suspended flag, no resume SHA — and only counted in
//     State.UnmintedSuspends, so a run cannot forge the anchor a rewind would roll back to. Two minted
//     stamps of one turn that disagree leave no anchor (State.ConflictingStamps). START follows the
//     same rule and outranks the INTENT's start SHA, which is only the agent's word. ANCHOR and END
//     follow it too.
//   - An anchor is not a pause. Only a SUSPEND parks the run, and a model or tool call after it means
//     the run went on. The run is suspended when it stopped without finishing: a pause still pending
//     at the end, or an END that says the agent failed, was killed or ran out of time.
//   - Damage is counted, never fatal. A record that cannot be read (not JSON, unknown op, a step
//     without an id, a foreign schema) is counted in State.Corrupt and skipped; a record with a newer
//     schema than this build reads is counted in State.UnreadableNewer; an untagged legacy record is
//     folded permissively and counted in State.Untagged. The resume verdict decides what those counts
//     mean (a too-new record always makes the run UNRESUMABLE: a misread intent must not become a
//     residual).
//
// The package is pure: it decodes bytes it is handed and does no I/O, reads no clock and calls no git.
package ledger
