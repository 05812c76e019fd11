package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// LocalObjectReference names an object of a known kind in the same namespace.
type LocalObjectReference struct {
	// name of the referenced object, in the same namespace as the referrer.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// StorageSpec says where in S3-compatible object storage a session's data lives. Every field left
// empty falls back to the operator's own storage flags.
type StorageSpec struct {
	// bucket is the S3 bucket name.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	Bucket string `json:"bucket,omitempty"`

	// prefix is prepended to every object key, without a leading or trailing slash.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.endsWith('/')",message="prefix must not start or end with '/'"
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '..')",message="prefix must not contain a '..' segment"
	Prefix string `json:"prefix,omitempty"`

	// credentialsSecretRef names a Secret in the same namespace with the keys accessKeyID and
	// secretAccessKey, and optionally sessionToken.
	// +optional
	CredentialsSecretRef *LocalObjectReference `json:"credentialsSecretRef,omitempty"`
}

// WorkspaceVolume is a directory on a PersistentVolumeClaim the agent works in.
type WorkspaceVolume struct {
	// claimName is the PersistentVolumeClaim that holds the workspace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`

	// subPath is the directory inside the claim, relative and without '..' segments; empty means the
	// claim's root.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/')",message="subPath must be relative to the claim's root"
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '..')",message="subPath must not contain a '..' segment"
	SubPath string `json:"subPath,omitempty"`
}

// AgentSpec describes the agent container used to re-run a session, for example to fork it.
type AgentSpec struct {
	// image is the agent's container image.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`

	// command overrides the image's entrypoint.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Command []string `json:"command,omitempty"`

	// args are passed to the command.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=4096
	Args []string `json:"args,omitempty"`

	// env sets environment variables in the agent container. The rewind proxy's base URLs
	// (ANTHROPIC_BASE_URL, OPENAI_BASE_URL) are added by the operator and take precedence.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	Env []corev1.EnvVar `json:"env,omitempty"`

	// workspace is mounted into the agent container at /workspace.
	// +optional
	Workspace *WorkspaceVolume `json:"workspace,omitempty"`
}

// ResumeVerdict is the judgement on whether a recorded run can still make progress.
// +kubebuilder:validation:Enum=RESUMABLE;COMPLETE;DIVERGED;UNRESUMABLE
type ResumeVerdict string

const (
	// VerdictResumable means the run stopped with residual steps and a verified re-entry point.
	VerdictResumable ResumeVerdict = "RESUMABLE"
	// VerdictComplete means every declared step is verified by evidence.
	VerdictComplete ResumeVerdict = "COMPLETE"
	// VerdictDiverged means the workspace moved away from the run's re-entry point; a human decides.
	VerdictDiverged ResumeVerdict = "DIVERGED"
	// VerdictUnresumable means the evidence cannot support a resume (no intent, no anchor, corrupt log).
	VerdictUnresumable ResumeVerdict = "UNRESUMABLE"
)

// Reachability says whether the garbage collector must keep a run.
// +kubebuilder:validation:Enum=REACHABLE;COLLECTIBLE
type Reachability string

const (
	// Reachable runs can still make progress (RESUMABLE or DIVERGED) and are kept however old they are.
	Reachable Reachability = "REACHABLE"
	// Collectible runs are COMPLETE or UNRESUMABLE; they may be deleted after their grace period.
	Collectible Reachability = "COLLECTIBLE"
)

// Condition reasons shared by several kinds.
const (
	// ReasonReconciling is set while the operator has not yet observed the latest spec.
	ReasonReconciling = "Reconciling"
	// ReasonStorageUnavailable is set when object storage could not be read or written.
	ReasonStorageUnavailable = "StorageUnavailable"
	// ReasonJobFailed is set when the engine Job for an object failed.
	ReasonJobFailed = "JobFailed"
)

// Usage is a token and cost total, shared by sessions and forks.
type Usage struct {
	// inputTokens is the number of prompt tokens billed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	InputTokens int64 `json:"inputTokens,omitempty"`

	// outputTokens is the number of completion tokens billed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	OutputTokens int64 `json:"outputTokens,omitempty"`

	// totalTokens is inputTokens plus outputTokens.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TotalTokens int64 `json:"totalTokens,omitempty"`

	// costMicroUSD is the estimated cost in millionths of a US dollar.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CostMicroUSD int64 `json:"costMicroUSD,omitempty"`
}
