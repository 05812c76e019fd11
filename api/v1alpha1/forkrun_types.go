package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ForkMode says whether a ForkRun goes live after the replayed prefix.
// +kubebuilder:validation:Enum=Fork;Replay
type ForkMode string

const (
	// ModeFork serves the steps before atStep from the recording, then calls live models with the
	// overrides applied; the tail's entropy (clock, random, UUID) is drawn live and recorded in the child.
	ModeFork ForkMode = "Fork"
	// ModeReplay replays the whole session with zero live calls: a regression test of the agent.
	ModeReplay ForkMode = "Replay"
)

// DriftPolicy says what happens when the agent asks for something the recording does not hold.
// +kubebuilder:validation:Enum=Strict;Warn;Passthrough
type DriftPolicy string

const (
	// DriftStrict fails the run at the first request that matches no recorded call.
	DriftStrict DriftPolicy = "Strict"
	// DriftWarn fails like Strict on a request the recording does not hold, and also reports a request
	// matched only from another call site as a tolerated drift; it never serves another request's answer.
	DriftWarn DriftPolicy = "Warn"
	// DriftPassthrough sends unmatched requests live (Fork mode only).
	DriftPassthrough DriftPolicy = "Passthrough"
)

// ReplayDriftPolicy is the drift policy of a replay, which never goes live.
// +kubebuilder:validation:Enum=Strict;Warn
type ReplayDriftPolicy string

const (
	// ReplayDriftStrict fails the replay at the first request that matches no recorded call.
	ReplayDriftStrict ReplayDriftPolicy = "Strict"
	// ReplayDriftWarn fails like Strict, and also reports requests matched only from another call site.
	ReplayDriftWarn ReplayDriftPolicy = "Warn"
)

// ToolOnMatch says how a tool call that matches the recording is served.
// Running tools for real (Live) comes when tool calls can run in a sandbox.
// +kubebuilder:validation:Enum=ServeRecorded
type ToolOnMatch string

const (
	// ToolServeRecorded answers with the recorded tool result.
	ToolServeRecorded ToolOnMatch = "ServeRecorded"
)

// ToolOnMiss says how a tool call the recording does not hold is answered.
// +kubebuilder:validation:Enum=Error;Stub
type ToolOnMiss string

const (
	// ToolMissError fails the tool call, and the run with it under a Strict drift policy.
	ToolMissError ToolOnMiss = "Error"
	// ToolMissStub answers with a stub result tagged as such in the child session.
	ToolMissStub ToolOnMiss = "Stub"
)

