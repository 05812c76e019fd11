package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CheckpointSpec is an anchor in a session minted by the rewind proxy, never by the agent: the turn
// index and the digest of the transcript up to it. A rewind is only allowed to a turn whose live
// transcript still digests to this value.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a Checkpoint is an immutable anchor: create a new Checkpoint instead of editing this one"
type CheckpointSpec struct {
	// sessionRef names the AgentSession the checkpoint belongs to.
	// +required
	SessionRef LocalObjectReference `json:"sessionRef"`

	// turnIndex is the zero-based conversation turn the checkpoint anchors.
	// +required
	// +kubebuilder:validation:Minimum=0
	TurnIndex int32 `json:"turnIndex"`

	// transcriptDigest is the SHA-256, as 64 lowercase hex characters, of the canonical transcript up
	// to and including turnIndex, computed by the proxy.
	// +required
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-f]{64}$')",message="transcriptDigest must be a SHA-256 digest: exactly 64 lowercase hex characters"
	TranscriptDigest string `json:"transcriptDigest"`

	// workspace, when set, asks for a content-addressed snapshot of this workspace directory.
	// +optional
	Workspace *WorkspaceSnapshotSpec `json:"workspace,omitempty"`
}

// WorkspaceSnapshotSpec selects the files a checkpoint snapshots.
type WorkspaceSnapshotSpec struct {
	// volume is the workspace directory to snapshot.
	// +required
	Volume WorkspaceVolume `json:"volume"`

	// excludes are glob patterns, relative to the workspace, of paths left out of the snapshot.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	Excludes []string `json:"excludes,omitempty"`
}

// CheckpointPhase is where a checkpoint is in its life.
// +kubebuilder:validation:Enum=Pending;Ready;Failed
type CheckpointPhase string

const (
	// CheckpointPending means the snapshot has not been taken yet.
	CheckpointPending CheckpointPhase = "Pending"
	// CheckpointReady means the anchor (and snapshot, if asked for) is stored.
	CheckpointReady CheckpointPhase = "Ready"
	// CheckpointFailed means the snapshot could not be taken.
	CheckpointFailed CheckpointPhase = "Failed"
)

// Checkpoint condition types and reasons.
const (
	// CheckpointConditionReady is True when the anchor and any snapshot are stored.
	CheckpointConditionReady = "Ready"

	// ReasonSnapshotStored is set when the workspace manifest was committed.
	ReasonSnapshotStored = "SnapshotStored"
	// ReasonAnchorOnly is set for a checkpoint without a workspace snapshot.
	ReasonAnchorOnly = "AnchorOnly"
)

// CheckpointStatus is what the operator stored for the checkpoint.
type CheckpointStatus struct {
	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is where the checkpoint is in its life.
	// +optional
	Phase CheckpointPhase `json:"phase,omitempty"`

	// manifestDigest is the SHA-256 of the workspace manifest (checkpoints/<id>/manifest.json).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ManifestDigest string `json:"manifestDigest,omitempty"`

	// files is the number of files in the snapshot.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Files int64 `json:"files,omitempty"`

	// totalBytes is the size of every file in the snapshot.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TotalBytes int64 `json:"totalBytes,omitempty"`

	// incrementalBytes is what this snapshot added to storage after deduplication against what was
	// already stored.
	// +optional
	// +kubebuilder:validation:Minimum=0
	IncrementalBytes int64 `json:"incrementalBytes,omitempty"`

	// previous names the checkpoint of the same session this one was deduplicated against.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Previous string `json:"previous,omitempty"`

	// conditions are Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Checkpoint is a proxy-minted anchor in a session (turn index and transcript digest), optionally with
// a content-addressed snapshot of the agent's workspace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ckpt,categories=agentrewind
// +kubebuilder:printcolumn:name="Session",type=string,JSONPath=`.spec.sessionRef.name`
// +kubebuilder:printcolumn:name="Turn",type=integer,JSONPath=`.spec.turnIndex`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Files",type=integer,JSONPath=`.status.files`
// +kubebuilder:printcolumn:name="Added",type=integer,JSONPath=`.status.incrementalBytes`,description="bytes this snapshot added to storage"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Digest",type=string,JSONPath=`.spec.transcriptDigest`,priority=1
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.totalBytes`,priority=1
type Checkpoint struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the minted anchor and the snapshot request.
	// +required
	Spec CheckpointSpec `json:"spec"`

	// status is what the operator stored for the checkpoint.
	// +optional
	Status CheckpointStatus `json:"status,omitempty"`
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
