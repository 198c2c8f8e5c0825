package v1beta1

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ActiveProvisioningStrategy is the one strategy served: the buffer's virtual pods make the
// provisioner keep (or launch) room for them.
const ActiveProvisioningStrategy = "buffer.x-k8s.io/active-capacity"

// Condition types of a CapacityBuffer's status, as upstream's.
const (
	// ConditionReadyForProvisioning is True once the buffer's pod template and replica
	// count are resolved.
	ConditionReadyForProvisioning = "ReadyForProvisioning"
	// ConditionProvisioning is True when every virtual pod of the buffer has room on
	// existing or launching capacity.
	ConditionProvisioning = "Provisioning"
)

// Kinds a scalableRef may name (API group apps).
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindReplicaSet  = "ReplicaSet"
)

// Annotations a virtual pod carries, as upstream's, so that anything reading a virtual pod
// (a log, a simulation's moves) can tell it from a real one and name its buffer.
const (
	VirtualPodAnnotation            = "karpenter.sh/capacity-buffer-fake-pod"
	BufferNameAnnotation            = "karpenter.sh/capacity-buffer-name"
	BufferNamespaceAnnotation       = "karpenter.sh/capacity-buffer-namespace"
	VirtualPodPriority        int32 = math.MinInt32
)

// LocalObjectRef names an object in the buffer's namespace.
type LocalObjectRef struct {
	// Name of the referent.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// ScalableRef names a workload with a scale subresource in the buffer's namespace.
type ScalableRef struct {
	// APIGroup of the referent; empty for the core group. Deployments, StatefulSets and
	// ReplicaSets (group apps) are resolved.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the referent.
	// +kubebuilder:validation:MinLength=1
	// +required
	Kind string `json:"kind"`
	// Name of the referent.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// Limits bound a buffer's total requests.
type Limits corev1.ResourceList

// CapacityBufferSpec is the headroom wanted: the shape of one chunk (a pod template or a
// workload's) and how many chunks.
// +kubebuilder:validation:XValidation:rule="!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",message="If podTemplateRef is set, replicas or limits must also be set"
// +kubebuilder:validation:XValidation:rule="!(has(self.podTemplateRef) && has(self.scalableRef))",message="You must define either PodTemplateRef or ScalableRef, but not both"
type CapacityBufferSpec struct {
	// ProvisioningStrategy says how the buffer is kept; buffer.x-k8s.io/active-capacity (the
	// default) is the one acted on, any other is reported as not ready.
	// +kubebuilder:default="buffer.x-k8s.io/active-capacity"
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
	// PodTemplateRef names a PodTemplate in the buffer's namespace: the shape of one chunk.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// ScalableRef names a Deployment, StatefulSet or ReplicaSet in the buffer's namespace:
	// its pod template is the shape of one chunk, and percentage counts from its replicas.
	// +optional
	ScalableRef *ScalableRef `json:"scalableRef,omitempty"`
	// Replicas is how many chunks to keep room for. With percentage, the larger of the two;
	// with limits, no more than the limits hold.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Percentage is the number of chunks as a percentage of the scalableRef's replicas,
	// rounded up (at least 1 when both are above 0). Only with scalableRef.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Percentage *int32 `json:"percentage,omitempty"`
	// Limits cap the chunks' total requests; alone, as many chunks as fit within them.
	// +optional
	Limits Limits `json:"limits,omitempty"`
}

// CapacityBufferStatus is what the buffer resolved to.
type CapacityBufferStatus struct {
	// PodTemplateRef is the PodTemplate the chunks were built from (podTemplateRef only).
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// Replicas is the number of chunks room is kept for.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// PodTemplateGeneration is the generation of the PodTemplate resolved.
	// +optional
	PodTemplateGeneration *int64 `json:"podTemplateGeneration,omitempty"`
	// Conditions: ReadyForProvisioning and Provisioning.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ProvisioningStrategy is the strategy observed.
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
}

// CapacityBuffer keeps room for pods that do not exist yet: the provisioner places its chunks
// as virtual pending pods, on room that exists or by launching nodes, so that real pods that
// come later start at once; when they take the room, the buffer is made again.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=capacitybuffers,scope=Namespaced,shortName=cb,categories=autoscaling
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Strategy",type="string",JSONPath=".spec.provisioningStrategy"
// +kubebuilder:printcolumn:name="PodTemplate",type="string",JSONPath=".status.podTemplateRef.name"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"ReadyForProvisioning\")].status"
// +kubebuilder:printcolumn:name="Provisioning",type="string",JSONPath=".status.conditions[?(@.type==\"Provisioning\")].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type CapacityBuffer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec CapacityBufferSpec `json:"spec"`
	// +optional
	Status CapacityBufferStatus `json:"status,omitempty"`
}

// CapacityBufferList is a list of CapacityBuffers.
// +kubebuilder:object:root=true
type CapacityBufferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityBuffer `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &CapacityBuffer{}, &CapacityBufferList{})
		return nil
	})
}
