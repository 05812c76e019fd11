package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentSessionSpec identifies a recorded run and where its data lives. What identifies the recording
// (sessionID, storage, parentRef, forkedAtStep) cannot change once set, nor be added or removed later.
// +kubebuilder:validation:XValidation:rule="!has(self.providerKeys) || (has(self.agent) && !has(self.parentRef))",message="providerKeys are for recording a session with spec.agent, which a fork (parentRef) never does"
// +kubebuilder:validation:XValidation:rule="has(self.parentRef) == has(self.forkedAtStep)",message="parentRef and forkedAtStep are set together: a fork names its parent session and the step it was forked at"
// +kubebuilder:validation:XValidation:rule="has(self.storage) == has(oldSelf.storage) && (!has(self.storage) || self.storage == oldSelf.storage)",message="storage is immutable: create a new AgentSession to point at another store"
// +kubebuilder:validation:XValidation:rule="has(self.parentRef) == has(oldSelf.parentRef) && (!has(self.parentRef) || self.parentRef == oldSelf.parentRef)",message="parentRef is immutable: a session's parent is part of its history"
// +kubebuilder:validation:XValidation:rule="has(self.forkedAtStep) == has(oldSelf.forkedAtStep) && (!has(self.forkedAtStep) || self.forkedAtStep == oldSelf.forkedAtStep)",message="forkedAtStep is immutable: a session's fork point is part of its history"
type AgentSessionSpec struct {
	// sessionID is the run's identifier in object storage (sessions/<sessionID>/). It cannot change.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="sessionID is immutable: create a new AgentSession to point at another recording"
	SessionID string `json:"sessionID,omitempty"`

	// storage puts the session in a bucket of the tenant's own, with the tenant's credentials. Unset,
	// the session lives in the operator's store under a prefix of its namespace, so one namespace can
	// never read or overwrite another's sessions.
	// +optional
	Storage StorageSpec `json:"storage,omitzero"`

	// parentRef names the AgentSession this one was forked from.
	// +optional
	ParentRef LocalObjectReference `json:"parentRef,omitzero"`

	// forkedAtStep is the first step of this session that went live; the steps before it were served
	// from the parent's recording.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9007199254740991
	ForkedAtStep *int64 `json:"forkedAtStep,omitempty"`

	// agent describes how to run the agent. When the session is not in the store yet and this is no
	// fork (no parentRef), the operator records it: one Job runs the agent beside the rewind proxy in
	// record mode, which commits the run under sessionID. ForkRuns run it again for forks and replays.
	// +optional
	Agent AgentSpec `json:"agent,omitzero"`

	// providerKeys are the API keys the recording's proxy sends to the providers. They reach only the
	// proxy container; the agent gets a placeholder, and the keys never enter the recording. The
	// recording speaks the OpenAI API when only openAI is given, else the Anthropic API.
	// +optional
	ProviderKeys ProviderKeys `json:"providerKeys,omitzero"`

	// retention controls garbage collection of this session.
	// +optional
	Retention RetentionSpec `json:"retention,omitzero"`
}

// RetentionPolicy says what happens to a session once it is collectible.
// +kubebuilder:validation:Enum=Delete;Retain
type RetentionPolicy string

const (
	// RetentionDelete deletes a collectible session after its grace period.
	RetentionDelete RetentionPolicy = "Delete"
	// RetentionRetain keeps the session even when it is collectible.
	RetentionRetain RetentionPolicy = "Retain"
)

// RetentionSpec controls when a collectible session is deleted. A session that can still make
// progress (Resumable or Diverged) is never deleted, whatever these fields say.
// +kubebuilder:validation:MinProperties=1
type RetentionSpec struct {
	// policy is Delete (collect after the grace period; the default) or Retain (never collect).
	// +optional
	// +kubebuilder:default=Delete
	Policy RetentionPolicy `json:"policy,omitempty"`

	// gracePeriodSeconds is how long a collectible session is kept after it became collectible; unset
	// means the operator's default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
}

