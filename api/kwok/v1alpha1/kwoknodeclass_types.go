package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// KWOKNodeClassSpec configures the simulated cloud provider: which instance-type catalog it
// offers, how long a launch takes, and which failures it injects.
type KWOKNodeClassSpec struct {
	// Catalog selects the instance-type catalog: "embedded" (the provider's built-in catalog,
	// EC2-like), "upstream" (the types upstream Karpenter's kwok provider generates, such as
	// c-16x-amd64-linux, labelled karpenter.kwok.sh/instance-size, -family, -cpu and -memory,
	// in zones test-zone-a to -d), or the path of a catalog file mounted into the controller,
	// in the JSON format of `karpenterctl simulate --instance-types`.
	// +kubebuilder:default:=embedded
	// +kubebuilder:validation:MinLength:=1
	// +optional
	Catalog string `json:"catalog,omitempty"`
	// LaunchDelay is how long Create takes before the instance exists.
	// +kubebuilder:default:="0s"
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	LaunchDelay *metav1.Duration `json:"launchDelay,omitempty"`
	// RegistrationDelay is how long after launch the Node object appears.
	// +kubebuilder:default:="0s"
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	RegistrationDelay *metav1.Duration `json:"registrationDelay,omitempty"`
	// InsufficientCapacity injects insufficient-capacity errors at launch.
	// +optional
	InsufficientCapacity *InsufficientCapacityInjection `json:"insufficientCapacity,omitempty"`
	// Interruption injects Spot interruptions on running spot nodes.
	// +optional
	Interruption *InterruptionInjection `json:"interruption,omitempty"`
	// Zones restricts the zones the provider offers; empty means all zones of the catalog.
	// +kubebuilder:validation:MaxItems:=10
	// +listType=set
	// +optional
	Zones []string `json:"zones,omitempty"`
	// CSIDrivers are the CSI drivers the simulated kubelet registers on each node, with how
	// many volumes of each the node can attach: the provider creates the node's CSINode with
	// them, as a kubelet's CSI node plugins would, and kube-scheduler and the solver cap
	// the volumes they place on the node by them.
	// +kubebuilder:validation:MaxItems:=10
	// +listType=map
	// +listMapKey=name
	// +optional
	CSIDrivers []CSIDriver `json:"csiDrivers,omitempty"`
	// RepairPolicies add to the provider's own (Ready False or Unknown for 10 minutes) the
	// node conditions that node repair (the NodeRepair feature gate) acts on, how long each is
	// tolerated and what repair does (replace the node, or reboot it in place: the provider
	// simulates a reboot by giving the node a new boot ID): for local tests of repair, like
	// the other fault knobs.
	// +kubebuilder:validation:MaxItems:=10
	// +optional
	RepairPolicies []RepairPolicy `json:"repairPolicies,omitempty"`
}

// RepairPolicy is a node condition that makes a node unhealthy once it has held for the
// toleration.
// +kubebuilder:validation:XValidation:rule="!has(self.rebootDrain) || (has(self.action) && self.action == 'Reboot')",message="rebootDrain applies only to action Reboot"
type RepairPolicy struct {
	// ConditionType is the node condition's type, e.g. ExampleUnhealthy.
	// +kubebuilder:validation:MinLength:=1
	// +kubebuilder:validation:MaxLength:=316
	// +required
	ConditionType string `json:"conditionType"`
	// ConditionStatus is the status that is unhealthy.
	// +kubebuilder:validation:Enum:={True,False,Unknown}
	// +required
	ConditionStatus string `json:"conditionStatus"`
	// Toleration is how long the condition may hold before the node is repaired.
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +required
	Toleration metav1.Duration `json:"toleration"`
	// Action is what repair does: Replace (the default) or Reboot in place first (replacing
	// the node when two reboots within a day did not help, or a reboot failed).
	// +kubebuilder:validation:Enum:={Replace,Reboot}
	// +kubebuilder:default:=Replace
	// +optional
	Action string `json:"action,omitempty"`
	// RebootDrain bounds the drain before a reboot (0s: reboot without draining); pods
	// still on the node then stay through the reboot. Unset: the NodeClaim's
	// terminationGracePeriod, else 10 minutes. Only for the Reboot action.
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	RebootDrain *metav1.Duration `json:"rebootDrain,omitempty"`
	// TerminationGracePeriod bounds the drain when repair replaces the node: its pods are
	// evicted (PDBs and do-not-disrupt honoured) until the lesser of this and the NodeClaim's
	// terminationGracePeriod has passed since the node's deletion, then deleted. Unset or 0s:
	// forceful, the pods are deleted at once. Of a Reboot policy, it bounds the drain of the
	// replacement that follows reboots that did not help (rebootDrain bounds the reboot's).
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
}