// ForkRunSpec is the request: which session, replayed whole or forked at a step. The session and the
// mode are what the ForkRun is; any other change (the agent image a GitOps commit bumped, another
// override) runs it again as a new generation, and its status then reports that run.
// +kubebuilder:validation:XValidation:rule="self.sessionRef == oldSelf.sessionRef",message="spec.sessionRef is immutable: create a new ForkRun for another session"
// +kubebuilder:validation:XValidation:rule="has(self.mode) == has(oldSelf.mode) && (!has(self.mode) || self.mode == oldSelf.mode)",message="spec.mode is immutable: create a new ForkRun to fork instead of replay, or the other way round"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || (self.mode == 'Fork') == has(self.fork)",message="spec.fork is required when mode is Fork, and only then"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode == 'Replay' || !has(self.replay)",message="spec.replay is allowed only when mode is Replay"
type ForkRunSpec struct {
	// sessionRef names the AgentSession to replay.
	// +required
	SessionRef LocalObjectReference `json:"sessionRef,omitzero"`

	// mode is Replay (the whole session with zero live calls: a regression test) or Fork (steps from
	// fork.atStep on go live, and spend money). There is no default: say which one you mean.
	// +required
	// +unionDiscriminator
	Mode ForkMode `json:"mode,omitempty"`

	// fork says where the run goes live and what changes there. Required in Fork mode.
	// +optional
	// +unionMember
	Fork ForkSpec `json:"fork,omitzero"`

	// replay tunes a replay. Allowed only in Replay mode.
	// +optional
	// +unionMember
	Replay ReplaySpec `json:"replay,omitzero"`

	// goal is what the run must reach to count as a success.
	// +optional
	Goal Goal `json:"goal,omitzero"`

	// agent overrides the session's spec.agent for this run.
	// +optional
	Agent AgentSpec `json:"agent,omitzero"`

	// ttlSecondsAfterFinished deletes the ForkRun this long after it finished; unset keeps it. Leave it
	// unset for a ForkRun kept in Git: a GitOps tool re-creates a deleted ForkRun, and a Fork then goes
	// live (and spends) again.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// ForkSpec is a fork: the recorded prefix, then live calls with overrides. It starts at a step
// (atStep: the conversation only) or from a Checkpoint (checkpointRef: its workspace files first, then
// the conversation from its step).
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="has(self.atStep) != has(self.checkpointRef)",message="set exactly one of fork.atStep (fork the conversation at a step) and fork.checkpointRef (restore a Checkpoint's workspace, then fork at its step)"
type ForkSpec struct {
	// atStep is the first global step that goes live: every step before it is served from the
	// recording. The live tail also draws its clock, random and UUID values live and records them in
	// the child session. Exactly one of atStep and checkpointRef is set.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9007199254740991
	AtStep *int64 `json:"atStep,omitempty"`

	// checkpointRef names a Checkpoint of the same session to fork from: the run goes live at the
	// Checkpoint's step, and its workspace snapshot is restored into the agent's workspace volume
	// before the agent starts. The run waits until the Checkpoint is Ready. Exactly one of atStep and
	// checkpointRef is set.
	// +optional
	CheckpointRef LocalObjectReference `json:"checkpointRef,omitzero"`

	// overrides change the live tail's model requests.
	// +optional
	Overrides ForkOverrides `json:"overrides,omitzero"`

	// tools says how tool calls are answered.
	// +optional
	Tools ToolPolicy `json:"tools,omitzero"`

	// driftPolicy says what happens when a request of the served prefix matches nothing recorded:
	// Strict (the default) fails the run; Warn fails too, and also counts requests matched only from
	// another call site as tolerated drifts; Passthrough sends the request live and counts it.
	// +optional
	// +kubebuilder:default=Strict
	DriftPolicy DriftPolicy `json:"driftPolicy,omitempty"`

	// providerKeys are the live providers' API keys. They reach only the proxy container; the agent
	// gets a placeholder, and the keys never enter the recording.
	// +optional
	ProviderKeys ProviderKeys `json:"providerKeys,omitzero"`
}

// ProviderKeys name the Secret keys holding the live providers' API keys.
// +kubebuilder:validation:MinProperties=1
type ProviderKeys struct {
	// anthropic is the Anthropic API key.
	// +optional
	Anthropic SecretKeyReference `json:"anthropic,omitzero"`

	// openAI is the OpenAI API key.
	// +optional
	OpenAI SecretKeyReference `json:"openAI,omitzero"`
}

// ReplaySpec tunes a replay. Every field has a default, so `replay: {}` or no replay at all is a strict
// replay of the whole session.
// +kubebuilder:validation:MinProperties=1
type ReplaySpec struct {
	// driftPolicy is Strict (the default: fail at the first request that matches no recorded call) or
	// Warn (fail too, and also count requests matched only from another call site).
	// +optional
	// +kubebuilder:default=Strict
	DriftPolicy ReplayDriftPolicy `json:"driftPolicy,omitempty"`
}

// ForkOverrides change the live tail's model requests.
// +kubebuilder:validation:MinProperties=1
type ForkOverrides struct {
	// system replaces the system prompt of every live model request.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	System string `json:"system,omitempty"`

	// model replaces the model of every live model request.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`

	// params is a JSON object merged into every live model request's top level, for example
	// {"temperature": 0, "max_tokens": 2048}.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Params *apiextensionsv1.JSON `json:"params,omitempty"`

	// requestPatches are RFC 6902 JSON Patch operations applied to every live model request, in order,
	// after system, model and params.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	RequestPatches []JSONPatchOperation `json:"requestPatches,omitempty"`
}

// JSONPatchOp is an RFC 6902 operation.
// +kubebuilder:validation:Enum=add;remove;replace;test
type JSONPatchOp string

// JSONPatchOperation is one RFC 6902 operation. Whether value is present for the op is checked when the
// run starts: CEL cannot see into a free-form JSON value.
type JSONPatchOperation struct {
	// op is the operation.
	// +required
	Op JSONPatchOp `json:"op,omitempty"`

	// path is a JSON Pointer (RFC 6901) into the request, such as /messages/0/content.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="path must be a JSON Pointer starting with '/'"
	Path string `json:"path,omitempty"`

	// value is the JSON value for add, replace and test; remove ignores it.
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`
}

// ToolPolicy says how tool calls are answered during a fork.
// +kubebuilder:validation:MinProperties=1
type ToolPolicy struct {
	// onMatch says how a tool call that matches the recording is served: ServeRecorded, the default
	// and today the only choice.
	// +optional
	// +kubebuilder:default=ServeRecorded
	OnMatch ToolOnMatch `json:"onMatch,omitempty"`

	// onMiss says how a tool call the recording does not hold is answered: Error (the default) or Stub.
	// +optional
	// +kubebuilder:default=Error
	OnMiss ToolOnMiss `json:"onMiss,omitempty"`
}

// Goal is reached when the agent calls a tool whose arguments contain argsMatch.
type Goal struct {
	// tool is the name of the tool call that marks success.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Tool string `json:"tool,omitempty"`

	// argsMatch is a JSON object that must be a subset of the tool call's arguments; unset matches any
	// arguments.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ArgsMatch *apiextensionsv1.JSON `json:"argsMatch,omitempty"`
}

// ForkOutcome is how a finished ForkRun ended.
// +kubebuilder:validation:Enum=GoalReached;GoalMissed;Completed;Passed;Diverged;Failed
type ForkOutcome string

const (
	// OutcomeGoalReached means the goal tool was called with matching arguments.
	OutcomeGoalReached ForkOutcome = "GoalReached"
	// OutcomeGoalMissed means the run finished without reaching its goal.
	OutcomeGoalMissed ForkOutcome = "GoalMissed"
	// OutcomeCompleted means a fork without a goal finished.
	OutcomeCompleted ForkOutcome = "Completed"
	// OutcomePassed means a replay served every request from the recording.
	OutcomePassed ForkOutcome = "Passed"
	// OutcomeDiverged means a request matched no recorded call and the drift policy stopped the run.
	OutcomeDiverged ForkOutcome = "Diverged"
	// OutcomeFailed means the run could not finish (infrastructure, credentials, storage); the Stalled
	// condition says why.
	OutcomeFailed ForkOutcome = "Failed"
)

// ForkRun condition reasons: Ready and Stalled carry the outcome as their reason.
const (
	ReasonGoalReached = string(OutcomeGoalReached)
	ReasonGoalMissed  = string(OutcomeGoalMissed)
	ReasonCompleted   = string(OutcomeCompleted)
	ReasonPassed      = string(OutcomePassed)
	ReasonDiverged    = string(OutcomeDiverged)
	// ReasonSpecChanged is set on Reconciling when the spec changed after a run: the ForkRun runs again
	// as the new generation.
	ReasonSpecChanged = "SpecChanged"
)

// CallKind is a kind of boundary call.
// +kubebuilder:validation:Enum=ModelCall;ToolCall;Entropy
type CallKind string

const (
	CallModel   CallKind = "ModelCall"
	CallTool    CallKind = "ToolCall"
	CallEntropy CallKind = "Entropy"
)

// Divergence describes the first request that left the recording.
type Divergence struct {
	// step is the global step at which the run diverged.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9007199254740991
	Step *int64 `json:"step,omitempty"`

	// kind is the kind of call that diverged.
	// +required
	Kind CallKind `json:"kind,omitempty"`

	// lane is the concurrent branch of the agent that made the call: 0 for the agent's own, 0.1 for
	// its first branch, 0/<name> for a branch the agent named.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Lane string `json:"lane,omitempty"`

	// reason is the machine-readable cause, such as NoRecordedCall or CallSiteMismatch.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Reason string `json:"reason,omitempty"`

	// expectedCallSite is the call site of the recorded call the lane had next, if any.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ExpectedCallSite string `json:"expectedCallSite,omitempty"`

	// actualCallSite is the call site of the request the agent made.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ActualCallSite string `json:"actualCallSite,omitempty"`

	// expectedFingerprint is the fingerprint of the recorded call the request most likely meant.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ExpectedFingerprint string `json:"expectedFingerprint,omitempty"`

	// actualFingerprint is the fingerprint of the request the agent made.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ActualFingerprint string `json:"actualFingerprint,omitempty"`

	// message is a short explanation, with a diff of the two requests where it fits.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`
}

// Provenance counts where the answers of a run came from.
type Provenance struct {
	// recorded answers were served from the parent session.
	// +required
	// +kubebuilder:validation:Minimum=0
	Recorded *int64 `json:"recorded,omitempty"`

	// live answers came from a live model or tool.
	// +required
	// +kubebuilder:validation:Minimum=0
	Live *int64 `json:"live,omitempty"`

	// stub answers were stubs for tool calls the recording did not hold.
	// +required
	// +kubebuilder:validation:Minimum=0
	Stub *int64 `json:"stub,omitempty"`
}

// ForkUsage splits a run's tokens and cost into what was spent live and what the replayed prefix
// would have cost.
type ForkUsage struct {
	// live is what the run spent: the live tail's calls.
	// +required
	Live Usage `json:"live,omitzero"`

	// replayed is what the served calls cost when they were recorded; the run did not spend it again.
	// +required
	Replayed Usage `json:"replayed,omitzero"`
}

// ForkRunStatus is the outcome of the run.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!has(self.conditions) || !(self.conditions.exists(c, c.type == 'Ready' && c.status == 'True') && self.conditions.exists(c, c.type == 'Stalled' && c.status == 'True'))",message="an object is not Ready and Stalled at once"
// +kubebuilder:validation:XValidation:rule="!has(self.outcome) || self.outcome in ['Passed', 'Completed', 'GoalReached'] || (has(self.conditions) && self.conditions.exists(c, c.type == 'Stalled' && c.status == 'True'))",message="a ForkRun that failed, diverged or missed its goal is Stalled, so no GitOps tool reads it as healthy"
// +kubebuilder:validation:XValidation:rule="!has(self.outcome) || !(self.outcome in ['Passed', 'Completed', 'GoalReached']) || (has(self.conditions) && self.conditions.exists(c, c.type == 'Ready' && c.status == 'True'))",message="a ForkRun that passed, completed or reached its goal is Ready"
type ForkRunStatus struct {
	// conditions are Ready, Reconciling and Stalled. A run that passed, completed or reached its goal
	// is Ready; one that failed, diverged or missed its goal is Stalled with the outcome as reason.
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

	// lastRun is the Job whose outcome this status holds, and the generation it ran for.
	// +optional
	LastRun JobRun `json:"lastRun,omitzero"`

	// outcome is how the run ended; unset until it finished.
	// +optional
	Outcome ForkOutcome `json:"outcome,omitempty"`

	// childSessionRef names the AgentSession recorded by a fork.
	// +optional
	ChildSessionRef LocalObjectReference `json:"childSessionRef,omitzero"`

	// jobRef names the engine Job running this ForkRun.
	// +optional
	JobRef LocalObjectReference `json:"jobRef,omitzero"`

	// divergences counts the requests that left the recording, tolerated ones included.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Divergences *int64 `json:"divergences,omitempty"`

	// firstDivergence describes the first request that left the recording.
	// +optional
	FirstDivergence Divergence `json:"firstDivergence,omitzero"`

	// usage splits the run's tokens and cost into live and replayed.
	// +optional
	Usage ForkUsage `json:"usage,omitzero"`

	// provenance counts where the run's answers came from.
	// +optional
	Provenance Provenance `json:"provenance,omitzero"`

	// startTime is when the Job started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the run finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// ForkRun replays a session exactly up to a step and then goes live with overrides, or, in Replay
// mode, replays it whole with zero live calls as a regression test.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fork,categories=agentrewind
// +kubebuilder:printcolumn:name="Session",type=string,JSONPath=`.spec.sessionRef.name`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Step",type=integer,JSONPath=`.spec.fork.atStep`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Outcome",type=string,JSONPath=`.status.outcome`
// +kubebuilder:printcolumn:name="Diverged",type=integer,JSONPath=`.status.firstDivergence.step`
// +kubebuilder:printcolumn:name="Live Tokens",type=integer,JSONPath=`.status.usage.live.totalTokens`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Child",type=string,JSONPath=`.status.childSessionRef.name`,priority=1
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.status.jobRef.name`,priority=1
// +kubebuilder:printcolumn:name="Checkpoint",type=string,JSONPath=`.spec.fork.checkpointRef.name`,priority=1
type ForkRun struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the fork or replay request.
	// +required
	Spec ForkRunSpec `json:"spec,omitzero"`

	// status is the outcome of the run.
	// +optional
	Status ForkRunStatus `json:"status,omitzero"`
}

// ForkRunList is a list of ForkRuns.
// +kubebuilder:object:root=true
type ForkRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ForkRun `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ForkRun{}, &ForkRunList{})
}
