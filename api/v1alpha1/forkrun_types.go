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

// ToolOnMatch says how a tool call that matches the recording is served.
// +kubebuilder:validation:Enum=ServeRecorded;Live
type ToolOnMatch string

const (
	// ToolServeRecorded answers with the recorded tool result.
	ToolServeRecorded ToolOnMatch = "ServeRecorded"
	// ToolLive runs the tool for real. Rejected until tool calls can run in a sandbox.
	ToolLive ToolOnMatch = "Live"
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

// ForkRunSpec is the request: which session, up to which step, and what changes after it.
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'Replay' || !has(self.overrides)",message="mode Replay replays the recording exactly and cannot take overrides: remove spec.overrides or set mode: Fork"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'Replay' || !has(self.tools) || !has(self.tools.onMatch) || self.tools.onMatch != 'Live'",message="mode Replay makes zero live calls: tools.onMatch must be ServeRecorded"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'Replay' || !has(self.driftPolicy) || self.driftPolicy != 'Passthrough'",message="mode Replay makes zero live calls: driftPolicy Passthrough would send unmatched requests live; use Strict or Warn"
type ForkRunSpec struct {
	// sessionRef names the AgentSession to replay.
	// +required
	SessionRef LocalObjectReference `json:"sessionRef"`

	// atStep is the first global step that goes live: every step before it is served from the
	// recording. In Replay mode nothing goes live and atStep is the step the replay must reach.
	// +required
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="atStep must be zero or greater: it is the first step that goes live"
	AtStep int64 `json:"atStep"`

	// mode is Fork (steps from atStep on go live) or Replay (zero live calls). In Fork mode the live
	// tail also draws its clock, random and UUID values live and records them in the child session;
	// only the served prefix replays the parent's.
	// +optional
	// +kubebuilder:default=Fork
	Mode ForkMode `json:"mode,omitempty"`

	// overrides change the live tail's model requests. Not allowed in Replay mode.
	// +optional
	Overrides *ForkOverrides `json:"overrides,omitempty"`

	// tools says how tool calls are answered.
	// +optional
	Tools *ToolPolicy `json:"tools,omitempty"`

	// driftPolicy says what happens when a replayed request matches nothing recorded: Strict fails the
	// run; Warn fails too, and also counts requests matched only from another call site as tolerated
	// drifts; Passthrough sends the request live and counts it.
	// +optional
	// +kubebuilder:default=Strict
	DriftPolicy DriftPolicy `json:"driftPolicy,omitempty"`

	// goal is what the run must reach to count as a success.
	// +optional
	Goal *Goal `json:"goal,omitempty"`

	// providerSecretRef names a Secret with the live providers' API keys (ANTHROPIC_API_KEY,
	// OPENAI_API_KEY). The keys reach only the proxy container; they never enter the recording.
	// +optional
	ProviderSecretRef *LocalObjectReference `json:"providerSecretRef,omitempty"`

	// agent overrides the session's spec.agent for this run.
	// +optional
	Agent *AgentSpec `json:"agent,omitempty"`

	// ttlSecondsAfterFinished deletes the ForkRun this long after it finished; unset keeps it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// ForkOverrides change the live tail's model requests.
// +kubebuilder:validation:MinProperties=1
type ForkOverrides struct {
	// system replaces the system prompt of every live model request.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	System *string `json:"system,omitempty"`

	// model replaces the model of every live model request.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Model *string `json:"model,omitempty"`

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
	// +kubebuilder:validation:MaxItems=64
	RequestPatches []JSONPatchOperation `json:"requestPatches,omitempty"`
}

// JSONPatchOperation is one RFC 6902 operation. Whether value is present for the op is checked when the
// run starts: CEL cannot see into a free-form JSON value.
type JSONPatchOperation struct {
	// op is the operation.
	// +required
	// +kubebuilder:validation:Enum=add;remove;replace;test
	Op string `json:"op"`

	// path is a JSON Pointer (RFC 6901) into the request, such as /messages/0/content.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self == '' || self.startsWith('/')",message="path must be a JSON Pointer: empty or starting with '/'"
	Path string `json:"path"`

	// value is the JSON value for add, replace and test; remove ignores it.
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`
}

// ToolPolicy says how tool calls are answered during a ForkRun.
// +kubebuilder:validation:XValidation:rule="!has(self.onMatch) || self.onMatch != 'Live'",message="tools.onMatch: Live is not supported yet: running tools for real needs a sandbox; use ServeRecorded"
type ToolPolicy struct {
	// onMatch says how a tool call that matches the recording is served.
	// +optional
	// +kubebuilder:default=ServeRecorded
	OnMatch ToolOnMatch `json:"onMatch,omitempty"`

	// onMiss says how a tool call the recording does not hold is answered.
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
	Tool string `json:"tool"`

	// argsMatch is a JSON object that must be a subset of the tool call's arguments; unset matches any
	// arguments.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ArgsMatch *apiextensionsv1.JSON `json:"argsMatch,omitempty"`
}

// ForkRunPhase is where a ForkRun is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Diverged
type ForkRunPhase string

const (
	// ForkPending means the Job has not started.
	ForkPending ForkRunPhase = "Pending"
	// ForkRunning means the Job is running.
	ForkRunning ForkRunPhase = "Running"
	// ForkSucceeded means the run finished; see reachedGoal.
	ForkSucceeded ForkRunPhase = "Succeeded"
	// ForkFailed means the run could not finish (infrastructure, credentials, storage).
	ForkFailed ForkRunPhase = "Failed"
	// ForkDiverged means a replayed request matched no recorded call under a Strict drift policy.
	ForkDiverged ForkRunPhase = "Diverged"
)

// ForkRun condition types and reasons.
const (
	// ForkConditionComplete is True once the run finished, whatever its outcome.
	ForkConditionComplete = "Complete"
	// ForkConditionGoalReached is True when the goal tool was called with matching arguments.
	ForkConditionGoalReached = "GoalReached"
	// ForkConditionDiverged is True when the replay left the recording.
	ForkConditionDiverged = "Diverged"

	// ReasonGoalReached is set when the goal was reached.
	ReasonGoalReached = "GoalReached"
	// ReasonGoalMissed is set when the run finished without reaching the goal.
	ReasonGoalMissed = "GoalMissed"
	// ReasonDrift is set when a request matched no recorded call.
	ReasonDrift = "Drift"
	// ReasonReplayMatched is set when a replay served every request from the recording.
	ReasonReplayMatched = "ReplayMatched"
)

// Divergence describes the first request that matched no recorded call.
type Divergence struct {
	// step is the global step at which the replay diverged.
	// +required
	// +kubebuilder:validation:Minimum=0
	Step int64 `json:"step"`

	// kind is the event kind that diverged: model_call, tool_call or entropy.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Kind string `json:"kind,omitempty"`

	// callSite is the recorded call site expected at this step.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	CallSite string `json:"callSite,omitempty"`

	// expectedFingerprint is the fingerprint of the recorded request at this step.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ExpectedFingerprint string `json:"expectedFingerprint,omitempty"`

	// actualFingerprint is the fingerprint of the request the agent made.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ActualFingerprint string `json:"actualFingerprint,omitempty"`

	// message is a short explanation, with a diff of the two requests where it fits.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`
}

// Provenance counts where the answers of a run came from.
type Provenance struct {
	// recorded answers were served from the parent session.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Recorded int64 `json:"recorded,omitempty"`

	// live answers came from a live model or tool.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Live int64 `json:"live,omitempty"`

	// stub answers were stubs for tool calls the recording did not hold.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Stub int64 `json:"stub,omitempty"`
}

// ForkRunStatus is the outcome of the run.
type ForkRunStatus struct {
	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is where the run is in its life.
	// +optional
	Phase ForkRunPhase `json:"phase,omitempty"`

	// childSession names the AgentSession recorded by this run.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ChildSession string `json:"childSession,omitempty"`

	// reachedGoal says whether the goal was reached; unset until the run finished or without a goal.
	// +optional
	ReachedGoal *bool `json:"reachedGoal,omitempty"`

	// divergedAtStep is the first step at which the run left the recording.
	// +optional
	DivergedAtStep *int64 `json:"divergedAtStep,omitempty"`

	// firstDivergence describes the first request that matched no recorded call.
	// +optional
	FirstDivergence *Divergence `json:"firstDivergence,omitempty"`

	// tokensSpent counts the live tail's tokens only; the replayed prefix costs nothing.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TokensSpent int64 `json:"tokensSpent,omitempty"`

	// provenance counts where the run's answers came from.
	// +optional
	Provenance *Provenance `json:"provenance,omitempty"`

	// jobName is the engine Job running this ForkRun.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	JobName string `json:"jobName,omitempty"`

	// startTime is when the Job started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the run finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// conditions are Complete, GoalReached and Diverged.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ForkRun replays a session exactly up to a step and then goes live with overrides, or, in Replay
// mode, replays it whole with zero live calls as a regression test.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fork,categories=agentrewind
// +kubebuilder:printcolumn:name="Session",type=string,JSONPath=`.spec.sessionRef.name`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Step",type=integer,JSONPath=`.spec.atStep`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Goal",type=boolean,JSONPath=`.status.reachedGoal`
// +kubebuilder:printcolumn:name="Diverged",type=integer,JSONPath=`.status.divergedAtStep`
// +kubebuilder:printcolumn:name="Tokens",type=integer,JSONPath=`.status.tokensSpent`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Child",type=string,JSONPath=`.status.childSession`,priority=1
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.status.jobName`,priority=1
type ForkRun struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the fork or replay request.
	// +required
	Spec ForkRunSpec `json:"spec"`

	// status is the outcome of the run.
	// +optional
	Status ForkRunStatus `json:"status,omitempty"`
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
