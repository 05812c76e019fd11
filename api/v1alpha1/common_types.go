package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// JobRun names the engine Job whose outcome a status holds, and the spec generation it ran for: a
// controller reads it, never a condition's message, to tell that a generation's Job was read already.
type JobRun struct {
	// name is the Job's name; it is derived from the Job's inputs, so another name is another run.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`

	// generation is the spec generation the Job ran for.
	// +required
	// +kubebuilder:validation:Minimum=1
	Generation int64 `json:"generation,omitempty"`
}

// LocalObjectReference names an object of a known kind in the same namespace.
type LocalObjectReference struct {
	// name of the referenced object, in the same namespace as the referrer.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`
}

// SecretKeyReference names one key of a Secret in the same namespace.
type SecretKeyReference struct {
	// name of the Secret, in the same namespace as the referrer.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`

	// key is the key in the Secret's data whose value is used.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="key must not be '.' or '..'"
	Key string `json:"key,omitempty"`
}

// StorageSpec puts a session in a bucket of the tenant's own. The operator's credentials never serve a
// bucket a tenant picked, so a bucket always comes with the tenant's credentials.
// +kubebuilder:validation:XValidation:rule="has(self.credentials)",message="a bucket of your own needs credentials of your own (storage.credentials): the operator's credentials never serve a bucket a tenant picked; leave storage out to use the operator's store"
type StorageSpec struct {
	// bucket is the S3 bucket name.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	Bucket string `json:"bucket,omitempty"`

	// prefix is prepended to every object key, without a leading or trailing slash.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.endsWith('/')",message="prefix must not start or end with '/'"
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '..' || s == '.' || s == '')",message="prefix must not contain an empty, '.' or '..' segment"
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._/-]+$`
	Prefix string `json:"prefix,omitempty"`

	// credentials are the tenant's own keys for the bucket. They are required; the rule on storage says
	// so in words, where a schema-level requirement would only say "Required value".
	// +optional
	Credentials S3Credentials `json:"credentials,omitzero"`
}

// S3Credentials are the keys of a Secret in the same namespace that hold S3 credentials.
type S3Credentials struct {
	// accessKeyID is the Secret key holding the access key ID.
	// +required
	AccessKeyID SecretKeyReference `json:"accessKeyID,omitzero"`

	// secretAccessKey is the Secret key holding the secret access key.
	// +required
	SecretAccessKey SecretKeyReference `json:"secretAccessKey,omitzero"`

	// sessionToken is the Secret key holding a session token, for temporary credentials.
	// +optional
	SessionToken SecretKeyReference `json:"sessionToken,omitzero"`
}

// WorkspaceVolume is a directory on a PersistentVolumeClaim the agent works in.
type WorkspaceVolume struct {
	// claimName is the PersistentVolumeClaim that holds the workspace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName,omitempty"`

	// subPath is the directory inside the claim, relative and without '..' segments; unset means the
	// claim's root.
	// +optional
	// +kubebuilder:validation:MinLength=1
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
	Image string `json:"image,omitempty"`

	// command overrides the image's entrypoint.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=4096
	Command []string `json:"command,omitempty"`

	// args are passed to the command.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=4096
	Args []string `json:"args,omitempty"`

	// env sets environment variables in the agent container. The rewind proxy's base URLs
	// (ANTHROPIC_BASE_URL, OPENAI_BASE_URL) are added by the operator and take precedence.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	Env []corev1.EnvVar `json:"env,omitempty"`

	// workspace is mounted into the agent container at /workspace.
	// +optional
	Workspace WorkspaceVolume `json:"workspace,omitzero"`

	// tools are the HTTP backends of the tools the agent calls through the rewind proxy's tool
	// gateway (POST /v1/tools/{name}) while its run is recorded: each call is forwarded to the tool's
	// URL and its result recorded. Forks and replays never run a tool: they answer from the recording
	// (a fork's new calls as spec.fork.tools.onMiss says), since running tools for real needs a sandbox.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Tools []ToolBackend `json:"tools,omitempty"`

	// mcpServers are the MCP servers (streamable HTTP transport) the agent reaches through the rewind
	// proxy while its run is recorded: each call the agent sends to the proxy is relayed to the
	// server and recorded as a tool event named <name>/<method> (e.g. tracker/tools/call). The
	// operator gives the agent each server's address on the proxy in the variable
	// AGENTREWIND_MCP_<NAME> (the name upper-cased, '-' as '_'), for example
	// AGENTREWIND_MCP_TRACKER=http://127.0.0.1:8787/mcp/tracker. Forks and replays never call the
	// server: they answer from the recording, like the tools (a fork's new calls as
	// spec.fork.tools.onMiss says).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	MCPServers []MCPServer `json:"mcpServers,omitempty"`
}

// ToolBackend is where the rewind proxy sends the live calls of one tool.
type ToolBackend struct {
	// name is the tool's name as the agent calls it: 1 to 64 letters, digits, '.', '_' or '-',
	// starting with a letter or digit.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
	Name string `json:"name,omitempty"`

	// url receives each call's arguments as a JSON POST body and answers with the tool's result. It
	// is an http or https URL without credentials: a key the backend needs belongs in a Secret the
	// backend reads, never in a URL that pod specs and logs show.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="url must be an absolute http or https URL with a host"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z]+://[^/?#]*@')",message="url must not carry credentials: give the backend its key through a Secret it reads"
	URL string `json:"url,omitempty"`
}