// AgentSession condition types and reasons, beside the shared Ready, Reconciling and Stalled.
const (
	// SessionConditionVerified is True when the stored log and blobs match their digests.
	SessionConditionVerified = "Verified"

	// ReasonVerified is set on Verified (and Ready) when every digest matched.
	ReasonVerified = "Verified"
	// ReasonDigestMismatch is set when a blob or the event log does not hash to its recorded digest.
	ReasonDigestMismatch = "DigestMismatch"
	// ReasonSessionCorrupt is set when the log's structure is broken; the session is never served.
	ReasonSessionCorrupt = "SessionCorrupt"
	// ReasonSessionNotFound is set while the session is not committed in storage.
	ReasonSessionNotFound = "SessionNotFound"
	// ReasonRecording is set on Reconciling while the session's recording Job runs its agent.
	ReasonRecording = "Recording"
	// ReasonRecordingFailed is set on Stalled when the recording Job failed; it is not run again.
	ReasonRecordingFailed = "RecordingFailed"
	// ReasonAgentStoppedShort is the reason of the event that says a recorded agent failed, was
	// killed or ran out of time after the proxy committed its run.
	ReasonAgentStoppedShort = "AgentStoppedShort"
)

// LogState says whether a recording's event log was closed by the recorder.
// +kubebuilder:validation:Enum=Closed;Open
type LogState string

const (
	// LogClosed means the log ends with session_end: the run finished or was stopped cleanly.
	LogClosed LogState = "Closed"
	// LogOpen means the log has no session_end: the run crashed or is still being recorded.
	LogOpen LogState = "Open"
)

// AgentEndHow says how a recorded agent's container ended.
// +kubebuilder:validation:Enum=Finished;Failed;Killed;DeadlineExceeded
type AgentEndHow string

const (
	// AgentFinished means the agent exited 0.
	AgentFinished AgentEndHow = "Finished"
	// AgentFailed means the agent exited with another code.
	AgentFailed AgentEndHow = "Failed"
	// AgentKilled means a signal ended the agent, or the kubelet did when it ran out of memory.
	AgentKilled AgentEndHow = "Killed"
	// AgentDeadlineExceeded means the recording Job's deadline ended the agent.
	AgentDeadlineExceeded AgentEndHow = "DeadlineExceeded"
)

