// Package verdict owns the judgements ResumePlan status and the garbage collector rest on, and
// composes them into one Report:
//
//   - ledger: the intent-ledger record schema and its fold (who may mint an anchor, a pause or an end);
//   - resume: the resume verdict (RESUMABLE / COMPLETE / DIVERGED / UNRESUMABLE) and reachability
//     (REACHABLE / COLLECTIBLE);
//   - convergence: whether the residual history is heading to a fixpoint (CONVERGING / COMPLETE /
//     THRASHING / STARVED / INSUFFICIENT);
//   - rewind: the transcript-rewind verdict (REWIND / NO_REWIND / UNANCHORED) and its no-good note;
//   - coherence: plan drift, evidence-backed completion and the reconciliation of promised vs done.
//
// Every verdict is a pure function over facts the caller gathered at the edge (package evidence): no
// clock, file, network or git call happens here, so each rule is table-tested on frozen fixtures. The
// verdicts trust recorder- and third-party-authored bytes; what the agent wrote (the ledger) is a
// claim they re-adjudicate against that evidence, and every unknown fails closed.
//
// Verdicts and decisions keep the seeds' spellings; package apimap is the one place that maps them to
// api/v1alpha1, and the engine does not import the API package. Verdicts propose; they never mutate a transcript, a
// workspace or a cluster object.
package verdict
