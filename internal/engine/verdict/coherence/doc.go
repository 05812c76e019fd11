// Package coherence owns plan coherence: does the recorded tool stream still match the plan the run
// declared, and is a step the run marked done a completion or only a claim?
//
// A plan the agent keeps for itself is a to-do list it can ignore, and mostly does: steps stay
// untouched while other files are written, and a step is marked done over nothing at all. This package
// joins the plan (the INTENT's steps and the run's own STEP_CLAIMED marks) to what actually ran (the
// recorded tool calls) with four pure judgements:
//
//   - Attribute: which declared step, if any, a changed path belongs to — strongest match first
//     (exact path, basename, primary stem, significant directory segment with a stoplist of generic
//     segments such as src or lib), never plan order.
//   - DetectDrift: no-plan, insufficient-history, plan-complete, exploring, on-plan or drifting.
//     Reading is never drift; only writes count, and drifting needs four conditions at once: the
//     window has writes, none of them attributes to a step, at least three distinct unplanned paths,
//     and no step was marked in the window.
//   - AcceptCompletion: per step kind (deliver, write, command, verify, research, unknown), whether
//     the tool stream holds evidence for the step; research and unknown steps are accepted as
//     assertions, on purpose, and the result says so. For a command step only the latest run counts:
//     an errored last run is not a pass, whatever ran green before it.
//   - Reconcile: promised, marked done, evidenced, claimed without evidence, and changed files no step
//     promised.
//   - ReanchorDecision: whether to append a restatement of the goal this turn (final, compaction, drift,
//     interval; rare and budgeted, always appended at the end), with AppendOnly proving the transcript
//     before it was kept byte for byte.
//
// Every ambiguity resolves towards "on plan": missing drift costs a few turns, while telling a working
// run it has drifted costs the user the work. The package never marks, unmarks, stops or gates
// anything: it returns verdicts with their evidence. It answers "finished?", never "correct?".
//
// It is pure — no clock, file, network or git call — and reads every field of a tool call as absent
// until proven present, because a judgement that fails inside the loop it protects is worse than none.
package coherence
