// Package v1alpha1 holds the agentrewind.io/v1alpha1 API: AgentSession (a recorded agent run),
// Checkpoint (a proxy-minted anchor in a run), ForkRun (replay a run up to a step, then go live) and
// ResumePlan (the verdict on whether a run can still make progress).
//
// The types carry only what fits in etcd: counts, digests, verdicts, reasons and conditions. Event logs
// and blobs live in object storage. Validation that spans fields is expressed in CEL on the types so the
// API server rejects a bad object with a message a user can act on; this package has no logic of its own.
//
// +kubebuilder:object:generate=true
// +groupName=agentrewind.io
package v1alpha1
