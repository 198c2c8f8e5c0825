package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// NodeClaimSpec describes a node that Karpenter launches: its requirements, taints, the node
// class that configures it, and the resources it must have room for.
type NodeClaimSpec struct {
	// Taints will be applied to the NodeClaim's node.
	// +kubebuilder:validation:XValidation:message="taint effect must be one of NoSchedule, PreferNoSchedule or NoExecute",rule="self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
	// +kubebuilder:validation:MaxItems:=100
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are taints that are applied to nodes upon startup which are expected to be
	// removed automatically within a short period of time, typically by a DaemonSet that
	// tolerates the taint. They are ignored when placing pods.
	// +kubebuilder:validation:XValidation:message="taint effect must be one of NoSchedule, PreferNoSchedule or NoExecute",rule="self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
	// +kubebuilder:validation:MaxItems:=100
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements are layered with GetLabels and applied to every node.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value",rule="self.all(x, (x.operator in ['Gt', 'Lt', 'Gte', 'Lte']) ? (x.values.size() == 1 && x.values[0].matches('^[0-9]+$')) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// Resources models the resource requirements for the NodeClaim to launch.
	// +optional
	Resources ResourceRequirements `json:"resources,omitzero"`
	// NodeClassRef is a reference to an object that defines provider specific configuration.
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod is the maximum duration the controller will wait before forcefully
	// deleting the pods on a node, measured from when deletion is first initiated. Pod
	// disruption budgets and karpenter.sh/do-not-disrupt are not respected past it.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is the duration the controller will wait before terminating a node, measured
	// from when the node is created. "Never" disables expiry.
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitzero"`
}

// NodeSelectorRequirementWithMinValues is a node selector requirement, as in a pod's node
// affinity, with the minimum number of distinct values the launch must stay flexible over.
// +kubebuilder:validation:XValidation:message="minValues is only valid with operators 'In' or 'Exists'",rule="has(self.minValues) ? self.operator in ['In', 'Exists'] : true"
// +kubebuilder:validation:XValidation:message="operators 'Exists' and 'DoesNotExist' take no values",rule="self.operator in ['Exists', 'DoesNotExist'] ? (!has(self.values) || size(self.values) == 0) : true"
type NodeSelectorRequirementWithMinValues struct {
	// Key is the label key that the requirement applies to.
	// +kubebuilder:validation:MaxLength:=316
	// +kubebuilder:validation:Pattern=`^(([a-zA-Z0-9]|[a-zA-Z0-9][-a-zA-Z0-9]*[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][-a-zA-Z0-9]*[a-zA-Z0-9]))*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self in ['karpenter.sh/capacity-type', 'karpenter.sh/nodepool'] || !self.find('^([^/]+)').endsWith('karpenter.sh')"
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule="self != 'kubernetes.io/hostname'"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule="self in ['karpenter.k8s.aws/capacity-reservation-id', 'karpenter.k8s.aws/capacity-reservation-type', 'karpenter.k8s.aws/capacity-reservation-interruptible', 'karpenter.k8s.aws/instance-hypervisor', 'karpenter.k8s.aws/instance-encryption-in-transit-supported', 'karpenter.k8s.aws/nitro-sandbox', 'karpenter.k8s.aws/instance-category', 'karpenter.k8s.aws/instance-capability-flex', 'karpenter.k8s.aws/instance-family', 'karpenter.k8s.aws/instance-generation', 'karpenter.k8s.aws/instance-size', 'karpenter.k8s.aws/instance-local-nvme', 'karpenter.k8s.aws/instance-cpu', 'karpenter.k8s.aws/instance-cpu-manufacturer', 'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz', 'karpenter.k8s.aws/instance-memory', 'karpenter.k8s.aws/instance-ebs-bandwidth', 'karpenter.k8s.aws/instance-network-bandwidth', 'karpenter.k8s.aws/instance-gpu-name', 'karpenter.k8s.aws/instance-gpu-manufacturer', 'karpenter.k8s.aws/instance-gpu-count', 'karpenter.k8s.aws/instance-gpu-memory', 'karpenter.k8s.aws/instance-accelerator-name', 'karpenter.k8s.aws/instance-accelerator-manufacturer', 'karpenter.k8s.aws/instance-accelerator-count', 'karpenter.k8s.aws/instance-tenancy', 'karpenter.k8s.aws/placement-group-id', 'karpenter.k8s.aws/placement-group-partition'] || !self.find('^([^/]+)').endsWith('karpenter.k8s.aws')"
	// +required
	Key string `json:"key"`
	// Operator represents a key's relationship to a set of values.
	// +kubebuilder:validation:Enum:={In,NotIn,Exists,DoesNotExist,Gt,Lt,Gte,Lte}
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`
	// Values is the set of values the operator applies to; one integer for Gt, Lt, Gte and Lte,
	// none for Exists and DoesNotExist.
	// +kubebuilder:validation:MaxItems:=100
	// +kubebuilder:validation:items:MaxLength:=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
	// MinValues is the minimum number of unique values required to define the flexibility of
	// the specific requirement.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// Operators that upstream Karpenter v1 adds to the core node selector operators.
const (
	NodeSelectorOpGte corev1.NodeSelectorOperator = "Gte"
	NodeSelectorOpLte corev1.NodeSelectorOperator = "Lte"
)

// ResourceRequirements models the required resources for the NodeClaim to launch.
type ResourceRequirements struct {
	// Requests describes the minimum required resources for the NodeClaim to launch.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClassReference names the provider-specific node class of a NodeClaim.
type NodeClassReference struct {
	// Kind of the referent; e.g. EC2NodeClass or KWOKNodeClass.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="kind may not be empty"
	// +required
	Kind string `json:"kind"`
	// Name of the referent.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="name may not be empty"
	// +required
	Name string `json:"name"`
	// Group of the referent; e.g. karpenter.k8s.aws.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="group may not be empty"
	// +kubebuilder:validation:Pattern=`^[^/]*$`
	// +required
	Group string `json:"group"`
}

// NodeClaimStatus is the observed state of a NodeClaim.
type NodeClaimStatus struct {
	// NodeName is the name of the corresponding node object.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// ProviderID of the corresponding node object.
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// ImageID is an identifier for the image that runs on the node.
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// Capacity is the estimated full capacity of the node.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable is the estimated allocatable capacity of the node.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Conditions contains signals for health and readiness.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastPodEventTime is updated with the last time a pod was scheduled or removed from the
	// node. A pod going terminal or terminating is also considered as removed.
	// +optional
	LastPodEventTime metav1.Time `json:"lastPodEventTime,omitzero"`
	// ObservedGeneration is the metadata.generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// NodeClaim condition types.
const (
	ConditionTypeLaunched       = "Launched"
	ConditionTypeRegistered     = "Registered"
	ConditionTypeInitialized    = "Initialized"
	ConditionTypeReady          = "Ready"
	ConditionTypeDrifted        = "Drifted"
	ConditionTypeConsolidatable = "Consolidatable"
	ConditionTypeDrained        = "Drained"
	// ConditionTypeVolumesDetached is True once the drained node's VolumeAttachments of
	// drainable pods are gone (False when terminationGracePeriod ran out first).
	ConditionTypeVolumesDetached = "VolumesDetached"
	// ConditionTypeInstanceTerminating is True once termination asked the cloud provider to
	// terminate the instance, after the drain.
	ConditionTypeInstanceTerminating = "InstanceTerminating"
	ConditionTypeDisruptionReason    = "DisruptionReason"
	ConditionTypeDisrupting          = "Disrupting"
	ConditionTypeNodeClassReady      = "NodeClassReady"
	ConditionTypeValidationSucceeded = "ValidationSucceeded"
	// ConditionTypeNodeRegistrationHealthy, on a NodePool, is False while its latest NodeClaim
	// failed to launch or register in time, True once one registers, Unknown after a change.
	ConditionTypeNodeRegistrationHealthy = "NodeRegistrationHealthy"
	// ConditionTypeRebooting is True while node repair reboots the node in place, its reason
	// the phase (RebootRequested, RebootIssued); False with RebootSucceeded or RebootFailed
	// once the reboot ended.
	ConditionTypeRebooting = "Rebooting"
	// ConditionTypeConsistentStateFound is True once the node is what the NodeClaim said it
	// would be, False (reason ConsistencyCheckFailed) when it came up short, as upstream's.
	ConditionTypeConsistentStateFound = "ConsistentStateFound"
)

// Phases of a reboot, the reasons of the Rebooting condition, as upstream.
const (
	RebootReasonRequested = "RebootRequested"
	RebootReasonIssued    = "RebootIssued"
	RebootReasonSucceeded = "RebootSucceeded"
	RebootReasonFailed    = "RebootFailed"
	// RebootReasonRebooting is the Initialized condition's reason while the node reboots.
	RebootReasonRebooting = "Rebooting"
)

// NodeClaim is the API for a node that Karpenter launches; it records the request and, in
// status, the instance that fulfils it.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nodeclaims,scope=Cluster,categories=karpenter,shortName={nc,ncs}
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".metadata.labels.node\\.kubernetes\\.io/instance-type",description=""
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".metadata.labels.karpenter\\.sh/capacity-type",description=""
// +kubebuilder:printcolumn:name="Zone",type="string",JSONPath=".metadata.labels.topology\\.kubernetes\\.io/zone",description=""
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.nodeName",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="ImageID",type="string",JSONPath=".status.imageID",priority=1,description=""
// +kubebuilder:printcolumn:name="ID",type="string",JSONPath=".status.providerID",priority=1,description=""
// +kubebuilder:printcolumn:name="NodePool",type="string",JSONPath=".metadata.labels.karpenter\\.sh/nodepool",priority=1,description=""
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.nodeClassRef.name",priority=1,description=""
// +kubebuilder:printcolumn:name="Drifted",type="string",JSONPath=".status.conditions[?(@.type==\"Drifted\")].status",priority=1,description=""
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
	// +required
	Spec NodeClaimSpec `json:"spec"`
	// +optional
	Status NodeClaimStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// NodeClaimList contains a list of NodeClaim.
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []NodeClaim `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &NodeClaim{}, &NodeClaimList{})
		return nil
	})
}
