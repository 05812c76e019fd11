// Command demo is the local demo (`make demo`): it starts a real control plane (the envtest binaries
// built by `make envtest-assets`) with the agentrewind CRDs, runs `agentrewind manager` against it, and
// drives it with kubectl the way a user would — apply the samples, list them, read `kubectl explain`,
// and watch the API server refuse an invalid ForkRun with a message that says what to fix. Then it
// shows the engine: record the sample triage agent, fork its bad decision with a one-line prompt fix,
// compare the two runs, and push both to a real S3 server (versitygw) where they share their blobs.
//
// With -keep it stays up and prints a KUBECONFIG to use from another shell until interrupted.
package main
