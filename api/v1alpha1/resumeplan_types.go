package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResumePlanSpec names the session to judge and, optionally, extra evidence to judge it against.
// +kubebuilder:validation:XValidation:rule="!(has(self.git) && has(self.workspace))",message="give at most one source of workspace evidence: git or workspace"
// +kubebuilder:validation:XValidation:rule="self.sessionRef == oldSelf.sessionRef",message="sessionRef is immutable: create a new ResumePlan to judge another session"
type ResumePlanSpec struct {
	// sessionRef names the AgentSession to judge.
	// +required
	SessionRef LocalObjectReference `json:"sessionRef,omitzero"`

	// git is a repository whose history the agent's claimed steps are re-adjudicated against.
	// +optional
	Git GitEvidence `json:"git,omitzero"`

	// workspace is a git work tree on a volume to re-adjudicate against, such as the agent's own.
	// +optional
	Workspace WorkspaceVolume `json:"workspace,omitzero"`
}

// GitEvidence points at a git repository.
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.auth.passwordSecretRef) || self.url.startsWith('https://')",message="a password or token is only sent over https: use an https:// url, or sshPrivateKeySecretRef for ssh"
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.auth.sshPrivateKeySecretRef) || self.url.startsWith('ssh://')",message="an SSH key needs an ssh:// url"
type GitEvidence struct {
	// url is the repository to clone: https://, ssh:// or git:// only, never a loopback, link-local,
	// unspecified or metadata address in any spelling, nor localhost, so a ResumePlan cannot make the
	// operator read local files or the node's metadata service. A host name that resolves to such an
	// address can only be refused where the clone runs.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https|ssh|git)://[^/?#]+')",message="url must be an https://, ssh:// or git:// URL with a host"
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:space:][:cntrl:]]')",message="url must not contain whitespace or control characters"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(?i)^[a-z]+://([^/?#]*@)?(0x[0-9a-f]*|[0-9]+)([.](0x[0-9a-f]*|[0-9]+))*[.]?([:/?#]|$)') || self.matches('^[a-z]+://([^/?#]*@)?((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])[.]){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])([:/?#]|$)')",message="a numeric host must be written as a dotted-quad IPv4 address (no 2130706433, 0x7f.1 or 0177.0.0.1)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-z]+://([^/?#]*@)?(127[.]|0[.]|169[.]254[.]|100[.]100[.]100[.]200([:/?#]|$))')",message="url must not point at a loopback, link-local, unspecified or metadata address: evidence comes from a git server, never from the node or its metadata service"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-z]+://([^/?#]*@)?[[]') || self.matches('(?i)^[a-z]+://([^/?#]*@)?[[][23][0-9a-f]{0,3}:[0-9a-f:]*[]]([:/?#]|$)')",message="an IPv6 host must be a global unicast address (2000::/3): no loopback, link-local, unique-local, mapped or unspecified address"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(?i)^[a-z]+://([^/?#]*@)?(([^/?#:@]*[.])?localhost|metadata|metadata[.]google[.]internal|-[^/?#]*)[.]?([:/?#]|$)')",message="url must not name localhost or a metadata host, nor start its host with '-'"
	URL string `json:"url,omitempty"`

	// ref is the branch, tag or commit whose ancestry is the evidence; unset means the default branch.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Ref string `json:"ref,omitempty"`

	// auth are the credentials for the clone; unset clones anonymously.
	// +optional
	Auth GitAuth `json:"auth,omitzero"`
}

// GitAuth are credentials for a clone: a password or token over https, or an SSH key.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!(has(self.passwordSecretRef) && has(self.sshPrivateKeySecretRef))",message="give a password or an SSH key, not both"
// +kubebuilder:validation:XValidation:rule="has(self.sshPrivateKeySecretRef) == has(self.sshKnownHosts)",message="an SSH key goes with sshKnownHosts, the known_hosts lines its server is checked against"
type GitAuth struct {
	// username is the user for https; unset sends the token as the password of user "git".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Username string `json:"username,omitempty"`

	// passwordSecretRef is the Secret key holding the password or token.
	// +optional
	PasswordSecretRef SecretKeyReference `json:"passwordSecretRef,omitzero"`

	// sshPrivateKeySecretRef is the Secret key holding a PEM SSH private key.
	// +optional
	SSHPrivateKeySecretRef SecretKeyReference `json:"sshPrivateKeySecretRef,omitzero"`

	// sshKnownHosts are the known_hosts lines the SSH server's key is checked against; required with an
	// SSH key, since an unchecked host key would hand the evidence to whoever answers.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	SSHKnownHosts string `json:"sshKnownHosts,omitempty"`
}

