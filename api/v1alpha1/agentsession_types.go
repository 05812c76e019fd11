package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentSessionSpec identifies a recorded run and where its data lives.
// +kubebuilder:validation:XValidation:rule="has(self.parentRef) == has(self.forkedAtStep)",message="parentRef and forkedAtStep are set together: a fork names its parent session and the step it was forked at"
type AgentSessionSpec struct {
	// sessionID is the run's identifier in object storage (sessions/<sessionID>/). It cannot change.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="sessionID is immutable: create a new AgentSession to point at another recording"
	SessionID string `json:"sessionID"`

	// storage overrides the operator's default object storage for this session.
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`

	// parentRef names the AgentSession this one was forked from.
	// +optional
	ParentRef *LocalObjectReference `json:"parentRef,omitempty"`

	// forkedAtStep is the parent's step after which this session went live.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ForkedAtStep *int64 `json:"forkedAtStep,omitempty"`

	// agent describes how to run the agent again, for forks and resumes.
	// +optional
	Agent *AgentSpec `json:"agent,omitempty"`

	// retention controls garbage collection of this session.
	// +optional
	Retention *RetentionSpec `json:"retention,omitempty"`
}

// RetentionSpec controls when a collectible session is deleted. A session that can still make
// progress (RESUMABLE or DIVERGED) is never deleted, whatever these fields say.
type RetentionSpec struct {
	// pin keeps the session even when it is collectible.
	// +optional
	Pin bool `json:"pin,omitempty"`

	// gracePeriod is how long a collectible session is kept after it became collectible.
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// SessionPhase is where a session is in its life.
// +kubebuilder:validation:Enum=Recording;Recorded;Verified;Corrupt
type SessionPhase string

const (
	// SessionRecording means the proxy is still appending events.
	SessionRecording SessionPhase = "Recording"
	// SessionRecorded means meta.json was committed and the log is closed.
	SessionRecorded SessionPhase = "Recorded"
	// SessionVerified means every blob hash and the events hash were checked against storage.
	SessionVerified SessionPhase = "Verified"
	// SessionCorrupt means verification found a mismatch; the session is never served.
	SessionCorrupt SessionPhase = "Corrupt"
)

// AgentSession condition types and reasons.
const (
	// SessionConditionReady is True when the session is committed in storage and readable.
	SessionConditionReady = "Ready"
	// SessionConditionVerified is True when the stored log and blobs match their digests.
	SessionConditionVerified = "Verified"
	// SessionConditionCollectible is True when the garbage collector may delete the session.
	SessionConditionCollectible = "Collectible"

	// ReasonDigestMismatch is set when a blob or the event log does not hash to its recorded digest.
	ReasonDigestMismatch = "DigestMismatch"
	// ReasonVerdictCollectible is set when the resume verdict is COMPLETE or UNRESUMABLE.
	ReasonVerdictCollectible = "VerdictCollectible"
	// ReasonVerdictReachable is set when the resume verdict is RESUMABLE or DIVERGED.
	ReasonVerdictReachable = "VerdictReachable"
	// ReasonPinned is set when spec.retention.pin keeps the session.
	ReasonPinned = "Pinned"
)

// AgentSessionStatus is what the operator observed about the recording.
type AgentSessionStatus struct {
	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is where the session is in its life.
	// +optional
	Phase SessionPhase `json:"phase,omitempty"`

	// eventsHash is the SHA-256 of events.jsonl as committed in meta.json.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	EventsHash string `json:"eventsHash,omitempty"`

	// events is the number of events in the log.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Events int64 `json:"events,omitempty"`

	// steps is the number of global steps (model calls, tool calls and entropy draws).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Steps int64 `json:"steps,omitempty"`

	// modelCalls is the number of recorded model calls.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ModelCalls int64 `json:"modelCalls,omitempty"`

	// toolCalls is the number of recorded tool calls.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ToolCalls int64 `json:"toolCalls,omitempty"`

	// usage is the token and cost total of the recorded model calls.
	// +optional
	Usage *Usage `json:"usage,omitempty"`

	// blobs is the number of content-addressed blobs the session references.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Blobs int64 `json:"blobs,omitempty"`

	// bytes is the stored size of the session: log, meta and referenced blobs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Bytes int64 `json:"bytes,omitempty"`

	// resumeVerdict mirrors the verdict of the session's ResumePlan.
	// +optional
	ResumeVerdict ResumeVerdict `json:"resumeVerdict,omitempty"`

	// reachability says whether the garbage collector must keep the session.
	// +optional
	Reachability Reachability `json:"reachability,omitempty"`

	// reachabilityReason explains reachability in a sentence.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ReachabilityReason string `json:"reachabilityReason,omitempty"`

	// conditions are Ready, Verified and Collectible.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AgentSession is a recorded agent run: every model call, tool call and entropy draw, stored as an
// event log and content-addressed blobs in object storage.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ags,categories=agentrewind
// +kubebuilder:printcolumn:name="Session",type=string,JSONPath=`.spec.sessionID`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Steps",type=integer,JSONPath=`.status.steps`
// +kubebuilder:printcolumn:name="Tokens",type=integer,JSONPath=`.status.usage.totalTokens`
// +kubebuilder:printcolumn:name="Verdict",type=string,JSONPath=`.status.resumeVerdict`
// +kubebuilder:printcolumn:name="Reachability",type=string,JSONPath=`.status.reachability`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parentRef.name`,priority=1
// +kubebuilder:printcolumn:name="Events",type=integer,JSONPath=`.status.events`,priority=1
// +kubebuilder:printcolumn:name="Bytes",type=integer,JSONPath=`.status.bytes`,priority=1
type AgentSession struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec identifies the recording and where it is stored.
	// +required
	Spec AgentSessionSpec `json:"spec"`

	// status is what the operator observed about the recording.
	// +optional
	Status AgentSessionStatus `json:"status,omitempty"`
}

// AgentSessionList is a list of AgentSessions.
// +kubebuilder:object:root=true
type AgentSessionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentSession `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AgentSession{}, &AgentSessionList{})
}
