// Package engine is the data plane of agentrewind: recording, deterministic replay and forking of agent
// runs, and the verdicts the operator writes to status. Its subpackages are pure over what their callers
// hand them — no Kubernetes client, no S3 call, no clock read inside a decision — so every rule is
// table-tested on frozen fixtures:
//
//   - session: the event model, the on-disk session format and forward schema migrations
//   - fingerprint: canonical JSON and the request fingerprints replay matches on
//   - jsonscan: json.Valid's and json.Compact's verdicts, without encoding/json's state machine
//   - redact: secret redaction into deterministic tokens and the encrypted vault that restores them
//   - replay: the matcher, replay with drift policies, the fork engine and the Go harness API
//   - bundle: packing a session into a .rewind archive and unpacking one safely
//   - verdict: resume plan, reachability, rewind plan and no-good note, convergence, plan coherence
//   - evidence: the facts verdicts rest on, gathered from a git workspace and the recorded tool stream
//   - codec: provider wire formats (the Anthropic Messages API) mapped to and from the neutral types
package engine