// RewindDecision says whether the agent's transcript should be rolled back to a checkpoint.
// +kubebuilder:validation:Enum=Rewind;NoRewind;Unanchored
type RewindDecision string

const (
	// DecisionRewind drops the turns after the anchored checkpoint.
	DecisionRewind RewindDecision = "Rewind"
	// DecisionNoRewind keeps the transcript: nothing ground-truth asked for a rewind.
	DecisionNoRewind RewindDecision = "NoRewind"
	// DecisionUnanchored means a rewind was warranted but no minted checkpoint matches the live transcript.
	DecisionUnanchored RewindDecision = "Unanchored"
)

// PlanStep is one declared step of the run's intent.
type PlanStep struct {
	// id is the step's identifier in the intent ledger.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ID string `json:"id,omitempty"`

	// sha is the commit that verifies the step, for verified steps.
	// +optional
	// +kubebuilder:validation:MinLength=4
	// +kubebuilder:validation:MaxLength=64
	SHA string `json:"sha,omitempty"`
}

// ReasonCode is a machine-readable cause in CamelCase, such as ResidualRemains.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
type ReasonCode string

// RewindPlan is the transcript-rewind verdict.
type RewindPlan struct {
	// decision is Rewind, NoRewind or Unanchored.
	// +required
	Decision RewindDecision `json:"decision,omitempty"`

	// reason is the machine-readable cause, such as RewindToMintedCheckpoint.
	// +required
	Reason ReasonCode `json:"reason,omitempty"`

	// message explains the decision to a human.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// rewindToTurn is the checkpoint turn the transcript is rolled back to.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RewindToTurn *int32 `json:"rewindToTurn,omitempty"`

	// transcriptDigest echoes the digest of the checkpoint rewound to, so the agent's harness can check
	// its own transcript against it before dropping turns.
	// +optional
	// +kubebuilder:validation:MinLength=64
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	TranscriptDigest string `json:"transcriptDigest,omitempty"`

	// droppedTurns is the number of turns after the anchor that a rewind drops.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DroppedTurns *int32 `json:"droppedTurns,omitempty"`

	// noGoodNote is the note handed to the agent after a rewind, built only from closed verdict tokens
	// and evidence the agent did not author.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	NoGoodNote []string `json:"noGoodNote,omitempty"`
}

// ConvergenceVerdict says whether the run's residual is shrinking towards done.
// +kubebuilder:validation:Enum=Converging;Complete;Thrashing;Starved;Insufficient
type ConvergenceVerdict string

const (
	ConvergenceConverging   ConvergenceVerdict = "Converging"
	ConvergenceComplete     ConvergenceVerdict = "Complete"
	ConvergenceThrashing    ConvergenceVerdict = "Thrashing"
	ConvergenceStarved      ConvergenceVerdict = "Starved"
	ConvergenceInsufficient ConvergenceVerdict = "Insufficient"
)

// Convergence is the verdict on whether the run was getting anywhere.
type Convergence struct {
	// verdict is Converging, Complete, Thrashing, Starved or Insufficient (too little history).
	// +required
	Verdict ConvergenceVerdict `json:"verdict,omitempty"`

	// reason is the machine-readable cause, such as ResidualReachedNewLow.
	// +required
	Reason ReasonCode `json:"reason,omitempty"`

	// message explains the verdict to a human.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// window is the number of turns judged.
	// +required
	// +kubebuilder:validation:Minimum=0
	Window *int32 `json:"window,omitempty"`

	// observations is the number of residual snapshots available.
	// +required
	// +kubebuilder:validation:Minimum=0
	Observations *int32 `json:"observations,omitempty"`

	// changes counts the turns within the window whose residual differed from the turn before.
	// +required
	// +kubebuilder:validation:Minimum=0
	Changes *int32 `json:"changes,omitempty"`
}

// PlanDriftVerdict says whether the run is still doing what its plan said.
// +kubebuilder:validation:Enum=NoPlan;InsufficientHistory;PlanComplete;Exploring;OnPlan;Drifting
type PlanDriftVerdict string

const (
	DriftNoPlan              PlanDriftVerdict = "NoPlan"
	DriftInsufficientHistory PlanDriftVerdict = "InsufficientHistory"
	DriftPlanComplete        PlanDriftVerdict = "PlanComplete"
	DriftExploring           PlanDriftVerdict = "Exploring"
	DriftOnPlan              PlanDriftVerdict = "OnPlan"
	DriftDrifting            PlanDriftVerdict = "Drifting"
)

