// Package resume owns the resume verdict and the reachability (garbage-collection) verdict.
//
// A crashed or paused run is a stale report about unfinished work. Resuming it means: take what it
// meant to do (the INTENT of its ledger, distrusted), re-verify how far the durable artefacts (git
// commits) say it really got, fold the difference into a residual and a re-entry SHA, and propose —
// never perform — the continuation. Decide mints that belief; re-spawning the run is an effect that
// belongs to a human or a driver.
//
// The safety property: the resume point stands on the most accountable evidence, git ancestry
// re-adjudicated by the caller, never on the ledger's "I finished step 3". Re-entering from the last
// committed, re-verified SHA means a resumed run re-does at most the uncommitted tail, which produced
// no durable effect and is therefore safe to repeat.
//
// Decide is pure: every fact it needs (which SHAs are reachable from HEAD, which steps the boundary
// re-adjudicated at read time and at which commit, HEAD, whether the lane moved past the resume point)
// arrives in AncestryFacts, gathered at the edge (package evidence). It makes no git, file, network or
// clock call, so every branch is table-tested on frozen ledgers and frozen ancestry.
//
// Reach turns a resume verdict into the garbage collector's verdict: RESUMABLE and DIVERGED runs are
// REACHABLE (kept however old), COMPLETE and UNRESUMABLE runs are COLLECTIBLE — but an UNRESUMABLE run
// whose ledger is unreadable (newer schema) or unsound stays REACHABLE with that reason (fail closed:
// a deletion never hangs on a record an agent could forge or a version we cannot read). Age is deliberately
// absent: retention is decided by whether a run can still make progress, never by a clock; a reaper
// may add an age grace on top of COLLECTIBLE but never reap a REACHABLE run.
//
// The verdict and reachability spellings are the seed's; package apimap maps them to api/v1alpha1, and
// the reasons are CamelCase codes a controller copies verbatim. This package does not import the API.
package resume