// CSIDriver is a CSI driver a simulated node registers.
type CSIDriver struct {
	// Name is the driver's name, e.g. ebs.csi.aws.com.
	// +kubebuilder:validation:MinLength:=1
	// +kubebuilder:validation:MaxLength:=63
	// +required
	Name string `json:"name"`
	// AllocatableCount is how many of the driver's volumes a node attaches at most.
	// +kubebuilder:validation:Minimum:=0
	// +required
	AllocatableCount int32 `json:"allocatableCount"`
}

// InsufficientCapacityInjection makes launches fail as a cloud does when an offering runs out.
type InsufficientCapacityInjection struct {
	// Percent of launch attempts per offering that fail with insufficient capacity.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +required
	Percent int32 `json:"percent"`
	// Offerings limits the injection to matching offerings; empty means every offering.
	// +kubebuilder:validation:MaxItems:=50
	// +optional
	Offerings []OfferingSelector `json:"offerings,omitempty"`
}

// OfferingSelector matches offerings; an empty field matches any value.
// +kubebuilder:validation:XValidation:message="at least one of instanceType, zone or capacityType is required",rule="has(self.instanceType) || has(self.zone) || has(self.capacityType)"
type OfferingSelector struct {
	// InstanceType is an instance type name, e.g. m5.large.
	// +optional
	InstanceType string `json:"instanceType,omitempty"`
	// Zone is a zone name, e.g. test-zone-a.
	// +optional
	Zone string `json:"zone,omitempty"`
	// CapacityType is spot or on-demand.
	// +kubebuilder:validation:Enum:={spot,on-demand}
	// +optional
	CapacityType string `json:"capacityType,omitempty"`
}

// InterruptionInjection interrupts spot nodes as a cloud reclaims spot capacity.
type InterruptionInjection struct {
	// SpotPercentPerHour is the share of running spot nodes interrupted per hour.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +required
	SpotPercentPerHour int32 `json:"spotPercentPerHour"`
	// Notice is the warning time between the interruption event and the instance going away.
	// +kubebuilder:default:="2m"
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	Notice *metav1.Duration `json:"notice,omitempty"`
}

// KWOKNodeClassStatus is the observed state of a KWOKNodeClass.
type KWOKNodeClassStatus struct {
	// InstanceTypes is the number of instance types the catalog offers.
	// +optional
	InstanceTypes int32 `json:"instanceTypes,omitempty"`
	// ObservedGeneration is the metadata.generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions contains signals for health and readiness.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// KWOKNodeClass is the node class of the simulated (kwok) provider.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=kwoknodeclasses,scope=Cluster,categories=karpenter,shortName={kwoknc}
// +kubebuilder:printcolumn:name="Catalog",type="string",JSONPath=".spec.catalog",description=""
// +kubebuilder:printcolumn:name="Types",type="integer",JSONPath=".status.instanceTypes",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
type KWOKNodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// +optional
	Spec KWOKNodeClassSpec `json:"spec,omitzero"`
	// +optional
	Status KWOKNodeClassStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// KWOKNodeClassList contains a list of KWOKNodeClass.
type KWOKNodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []KWOKNodeClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &KWOKNodeClass{}, &KWOKNodeClassList{})
		return nil
	})
}