// PlanDrift is the verdict on whether the run wandered off its plan.
type PlanDrift struct {
	// verdict is NoPlan, InsufficientHistory, PlanComplete, Exploring, OnPlan or Drifting.
	// +required
	Verdict PlanDriftVerdict `json:"verdict,omitempty"`

	// unattributedFiles are files the run changed in the judged window that no plan step names.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	UnattributedFiles []string `json:"unattributedFiles,omitempty"`

	// suggestion is what to tell the agent, set only while drifting.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Suggestion string `json:"suggestion,omitempty"`
}

// Reconciliation compares what the plan promised with what the evidence shows.
type Reconciliation struct {
	// promised is the number of steps the plan declared.
	// +required
	// +kubebuilder:validation:Minimum=0
	Promised *int32 `json:"promised,omitempty"`

	// markedDone is the number of steps the agent marked done.
	// +required
	// +kubebuilder:validation:Minimum=0
	MarkedDone *int32 `json:"markedDone,omitempty"`

	// evidenced is the number of steps whose completion the recorded evidence supports.
	// +required
	// +kubebuilder:validation:Minimum=0
	Evidenced *int32 `json:"evidenced,omitempty"`

	// claimedWithoutEvidence lists steps marked done that no evidence supports.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	ClaimedWithoutEvidence []string `json:"claimedWithoutEvidence,omitempty"`

	// unpromisedFiles lists files the run changed that no plan step names.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	UnpromisedFiles []string `json:"unpromisedFiles,omitempty"`
}

// PlanPresence says whether the run declared its intent.
// +kubebuilder:validation:Enum=Declared;Absent
type PlanPresence string

const (
	// PlanDeclared means the ledger holds an INTENT record.
	PlanDeclared PlanPresence = "Declared"
	// PlanAbsent means the run never declared an intent: nothing can be resumed against a plan.
	PlanAbsent PlanPresence = "Absent"
)

