package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// NodeSelectorRequirement selects instance types (and their offerings) by a label: the
// instance type's own labels, node.kubernetes.io/instance-type, the offering's zone and
// capacity type, karpenter.sh/nodepool and the NodePool template's labels.
type NodeSelectorRequirement struct {
	// Key is the label key the selector applies to.
	// +kubebuilder:validation:MinLength:=1
	// +kubebuilder:validation:MaxLength:=316
	// +required
	Key string `json:"key"`
	// Operator relates the key to the values: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte
	// or Lte.
	// +kubebuilder:validation:Enum:={In,NotIn,Exists,DoesNotExist,Gt,Lt,Gte,Lte}
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`
	// Values are the operator's values: at least one for In and NotIn, none for Exists and
	// DoesNotExist, one integer for Gt, Lt, Gte and Lte.
	// +kubebuilder:validation:MaxItems:=100
	// +kubebuilder:validation:items:MaxLength:=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// NodeOverlaySpec is what an overlay changes and for which instance types.
type NodeOverlaySpec struct {
	// Requirements select the instance types and offerings the overlay applies to; all must
	// hold. Empty selects every offering of every NodePool.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' or 'NotIn' must have a value defined",rule="self.all(x, (x.operator == 'In' || x.operator == 'NotIn') ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements with operator 'Exists' or 'DoesNotExist' must not have values",rule="self.all(x, (x.operator == 'Exists' || x.operator == 'DoesNotExist') ? !has(x.values) || x.values.size() == 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value",rule="self.all(x, (x.operator in ['Gt', 'Lt', 'Gte', 'Lte']) ? (x.values.size() == 1 && x.values[0].matches('^[0-9]+$')) : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +listType=atomic
	// +optional
	Requirements []NodeSelectorRequirement `json:"requirements,omitempty"`
	// PriceAdjustment changes the price of the selected offerings: a signed amount in USD per
	// hour ("-0.05", "+0.1") or a signed percentage ("-30%", "+10%"; at most -100%). A price
	// never goes below zero.
	// +kubebuilder:validation:Pattern=`^(([+-]\d*\.?\d+)|(\+\d*\.?\d+%)|(-\d{1,2}(\.\d+)?%)|(-100%))$`
	// +optional
	PriceAdjustment *string `json:"priceAdjustment,omitempty"`
	// Price replaces the price of the selected offerings, in USD per hour.
	// +kubebuilder:validation:Pattern=`^\d+(\.\d+)?$`
	// +optional
	Price *string `json:"price,omitempty"`
	// Capacity adds extended resources to the selected instance types (replacing an extended
	// resource's quantity the type already has); cpu, memory, ephemeral-storage and pods
	// cannot be changed. It is what the solver believes a node will have: the node itself
	// advertises what its device plugins register.
	// +kubebuilder:validation:XValidation:message="capacity may add extended resources only, not cpu, memory, ephemeral-storage or pods",rule="self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))"
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Weight orders overlapping overlays: for an offering's price and for each capacity
	// resource, the overlay with the highest weight wins. Two overlays of the same weight that
	// set the same offering's price or the same resource of a type conflict: as upstream's,
	// the one whose name sorts last alphabetically is applied, and the other is not applied at
	// all and reports the conflict in its ValidationSucceeded condition. Unset is 0.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=10000
	// +optional
	Weight *int32 `json:"weight,omitempty"`
}

// ConditionTypeValidationSucceeded is the NodeOverlay condition that says whether it is
// applied: False with reason RuntimeValidation (its requirements or capacity are invalid) or
// Conflict (another overlay of the same weight sets the same thing).
const ConditionTypeValidationSucceeded = "ValidationSucceeded"

// Annotations a NodeClaim carries when an overlay changed the price or the capacity of one of
// the instance types it may launch as, as upstream's.
const (
	PriceOverlayAppliedAnnotationKey    = "karpenter.sh/price-overlay-applied"
	CapacityOverlayAppliedAnnotationKey = "karpenter.sh/capacity-overlay-applied"
)

// NodeOverlayStatus is the observed state of a NodeOverlay.
type NodeOverlayStatus struct {
	// Conditions contains signals for health and readiness: ValidationSucceeded and Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeOverlay changes the price or the extended resources the solver, disruption, the policy
// layer's dollars and karpenterctl believe selected instance types have: a Savings Plan or a
// reserved-instance discount, or a device plugin's resources. It is acted on with the
// NodeOverlay feature gate (FEATURE_GATES=NodeOverlay=true).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:path=nodeoverlays,scope=Cluster,categories=karpenter,shortName=overlays
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1,description=""
type NodeOverlay struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// +kubebuilder:validation:XValidation:message="cannot set both 'price' and 'priceAdjustment'",rule="!has(self.price) || !has(self.priceAdjustment)"
	// +required
	Spec NodeOverlaySpec `json:"spec"`
	// +optional
	Status NodeOverlayStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// NodeOverlayList contains a list of NodeOverlay.
type NodeOverlayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []NodeOverlay `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &NodeOverlay{}, &NodeOverlayList{})
		return nil
	})
}
