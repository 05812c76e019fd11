package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionOverBudget is True on a StorageBudget while a kind's stored bytes exceed its limit.
const ConditionOverBudget = "OverBudget"

// StorageBudget condition reasons.
const (
	// ReasonWithinBudget is set on OverBudget (False) and Ready when every kind fits its limit.
	ReasonWithinBudget = "WithinBudget"
	// ReasonSessionsOverBudget is set on OverBudget when the sessions' bytes exceed their limit.
	ReasonSessionsOverBudget = "SessionsOverBudget"
	// ReasonCheckpointsOverBudget is set on OverBudget when the checkpoints' bytes exceed their limit.
	ReasonCheckpointsOverBudget = "CheckpointsOverBudget"
	// ReasonOverBudget is set on OverBudget when sessions and checkpoints both exceed their limits.
	ReasonOverBudget = "OverBudget"
)

// StorageBudgetSpec sets the bytes a namespace's sessions and checkpoints may keep in the store.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="has(self.sessions) || has(self.checkpoints)",message="a budget limits sessions, checkpoints or both: set spec.sessions or spec.checkpoints"
type StorageBudgetSpec struct {
	// sessions bounds the stored bytes of the namespace's AgentSessions, as each one's
	// status.recording.bytes reports them (log, meta and referenced blobs; a blob two sessions share
	// counts for each). A quantity: 50Gi, 10G, 1073741824.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="sessions must not be negative"
	Sessions *resource.Quantity `json:"sessions,omitempty"`

	// checkpoints bounds the bytes the namespace's Checkpoints added to the store, as each one's
	// status.snapshot.incrementalBytes reports them (after deduplication against what was stored).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="checkpoints must not be negative"
	Checkpoints *resource.Quantity `json:"checkpoints,omitempty"`
}

// StorageUsage is what one kind of object keeps in the store against its limit.
type StorageUsage struct {
	// usedBytes is the sum of the kind's stored bytes in the namespace, each object counting what it
	// adds: a session its recording.bytes (a fork whose parent is in the namespace, its
	// recording.addedBytes), a checkpoint its snapshot.incrementalBytes.
	// +required
	// +kubebuilder:validation:Minimum=0
	UsedBytes *int64 `json:"usedBytes,omitempty"`

	// limitBytes is the budget's limit in bytes; absent when the budget leaves the kind unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LimitBytes *int64 `json:"limitBytes,omitempty"`

	// objects is how many objects of the kind the namespace holds; those that report no bytes yet
	// (still recording, or never snapshotted) count here and add nothing to usedBytes.
	// +required
	// +kubebuilder:validation:Minimum=0
	Objects *int64 `json:"objects,omitempty"`
}

// StorageBudgetStatus is the namespace's usage against the budget.
// +kubebuilder:validation:MinProperties=1
type StorageBudgetStatus struct {
	// conditions are Ready (the usage was counted) and OverBudget.
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

	// sessions is the AgentSessions' usage.
	// +optional
	Sessions StorageUsage `json:"sessions,omitzero"`

	// checkpoints is the Checkpoints' usage.
	// +optional
	Checkpoints StorageUsage `json:"checkpoints,omitzero"`
}

// StorageBudget sets how many bytes the AgentSessions and Checkpoints of its namespace may keep in the
// object store, and reports what they keep, so a team sees where its storage goes before garbage
// collection has to act. It only reports: it never refuses a recording or deletes anything.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sbudget,categories=agentrewind
// +kubebuilder:printcolumn:name="Sessions",type=integer,JSONPath=`.status.sessions.usedBytes`,description="bytes the namespace's sessions keep"
// +kubebuilder:printcolumn:name="Sessions Limit",type=string,JSONPath=`.spec.sessions`
// +kubebuilder:printcolumn:name="Checkpoints",type=integer,JSONPath=`.status.checkpoints.usedBytes`,description="bytes the namespace's checkpoints added"
// +kubebuilder:printcolumn:name="Checkpoints Limit",type=string,JSONPath=`.spec.checkpoints`
// +kubebuilder:printcolumn:name="Over",type=string,JSONPath=`.status.conditions[?(@.type=="OverBudget")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="OverBudget")].reason`,priority=1
type StorageBudget struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the namespace's limits.
	// +required
	Spec StorageBudgetSpec `json:"spec,omitzero"`

	// status is the namespace's usage against them.
	// +optional
	Status StorageBudgetStatus `json:"status,omitzero"`
}

// StorageBudgetList is a list of StorageBudgets.
// +kubebuilder:object:root=true
type StorageBudgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StorageBudget `json:"items"`
}

func init() {
	SchemeBuilder.Register(&StorageBudget{}, &StorageBudgetList{})
}
