// Package convergence owns the convergence verdict: is a run's residual heading to a fixpoint?
//
// The rewind verdict fires on "the residual has no fixpoint" but the seeds never define that, so this
// package does. The input is the run's residual history: one Snapshot per turn (model call), holding
// the residual the resume verdict computes over the ledger as it stood after that turn, against the
// same re-adjudicated ancestry. Because the residual only shrinks when the boundary re-verifies a
// step on its commit footprint, the history is ground truth, not the agent's account of its progress.
//
// The verdict, checked in this order:
//
//   - INSUFFICIENT: no snapshot at all, or fewer than Window+1 snapshots and the run is not complete.
//     A trend needs a window; guessing one from a few turns would stop healthy runs.
//   - COMPLETE: the latest residual is empty.
//   - CONVERGING: within the last Window turns the residual reached a size smaller than at any turn
//     before the window — a new low, i.e. real progress.
//   - THRASHING: no new low, but the residual changed within the window — steps left and re-entered
//     it, or the plan was rewritten: motion without progress.
//   - STARVED: no new low and the residual was identical through the whole window — turns are being
//     spent and nothing gets verified.
//
// THRASHING and STARVED are ground-truth stop signals (ShouldSurface): the rewind verdict may roll the
// transcript back on them. Every threshold leans towards CONVERGING/INSUFFICIENT, because telling a
// working run it is stuck costs the user the work, while missing a stuck run costs a few turns. For the
// same reason a free-form run (no declared steps) has no measurable residual and gets no snapshots.
//
// The package is pure: no clock, file, network or git call.
package convergence
