package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ExemptKind is the kind of policy object an exception exempts from.
// +kubebuilder:validation:Enum:={CapacityPolicy,CapacityBudget,ClusterCapacityBudget}
type ExemptKind string

// Kinds an exception exempts from.
const (
	ExemptCapacityPolicy        ExemptKind = "CapacityPolicy"
	ExemptCapacityBudget        ExemptKind = "CapacityBudget"
	ExemptClusterCapacityBudget ExemptKind = "ClusterCapacityBudget"
)

// The rules of a budget an exception may name (ExemptPolicy.Rules for the budget kinds).
const (
	// BudgetRuleHourlyCost is limits.hourlyCost, the spec's and every schedule's.
	BudgetRuleHourlyCost = "hourlyCost"
	// BudgetRuleMonthlyCost is limits.monthlyCost, the spec's and every schedule's.
	BudgetRuleMonthlyCost = "monthlyCost"
	// BudgetRuleSpot is the Spot bounds, the spec's and every schedule's.
	BudgetRuleSpot = "spot"
	// BudgetRuleInstanceFamilies is instanceFamilies.
	BudgetRuleInstanceFamilies = "instanceFamilies"
)

// BudgetRules are the rules of a budget, in the order messages name them.
var BudgetRules = []string{BudgetRuleHourlyCost, BudgetRuleMonthlyCost, BudgetRuleSpot, BudgetRuleInstanceFamilies}

// AnyName in ExemptPolicy.Name exempts from every object of the kind.
const AnyName = "*"

// ExemptPolicy names the policy objects, and their rules, an exception exempts from.
// +kubebuilder:validation:XValidation:message="the rules of a CapacityBudget or ClusterCapacityBudget are hourlyCost, monthlyCost, spot and instanceFamilies",rule="self.kind == 'CapacityPolicy' || !has(self.rules) || self.rules.all(r, r in ['hourlyCost', 'monthlyCost', 'spot', 'instanceFamilies'])"
type ExemptPolicy struct {
	// Kind is CapacityPolicy, CapacityBudget or ClusterCapacityBudget.
	// +required
	Kind ExemptKind `json:"kind"`
	// Name is the object's name, or "*" for every object of the kind that governs the
	// namespaces.
	// +kubebuilder:validation:Pattern=`^(\*|[a-z0-9]([-a-z0-9.]*[a-z0-9])?)$`
	// +kubebuilder:validation:MaxLength:=253
	// +required
	Name string `json:"name"`
	// Rules are the rules exempted; empty exempts from all of them. A budget's rules are
	// hourlyCost, monthlyCost, spot and instanceFamilies; a CapacityPolicy's are the "rule"
	// its deny and warn results name ({"msg": ..., "rule": "max-cpu"}).
	// +kubebuilder:validation:MaxItems:=20
	// +kubebuilder:validation:items:MaxLength:=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_.:-]+$`
	// +listType=set
	// +optional
	Rules []string `json:"rules,omitempty"`
}

// CapacityExceptionSpec grants namespaces a time-limited exception from policies.
// +kubebuilder:validation:XValidation:message="set one of namespaceSelector or namespaces",rule="has(self.namespaceSelector) != has(self.namespaces)"
type CapacityExceptionSpec struct {
	// NamespaceSelector selects the namespaces the exception applies to; {} selects all.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// Namespaces names the namespaces the exception applies to.
	// +kubebuilder:validation:MinItems:=1
	// +kubebuilder:validation:MaxItems:=100
	// +kubebuilder:validation:items:MaxLength:=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// Exempt names the policy objects, and their rules, the namespaces are exempt from.
	// +kubebuilder:validation:MinItems:=1
	// +kubebuilder:validation:MaxItems:=20
	// +listType=atomic
	// +required
	Exempt []ExemptPolicy `json:"exempt"`
	// ExtraHourlyCost raises the hourly limit of the budgets exempted (their hourlyCost and
	// monthlyCost rules) by this many USD per hour, instead of lifting it.
	// +optional
	ExtraHourlyCost *Money `json:"extraHourlyCost,omitempty"`
	// ExpiresAt is when the exception stops applying, everywhere at once. Admission refuses one
	// already past, or further out than the manager's --max-exception-duration (720h).
	// +required
	ExpiresAt metav1.Time `json:"expiresAt"`
	// Reason says why the exception was granted.
	// +kubebuilder:validation:MinLength:=1
	// +kubebuilder:validation:MaxLength:=1024
	// +required
	Reason string `json:"reason"`
	// Ticket is a reference to the request, e.g. OPS-1234 or a URL.
	// +kubebuilder:validation:MaxLength:=512
	// +optional
	Ticket string `json:"ticket,omitempty"`
	// ApprovedBy is who approved the exception.
	// +kubebuilder:validation:MaxLength:=256
	// +optional
	ApprovedBy string `json:"approvedBy,omitempty"`
}

// Condition types of a CapacityException.
const (
	// ConditionTypeActive is True while the exception applies (before spec.expiresAt).
	ConditionTypeActive = "Active"
	// ConditionTypeExpired is True from spec.expiresAt on.
	ConditionTypeExpired = "Expired"
)

// CapacityExceptionStatus says whether the exception applies, and where.
type CapacityExceptionStatus struct {
	// Namespaces are the namespaces it applies to now (at most 100 listed).
	// +kubebuilder:validation:MaxItems:=100
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// NamespaceCount is how many namespaces it applies to now.
	// +optional
	NamespaceCount int32 `json:"namespaceCount"`
	// ObservedGeneration is the metadata.generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Active, Expired, and Ready (the exception was evaluated).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CapacityException exempts namespaces from policies until it expires. It is cluster-scoped,
// so that only those allowed to write cluster-scoped policy objects can grant one.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=capacityexceptions,scope=Cluster,categories=karpenter,shortName={cex}
// +kubebuilder:printcolumn:name="Expires",type="string",JSONPath=".spec.expiresAt",description=""
// +kubebuilder:printcolumn:name="Active",type="string",JSONPath=".status.conditions[?(@.type==\"Active\")].status",description=""
// +kubebuilder:printcolumn:name="Namespaces",type="integer",JSONPath=".status.namespaceCount",description="namespaces it applies to"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".spec.reason",priority=1,description=""
// +kubebuilder:printcolumn:name="Ticket",type="string",JSONPath=".spec.ticket",priority=1,description=""
type CapacityException struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// +required
	Spec CapacityExceptionSpec `json:"spec"`
	// +optional
	Status CapacityExceptionStatus `json:"status,omitzero"`
}

// ActiveAt reports whether the exception applies at now: before spec.expiresAt, and not being
// deleted. Every enforcement point decides by it, with its own clock's now.
func (e *CapacityException) ActiveAt(now time.Time) bool {
	return e.DeletionTimestamp == nil && now.Before(e.Spec.ExpiresAt.Time)
}

// +kubebuilder:object:root=true

// CapacityExceptionList contains a list of CapacityException.
type CapacityExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []CapacityException `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &CapacityException{}, &CapacityExceptionList{})
		return nil
	})
}
