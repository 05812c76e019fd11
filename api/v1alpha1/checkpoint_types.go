package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CheckpointSpec is an anchor in a session minted by the recorder, never by the agent: the step to fork
// from, the turn index and the digest of the transcript up to it. A rewind is only allowed to a turn
// whose live transcript still digests to this value. The rewind proxy stamps anchors into the session's
// log; the operator turns them into Checkpoints, and an admission policy (config/policy) lets no one
// else create a Checkpoint or write its status.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a Checkpoint is an immutable anchor: create a new Checkpoint instead of editing this one"
type CheckpointSpec struct {
	// sessionRef names the AgentSession the checkpoint belongs to.
	// +required
	SessionRef LocalObjectReference `json:"sessionRef,omitzero"`

	// step is the session's global step the checkpoint was taken after: a ForkRun from this checkpoint
	// sets fork.atStep to it.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9007199254740991
	Step *int64 `json:"step,omitempty"`

	// turnIndex is the zero-based conversation turn the checkpoint anchors.
	// +required
	// +kubebuilder:validation:Minimum=0
	TurnIndex *int32 `json:"turnIndex,omitempty"`

	// transcriptDigest is the SHA-256, as 64 lowercase hex characters, of the canonical transcript up
	// to and including turnIndex, computed by the recorder.
	// +required
	// +kubebuilder:validation:MinLength=64
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-f]{64}$')",message="transcriptDigest must be a SHA-256 digest: exactly 64 lowercase hex characters"
	TranscriptDigest string `json:"transcriptDigest,omitempty"`

	// workspace asks for a content-addressed snapshot of this workspace directory; unset, the checkpoint
	// is an anchor only.
	// +optional
	Workspace WorkspaceSnapshotSpec `json:"workspace,omitzero"`
}

// WorkspaceSnapshotSpec selects the files a checkpoint snapshots.
type WorkspaceSnapshotSpec struct {
	// volume is the workspace directory to snapshot.
	// +required
	Volume WorkspaceVolume `json:"volume,omitzero"`

	// excludes are glob patterns, relative to the workspace, of paths left out of the snapshot.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	Excludes []string `json:"excludes,omitempty"`
}

// Checkpoint condition reasons, beside the shared ones.
const (
	// ReasonSnapshotStored is set on Ready when the workspace manifest was committed.
	ReasonSnapshotStored = "SnapshotStored"
	// ReasonAnchorOnly is set on Ready for a checkpoint without a workspace snapshot.
	ReasonAnchorOnly = "AnchorOnly"
	// ReasonSnapshotFailed is set on Stalled when the snapshot could not be taken.
	ReasonSnapshotFailed = "SnapshotFailed"
)

// WorkspaceSnapshot is a stored workspace manifest.
type WorkspaceSnapshot struct {
	// manifestDigest is the SHA-256 of the workspace manifest.
	// +required
	// +kubebuilder:validation:MinLength=64
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	ManifestDigest string `json:"manifestDigest,omitempty"`

	// files is the number of files in the snapshot.
	// +required
	// +kubebuilder:validation:Minimum=0
	Files *int64 `json:"files,omitempty"`

	// totalBytes is the size of every file in the snapshot.
	// +required
	// +kubebuilder:validation:Minimum=0
	TotalBytes *int64 `json:"totalBytes,omitempty"`

	// incrementalBytes is what this snapshot added to storage after deduplication against what was
	// already stored.
	// +required
	// +kubebuilder:validation:Minimum=0
	IncrementalBytes *int64 `json:"incrementalBytes,omitempty"`

	// previousRef names the checkpoint of the same session this one was deduplicated against.
	// +optional
	PreviousRef LocalObjectReference `json:"previousRef,omitzero"`
}

// CheckpointStatus is what the operator stored for the checkpoint.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!has(self.conditions) || !(self.conditions.exists(c, c.type == 'Ready' && c.status == 'True') && self.conditions.exists(c, c.type == 'Stalled' && c.status == 'True'))",message="an object is not Ready and Stalled at once"
type CheckpointStatus struct {
	// conditions are Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation this status describes.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// snapshot is the stored workspace snapshot, when one was asked for.
	// +optional
	Snapshot WorkspaceSnapshot `json:"snapshot,omitzero"`
}

// Checkpoint is a recorder-minted anchor in a session (step, turn index and transcript digest),
// optionally with a content-addressed snapshot of the agent's workspace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ckpt,categories=agentrewind
// +kubebuilder:printcolumn:name="Session",type=string,JSONPath=`.spec.sessionRef.name`
// +kubebuilder:printcolumn:name="Step",type=integer,JSONPath=`.spec.step`
// +kubebuilder:printcolumn:name="Turn",type=integer,JSONPath=`.spec.turnIndex`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Files",type=integer,JSONPath=`.status.snapshot.files`
// +kubebuilder:printcolumn:name="Added",type=integer,JSONPath=`.status.snapshot.incrementalBytes`,description="bytes this snapshot added to storage"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Digest",type=string,JSONPath=`.spec.transcriptDigest`,priority=1
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.snapshot.totalBytes`,priority=1
type Checkpoint struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the minted anchor and the snapshot request.
	// +required
	Spec CheckpointSpec `json:"spec,omitzero"`

	// status is what the operator stored for the checkpoint.
	// +optional
	Status CheckpointStatus `json:"status,omitzero"`
}

// CheckpointList is a list of Checkpoints.
// +kubebuilder:object:root=true
type CheckpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Checkpoint `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Checkpoint{}, &CheckpointList{})
}