// PlanEvidence is what the verdicts were computed from; the operator re-evaluates when it changes.
type PlanEvidence struct {
	// eventsHash is the SHA-256 of the session's event log that was judged.
	// +required
	// +kubebuilder:validation:MinLength=64
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	EventsHash string `json:"eventsHash,omitempty"`

	// resolvedCommit is the commit whose ancestry was the evidence; unset when no repository was given,
	// and then nothing could be re-verified.
	// +optional
	// +kubebuilder:validation:MinLength=40
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{40}([0-9a-f]{24})?$`
	ResolvedCommit string `json:"resolvedCommit,omitempty"`

	// plan says whether the run declared its intent.
	// +required
	Plan PlanPresence `json:"plan,omitempty"`
}

// RunStop says how a run stopped.
// +kubebuilder:validation:Enum=Suspended;Interrupted;Finished;Failed;Killed;DeadlineExceeded
type RunStop string

const (
	// RunSuspended means the recorder parked the run on the agent's request (a minted SUSPEND).
	RunSuspended RunStop = "Suspended"
	// RunFinished means the agent ended on its own with success.
	RunFinished RunStop = "Finished"
	// RunFailed, RunKilled and RunDeadlineExceeded mean the agent exited with an error, was killed,
	// or ran out of time, by the recorder's word or the kubelet's.
	RunFailed           RunStop = "Failed"
	RunKilled           RunStop = "Killed"
	RunDeadlineExceeded RunStop = "DeadlineExceeded"
	// RunInterrupted means nothing recorded says how the agent ended: the recorder died first, or
	// was stopped without seeing it.
	RunInterrupted RunStop = "Interrupted"
)

// ResumePlan condition reasons, beside the shared ones.
const (
	// ReasonVerdictComputed is set on Ready when the verdicts were written for the current evidence.
	ReasonVerdictComputed = "VerdictComputed"
	// ReasonEvidenceUnavailable is set on Stalled when the session or workspace evidence could not be read.
	ReasonEvidenceUnavailable = "EvidenceUnavailable"
)

// ResumePlanStatus is the verdict on the session.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!has(self.conditions) || !(self.conditions.exists(c, c.type == 'Ready' && c.status == 'True') && self.conditions.exists(c, c.type == 'Stalled' && c.status == 'True'))",message="an object is not Ready and Stalled at once"
type ResumePlanStatus struct {
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

	// lastRun is the engine Job whose outcome this status holds (the verify Job of an AgentSession,
	// the resume-plan Job of a ResumePlan).
	// +optional
	LastRun JobRun `json:"lastRun,omitzero"`

	// verdict is Resumable, Complete, Diverged or Unresumable.
	// +optional
	Verdict ResumeVerdict `json:"verdict,omitempty"`

	// reason is the machine-readable cause of the verdict, such as ResidualRemains.
	// +optional
	Reason ReasonCode `json:"reason,omitempty"`

	// message explains the verdict to a human.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// resumeSHA is the commit to re-enter the run at.
	// +optional
	// +kubebuilder:validation:MinLength=40
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{40}([0-9a-f]{24})?$`
	ResumeSHA string `json:"resumeSHA,omitempty"`

	// resumeAfterStep is the re-entry point in the recording: the log step of the latest recorded
	// call behind the verified steps. A resume replays the log up to it and goes live after.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ResumeAfterStep *int64 `json:"resumeAfterStep,omitempty"`

	// residualSteps is the number of declared steps not yet verified.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ResidualSteps *int32 `json:"residualSteps,omitempty"`

	// residual lists the declared steps not yet verified, in plan order; truncated says when it was cut.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Residual []PlanStep `json:"residual,omitempty"`

	// verified lists the contiguous verified prefix of the plan, with the commit verifying each step.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Verified []PlanStep `json:"verified,omitempty"`

	// truncated lists the status lists that were cut to their bound, with their full length.
	// +optional
	// +listType=map
	// +listMapKey=field
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Truncated []ListTruncation `json:"truncated,omitempty"`

	// stop says how the run stopped: Suspended on the agent's request, Finished, Failed, Killed,
	// DeadlineExceeded, or Interrupted when nothing recorded says.
	// +optional
	Stop RunStop `json:"stop,omitempty"`

	// rewind is the transcript-rewind verdict.
	// +optional
	Rewind RewindPlan `json:"rewind,omitzero"`

	// reachability says whether the garbage collector must keep the session, and why.
	// +optional
	Reachability ReachabilityStatus `json:"reachability,omitzero"`

	// convergence says whether the run was getting anywhere.
	// +optional
	Convergence Convergence `json:"convergence,omitzero"`

	// drift says whether the run wandered off its plan.
	// +optional
	Drift PlanDrift `json:"drift,omitzero"`

	// reconciliation compares the plan's promises with the evidence.
	// +optional
	Reconciliation Reconciliation `json:"reconciliation,omitzero"`

	// evidence is what the verdicts were computed from.
	// +optional
	Evidence PlanEvidence `json:"evidence,omitzero"`

	// evaluatedAt is when the verdicts were computed.
	// +optional
	EvaluatedAt *metav1.Time `json:"evaluatedAt,omitempty"`
}

// ResumePlan is the verdict on whether a crashed or paused run can be resumed, from where, with which
// residual steps, and whether its transcript should be rewound.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rp,categories=agentrewind
// +kubebuilder:printcolumn:name="Session",type=string,JSONPath=`.spec.sessionRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Verdict",type=string,JSONPath=`.status.verdict`
// +kubebuilder:printcolumn:name="Residual",type=integer,JSONPath=`.status.residualSteps`
// +kubebuilder:printcolumn:name="Re-entry",type=string,JSONPath=`.status.resumeSHA`
// +kubebuilder:printcolumn:name="After Step",type=integer,JSONPath=`.status.resumeAfterStep`
// +kubebuilder:printcolumn:name="Rewind",type=string,JSONPath=`.status.rewind.decision`
// +kubebuilder:printcolumn:name="Reachability",type=string,JSONPath=`.status.reachability.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,priority=1
// +kubebuilder:printcolumn:name="Convergence",type=string,JSONPath=`.status.convergence.verdict`,priority=1
// +kubebuilder:printcolumn:name="Drift",type=string,JSONPath=`.status.drift.verdict`,priority=1
// +kubebuilder:printcolumn:name="Stop",type=string,JSONPath=`.status.stop`,priority=1
type ResumePlan struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the session and any extra evidence.
	// +required
	Spec ResumePlanSpec `json:"spec,omitzero"`

	// status is the verdict.
	// +optional
	Status ResumePlanStatus `json:"status,omitzero"`
}

// ResumePlanList is a list of ResumePlans.
// +kubebuilder:object:root=true
type ResumePlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResumePlan `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ResumePlan{}, &ResumePlanList{})
}