// AgentEnd is how the recorded agent's container ended, as the kubelet reported it. The proxy that
// recorded the run beside it is stopped after the agent and cannot see it, so the ResumePlan is
// judged with this.
type AgentEnd struct {
	// how is Finished, Failed, Killed or DeadlineExceeded.
	// +required
	How AgentEndHow `json:"how,omitempty"`

	// exitCode is the agent container's exit code.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	ExitCode *int32 `json:"exitCode,omitempty"`

	// signal names the signal that ended the agent, such as SIGKILL for an exit code of 137.
	// +optional
	// +kubebuilder:validation:MinLength=4
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^SIG[A-Z0-9+-]+$`
	Signal string `json:"signal,omitempty"`

	// reason is the kubelet's reason for the termination, such as Error or OOMKilled.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
}

// SessionRecording is what verification read back from storage.
type SessionRecording struct {
	// eventsHash is the SHA-256 of events.jsonl as committed in meta.json.
	// +required
	// +kubebuilder:validation:MinLength=64
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	EventsHash string `json:"eventsHash,omitempty"`

	// logState is Closed when the log ends with session_end, Open when the run crashed or still runs.
	// +required
	LogState LogState `json:"logState,omitempty"`

	// events is the number of events in the log.
	// +required
	// +kubebuilder:validation:Minimum=0
	Events *int64 `json:"events,omitempty"`

	// steps is the number of global steps (model calls, tool calls and entropy draws).
	// +required
	// +kubebuilder:validation:Minimum=0
	Steps *int64 `json:"steps,omitempty"`

	// modelCalls is the number of recorded model calls.
	// +required
	// +kubebuilder:validation:Minimum=0
	ModelCalls *int64 `json:"modelCalls,omitempty"`

	// toolCalls is the number of recorded tool calls.
	// +required
	// +kubebuilder:validation:Minimum=0
	ToolCalls *int64 `json:"toolCalls,omitempty"`

	// blobs is the number of content-addressed blobs the session references.
	// +required
	// +kubebuilder:validation:Minimum=0
	Blobs *int64 `json:"blobs,omitempty"`

	// bytes is the stored size of the session: log, meta and referenced blobs.
	// +required
	// +kubebuilder:validation:Minimum=0
	Bytes *int64 `json:"bytes,omitempty"`

	// addedBytes is what the session adds to the store beside its parent: its log, meta and vault,
	// and the blobs its parent's lines do not reference (a fork shares the rest with its parent, and
	// the store keeps each blob once). Equal to bytes for a session that is not a fork. A
	// StorageBudget counts a fork's addedBytes while its parent is in the namespace, its bytes
	// otherwise.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AddedBytes *int64 `json:"addedBytes,omitempty"`

	// usage is the token and cost total of the recorded model calls.
	// +required
	Usage Usage `json:"usage,omitzero"`

	// schemaVersion is the version of the session format the recording was written in (meta.json).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	SchemaVersion int32 `json:"schemaVersion,omitempty"`

	// redactedSecrets is how many secrets the recorder replaced by tokens, over every pattern.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RedactedSecrets *int64 `json:"redactedSecrets,omitempty"`

	// redactedPatterns is how many patterns replaced at least one secret. redactions lists at most 32
	// of them (those that replaced the most), so a larger number here says the list was cut.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RedactedPatterns *int32 `json:"redactedPatterns,omitempty"`

	// redactions counts the secrets the recorder replaced, by pattern name; never a secret value.
	// +optional
	// +listType=map
	// +listMapKey=pattern
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Redactions []RedactionCount `json:"redactions,omitempty"`

	// vault is Present when the recording keeps its redacted secrets in a sealed vault (vault.enc),
	// from which a replay or a fork can restore them; Absent otherwise.
	// +optional
	Vault VaultState `json:"vault,omitempty"`
}

// RedactionCount is how many secrets one redaction pattern replaced in a recording: the pattern's
// name and a count, never the secrets.
type RedactionCount struct {
	// pattern is the redaction pattern's name, such as anthropic-api-key or env-secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
	Pattern string `json:"pattern,omitempty"`

	// count is how many occurrences of a secret the pattern replaced in what the recording stores:
	// a message the agent repeats in every later request is stored, and counted, once.
	// +required
	// +kubebuilder:validation:Minimum=0
	Count *int64 `json:"count,omitempty"`
}

// VaultState says whether a recording has a sealed vault of its redacted secrets.
// +kubebuilder:validation:Enum=Present;Absent
type VaultState string

const (
	// VaultPresent means the session has vault.enc: its redacted secrets can be restored with the key.
	VaultPresent VaultState = "Present"
	// VaultAbsent means the session has no vault: a redacted secret is gone for good.
	VaultAbsent VaultState = "Absent"
)

// AgentSessionStatus is what the operator observed about the recording.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!has(self.conditions) || !(self.conditions.exists(c, c.type == 'Ready' && c.status == 'True') && self.conditions.exists(c, c.type == 'Stalled' && c.status == 'True'))",message="an object is not Ready and Stalled at once"
type AgentSessionStatus struct {
	// conditions are Ready, Reconciling, Stalled and Verified.
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

	// lastRun is the engine Job whose outcome this status holds (the verify Job of an AgentSession,
	// the resume-plan Job of a ResumePlan).
	// +optional
	LastRun JobRun `json:"lastRun,omitzero"`

	// recording is what verification read back from storage.
	// +optional
	Recording SessionRecording `json:"recording,omitzero"`

	// agentEnd is how the agent of a recording the operator ran ended.
	// +optional
	AgentEnd AgentEnd `json:"agentEnd,omitzero"`

	// resumeVerdict mirrors the verdict of the session's ResumePlan.
	// +optional
	ResumeVerdict ResumeVerdict `json:"resumeVerdict,omitempty"`

	// reachability says whether the garbage collector must keep the session, and why.
	// +optional
	Reachability ReachabilityStatus `json:"reachability,omitzero"`
}

// AgentSession is a recorded agent run: every model call, tool call and entropy draw, stored as an
// event log and content-addressed blobs in object storage.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ags,categories=agentrewind
// +kubebuilder:printcolumn:name="Session",type=string,JSONPath=`.spec.sessionID`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Steps",type=integer,JSONPath=`.status.recording.steps`
// +kubebuilder:printcolumn:name="Tokens",type=integer,JSONPath=`.status.recording.usage.totalTokens`
// +kubebuilder:printcolumn:name="Verdict",type=string,JSONPath=`.status.resumeVerdict`
// +kubebuilder:printcolumn:name="Reachability",type=string,JSONPath=`.status.reachability.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Log",type=string,JSONPath=`.status.recording.logState`,priority=1
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.status.agentEnd.how`,priority=1
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parentRef.name`,priority=1
// +kubebuilder:printcolumn:name="Bytes",type=integer,JSONPath=`.status.recording.bytes`,priority=1
// +kubebuilder:printcolumn:name="Redacted",type=integer,JSONPath=`.status.recording.redactedSecrets`,priority=1
// +kubebuilder:printcolumn:name="Vault",type=string,JSONPath=`.status.recording.vault`,priority=1
type AgentSession struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec identifies the recording and where it is stored.
	// +required
	Spec AgentSessionSpec `json:"spec,omitzero"`

	// status is what the operator observed about the recording.
	// +optional
	Status AgentSessionStatus `json:"status,omitzero"`
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
