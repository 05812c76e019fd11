// Package evidence gathers, at the edge, the facts the pure verdicts (package verdict) judge:
//
//   - from a git workspace, through go-git (no git binary): the commits reachable from the evidence
//     ref, HEAD, for every STEP_VERIFIED the ledger holds what its commit is (found in ancestry or not,
//     older than the run's start or not, the paths it changed), and the commits past the resume point
//     with whether the run named them — resume.Adjudicate and resume.JudgeLane judge these;
//   - from the recorded session: the folded ledger, the transcript turns with their digests, the tool
//     stream grouped into rounds, the latest environment error with its recorded author, and the
//     residual history convergence is judged on.
//
// This is the only place in the verdict path that reads a repository, clones one, or decodes a
// session's events into facts. It decides nothing: every rule lives in package verdict, a repository
// it cannot read is an error (never a reason in a verdict), and nothing
// here trusts an agent-authored byte as evidence — the ledger's claims are re-checked against commits,
// and only tool results and errors (never the agent's arguments) become an environment excerpt.
//
// Cloning a file:// or plain-path URL is served in-process by go-git's own upload-pack server, so it
// works in a FROM-scratch image; the package installs that transport for the "file" scheme at init.
package evidence
