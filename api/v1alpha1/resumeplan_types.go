package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResumePlanSpec names the session to judge and, optionally, extra evidence to judge it against.
// +kubebuilder:validation:XValidation:rule="!(has(self.git) && has(self.workspace))",message="give at most one source of workspace evidence: git or workspace"
type ResumePlanSpec struct {
	// sessionRef names the AgentSession to judge.
	// +required
	SessionRef LocalObjectReference `json:"sessionRef"`

	// git is a repository whose history the agent's claimed steps are re-adjudicated against.
	// +optional
	Git *GitEvidence `json:"git,omitempty"`

	// workspace is a git work tree on a volume to re-adjudicate against, such as the agent's own.
	// +optional
	Workspace *WorkspaceVolume `json:"workspace,omitempty"`
}

// GitEvidence points at a git repository.
type GitEvidence struct {
	// url is the repository to clone.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`

	// ref is the branch, tag or commit whose ancestry is the evidence; empty means the default branch.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Ref string `json:"ref,omitempty"`

	// credentialsSecretRef names a Secret with the keys username and password (or token) for the clone.
	// +optional
	CredentialsSecretRef *LocalObjectReference `json:"credentialsSecretRef,omitempty"`
}

// RewindDecision says whether the agent's transcript should be rolled back to a checkpoint.
// +kubebuilder:validation:Enum=REWIND;NO_REWIND;UNANCHORED
type RewindDecision string

const (
	// DecisionRewind drops the turns after the anchored checkpoint.
	DecisionRewind RewindDecision = "REWIND"
	// DecisionNoRewind keeps the transcript: nothing ground-truth asked for a rewind.
	DecisionNoRewind RewindDecision = "NO_REWIND"
	// DecisionUnanchored means a rewind was warranted but no minted checkpoint matches the live transcript.
	DecisionUnanchored RewindDecision = "UNANCHORED"
)

// PlanStep is one declared step of the run's intent.
type PlanStep struct {
	// id is the step's identifier in the intent ledger.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ID string `json:"id"`

	// sha is the commit that verifies the step, for verified steps.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SHA string `json:"sha,omitempty"`
}

// RewindPlan is the transcript-rewind verdict.
type RewindPlan struct {
	// decision is REWIND, NO_REWIND or UNANCHORED.
	// +required
	Decision RewindDecision `json:"decision"`

	// reason explains the decision in a sentence.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// rewindToTurn is the checkpoint turn the transcript is rolled back to.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RewindToTurn *int32 `json:"rewindToTurn,omitempty"`

	// droppedTurns is the number of turns after the anchor that a rewind drops.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DroppedTurns int32 `json:"droppedTurns,omitempty"`

	// noGoodNote is the note handed to the agent after a rewind, built only from closed verdict tokens
	// and evidence the agent did not author.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	NoGoodNote []string `json:"noGoodNote,omitempty"`
}

// Reconciliation compares what the plan promised with what the evidence shows.
type Reconciliation struct {
	// promised is the number of steps the plan declared.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Promised int32 `json:"promised,omitempty"`

	// markedDone is the number of steps the agent marked done.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MarkedDone int32 `json:"markedDone,omitempty"`

	// evidenced is the number of steps whose completion the recorded evidence supports.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Evidenced int32 `json:"evidenced,omitempty"`

	// claimedWithoutEvidence lists steps marked done that no evidence supports.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=128
	ClaimedWithoutEvidence []string `json:"claimedWithoutEvidence,omitempty"`

	// unpromisedFiles lists files the run changed that no plan step names.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	UnpromisedFiles []string `json:"unpromisedFiles,omitempty"`
}

// ResumePlan condition types and reasons.
const (
	// ResumePlanConditionEvaluated is True once a verdict was computed for the current evidence.
	ResumePlanConditionEvaluated = "Evaluated"

	// ReasonVerdictComputed is set when the verdict was written.
	ReasonVerdictComputed = "VerdictComputed"
	// ReasonEvidenceUnavailable is set when the session or workspace evidence could not be read.
	ReasonEvidenceUnavailable = "EvidenceUnavailable"
)

// ResumePlanStatus is the verdict on the session.
type ResumePlanStatus struct {
	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// verdict is RESUMABLE, COMPLETE, DIVERGED or UNRESUMABLE.
	// +optional
	Verdict ResumeVerdict `json:"verdict,omitempty"`

	// reason explains the verdict in a sentence.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// resumeSHA is the commit to re-enter the run at.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ResumeSHA string `json:"resumeSHA,omitempty"`

	// residualSteps is the number of declared steps not yet verified.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ResidualSteps int32 `json:"residualSteps,omitempty"`

	// residual lists the declared steps not yet verified, in plan order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Residual []PlanStep `json:"residual,omitempty"`

	// verified lists the contiguous verified prefix of the plan, with the commit verifying each step.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Verified []PlanStep `json:"verified,omitempty"`

	// suspended is true when the run was suspended on purpose rather than crashing.
	// +optional
	Suspended bool `json:"suspended,omitempty"`

	// rewind is the transcript-rewind verdict.
	// +optional
	Rewind *RewindPlan `json:"rewind,omitempty"`

	// reachability says whether the garbage collector must keep the session.
	// +optional
	Reachability Reachability `json:"reachability,omitempty"`

	// reachabilityReason explains reachability in a sentence.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ReachabilityReason string `json:"reachabilityReason,omitempty"`

	// reconciliation compares the plan's promises with the evidence.
	// +optional
	Reconciliation *Reconciliation `json:"reconciliation,omitempty"`

	// evaluatedAt is when the verdict was computed.
	// +optional
	EvaluatedAt *metav1.Time `json:"evaluatedAt,omitempty"`

	// conditions are Evaluated.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ResumePlan is the verdict on whether a crashed or paused run can be resumed, from where, with which
// residual steps, and whether its transcript should be rewound.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rp,categories=agentrewind
// +kubebuilder:printcolumn:name="Session",type=string,JSONPath=`.spec.sessionRef.name`
// +kubebuilder:printcolumn:name="Verdict",type=string,JSONPath=`.status.verdict`
// +kubebuilder:printcolumn:name="Residual",type=integer,JSONPath=`.status.residualSteps`
// +kubebuilder:printcolumn:name="Re-entry",type=string,JSONPath=`.status.resumeSHA`
// +kubebuilder:printcolumn:name="Rewind",type=string,JSONPath=`.status.rewind.decision`
// +kubebuilder:printcolumn:name="Reachability",type=string,JSONPath=`.status.reachability`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,priority=1
type ResumePlan struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the session and any extra evidence.
	// +required
	Spec ResumePlanSpec `json:"spec"`

	// status is the verdict.
	// +optional
	Status ResumePlanStatus `json:"status,omitempty"`
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