// MCPServer is an MCP server the agent calls through the rewind proxy, over streamable HTTP.
type MCPServer struct {
	// name names the server on the proxy (/mcp/<name>), in the recorded tool names (<name>/<method>)
	// and in the agent's variable AGENTREWIND_MCP_<NAME>: 1 to 63 lower-case letters, digits or '-',
	// starting and ending with a letter or digit, so that no two names share a variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// url is the server's streamable HTTP endpoint (e.g. http://tracker:8090/mcp), which only the
	// recording's proxy calls. It is an http or https URL without credentials: a key the server
	// needs belongs in a Secret the server reads, never in a URL that pod specs and logs show.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="url must be an absolute http or https URL with a host"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z]+://[^/?#]*@')",message="url must not carry credentials: give the server its key through a Secret it reads"
	URL string `json:"url,omitempty"`
}

// ResumeVerdict is the judgement on whether a recorded run can still make progress.
// +kubebuilder:validation:Enum=Resumable;Complete;Diverged;Unresumable
type ResumeVerdict string

const (
	// VerdictResumable means the run stopped with residual steps and a verified re-entry point.
	VerdictResumable ResumeVerdict = "Resumable"
	// VerdictComplete means every declared step is verified by evidence.
	VerdictComplete ResumeVerdict = "Complete"
	// VerdictDiverged means the workspace moved away from the run's re-entry point; a human decides.
	VerdictDiverged ResumeVerdict = "Diverged"
	// VerdictUnresumable means the evidence cannot support a resume (no intent, no anchor, corrupt log).
	VerdictUnresumable ResumeVerdict = "Unresumable"
)

// Reachability says whether the garbage collector must keep a run.
// +kubebuilder:validation:Enum=Reachable;Collectible
type Reachability string

const (
	// Reachable runs can still make progress (Resumable or Diverged) and are kept however old they are.
	Reachable Reachability = "Reachable"
	// Collectible runs are Complete or Unresumable; they may be deleted after their grace period.
	Collectible Reachability = "Collectible"
)

// ReachabilityStatus is the garbage collector's verdict on a run, with its cause.
type ReachabilityStatus struct {
	// state says whether the run must be kept.
	// +required
	State Reachability `json:"state,omitempty"`

	// reason is the machine-readable cause, such as ResumableRetained or CompleteCollectible.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Reason string `json:"reason,omitempty"`

	// message explains the verdict to a human.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// Usage is a token and cost total. Every counter is written, so a real 0 shows as 0; the cost is
// left out, and the models it lacks a price for are named, when any call could not be priced.
type Usage struct {
	// inputTokens is the number of prompt tokens, cached ones included.
	// +required
	// +kubebuilder:validation:Minimum=0
	InputTokens *int64 `json:"inputTokens,omitempty"`

	// outputTokens is the number of completion tokens billed.
	// +required
	// +kubebuilder:validation:Minimum=0
	OutputTokens *int64 `json:"outputTokens,omitempty"`

	// cacheCreationInputTokens is how many of inputTokens were written to the provider's prompt cache.
	// +required
	// +kubebuilder:validation:Minimum=0
	CacheCreationInputTokens *int64 `json:"cacheCreationInputTokens,omitempty"`

	// cacheReadInputTokens is how many of inputTokens were read from the provider's prompt cache.
	// +required
	// +kubebuilder:validation:Minimum=0
	CacheReadInputTokens *int64 `json:"cacheReadInputTokens,omitempty"`

	// totalTokens is inputTokens plus outputTokens.
	// +required
	// +kubebuilder:validation:Minimum=0
	TotalTokens *int64 `json:"totalTokens,omitempty"`

	// costMicroUSD is the cost in millionths of a US dollar: the tokens at the operator's price table
	// (the chart's prices value over the built-in list prices), or the cost the recording stated.
	// Absent when a call could not be priced: unpricedModels then names the models.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CostMicroUSD *int64 `json:"costMicroUSD,omitempty"`

	// unpricedModels are the models (provider/model) whose calls could not be priced: no price in the
	// operator's table, or token counts that contradict each other. Add a price for them to the chart's
	// prices value to get a cost.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=320
	UnpricedModels []string `json:"unpricedModels,omitempty"`
}

// Condition types every kind reports. Ready, Reconciling and Stalled follow kstatus, so GitOps tools
// (Argo CD, Flux) tell a healthy object from one in progress or one that failed for good.
const (
	// ConditionReady is True when the object's purpose is met: a session verified, a verdict computed,
	// a run that passed or reached its goal, a checkpoint stored.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the operator is still working towards the latest spec.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the operator cannot make progress without a change: a corrupt
	// session, a failed or diverged run, evidence that cannot be read.
	ConditionStalled = "Stalled"
)

// Condition reasons shared by several kinds.
const (
	// ReasonSucceeded is set on Ready when the object's purpose is met.
	ReasonSucceeded = "Succeeded"
	// ReasonProgressing is set on Reconciling while the operator has not yet observed the latest spec.
	ReasonProgressing = "Progressing"
	// ReasonJobRunning is set on Reconciling while the engine Job for the object runs.
	ReasonJobRunning = "JobRunning"
	// ReasonStorageUnavailable is set when object storage could not be read or written.
	ReasonStorageUnavailable = "StorageUnavailable"
	// ReasonJobFailed is set when the engine Job for an object failed.
	ReasonJobFailed = "JobFailed"
	// ReasonInvalidSpec is set on Stalled when the spec cannot be acted on; the message says which field.
	ReasonInvalidSpec = "InvalidSpec"
)

// ListTruncation says that a status list was cut to its bound, and how long it was.
type ListTruncation struct {
	// field is the status field that was cut.
	// +required
	// +kubebuilder:validation:Enum=residual;verified;claimedWithoutEvidence;unpromisedFiles;unattributedFiles;noGoodNote
	Field string `json:"field,omitempty"`

	// total is how many items the list had before it was cut.
	// +required
	// +kubebuilder:validation:Minimum=1
	Total int64 `json:"total,omitempty"`
}
