package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Well-known labels, annotations and taints. They are the one place every package of this
// project reads these names from; the AWS provider's labels are here too, so that the solver,
// the policy engine and the CLI agree on them without importing a provider.

const (
	// Group is the API group of NodePool and NodeClaim.
	Group = "karpenter.sh"

	// NodePoolLabelKey names the NodePool a node or NodeClaim was launched for.
	NodePoolLabelKey = Group + "/nodepool"
	// CapacityTypeLabelKey is the purchase option of a node: spot, on-demand or reserved.
	CapacityTypeLabelKey = Group + "/capacity-type"
	// NodeInitializedLabelKey marks a node that the NodeClaim lifecycle has initialized.
	NodeInitializedLabelKey = Group + "/initialized"
	// NodeRegisteredLabelKey marks a node that has registered with its NodeClaim.
	NodeRegisteredLabelKey = Group + "/registered"

	// DoNotDisruptAnnotationKey on a pod or node blocks voluntary disruption.
	DoNotDisruptAnnotationKey = Group + "/do-not-disrupt"
	// DisruptionCostAnnotationKey on a pod is the int32 cost of evicting it, which
	// consolidation weighs before (and instead of) controller.kubernetes.io/pod-deletion-cost.
	DisruptionCostAnnotationKey = Group + "/disruption-cost"
	// DoNotRepairAnnotationKey on a node or NodeClaim keeps node repair from replacing it.
	DoNotRepairAnnotationKey = Group + "/do-not-repair"
	// DoNotSyncTaintsLabelKey on a Node keeps registration from copying its NodeClaim's taints
	// and startup taints to it (the node's bootstrap sets them itself).
	DoNotSyncTaintsLabelKey = Group + "/do-not-sync-taints"
	// NodePoolHashAnnotationKey holds the hash of the NodePool template, for drift detection.
	NodePoolHashAnnotationKey = Group + "/nodepool-hash"
	// NodePoolHashVersionAnnotationKey holds the version of the hashing scheme.
	NodePoolHashVersionAnnotationKey = Group + "/nodepool-hash-version"
	// NodeClaimMinValuesRelaxedAnnotationKey is "true" on a NodeClaim whose requirements'
	// minValues were lowered to launch it (MIN_VALUES_POLICY=BestEffort), "false" otherwise.
	NodeClaimMinValuesRelaxedAnnotationKey = Group + "/nodeclaim-min-values-relaxed"
	// NodeClaimTerminationTimestampAnnotationKey is when a draining NodeClaim is forcibly removed.
	NodeClaimTerminationTimestampAnnotationKey = Group + "/nodeclaim-termination-timestamp"
	// RebootPreBootIDAnnotationKey holds, on a NodeClaim whose node repair is rebooting, the
	// node's boot ID before the reboot was issued: a changed boot ID is the proof it happened,
	// so a reboot is never issued twice. Removed when the reboot ends.
	RebootPreBootIDAnnotationKey = Group + "/reboot-pre-boot-id"
	// RebootTerminationGracePeriodAnnotationKey bounds, on a rebooting NodeClaim, the drain
	// before the reboot (a Go duration; 0 reboots without draining).
	RebootTerminationGracePeriodAnnotationKey = Group + "/reboot-termination-grace-period"

	// DisruptedTaintKey is put on nodes that are being disrupted, so no new pods land there.
	DisruptedTaintKey = Group + "/disrupted"
	// UnregisteredTaintKey keeps pods off a node until it registers with its NodeClaim.
	UnregisteredTaintKey = Group + "/unregistered"
	// RebootingTaintKey fences new pods off a node that node repair reboots, until the new
	// boot is seen.
	RebootingTaintKey = Group + "/rebooting"

	// TerminationFinalizer is on Nodes and NodeClaims that Karpenter drains before deletion.
	TerminationFinalizer = Group + "/termination"

	// CapacityTypeSpot is capacity the cloud may reclaim at short notice, at a discount.
	CapacityTypeSpot = "spot"
	// CapacityTypeOnDemand is capacity bought by the hour.
	CapacityTypeOnDemand = "on-demand"
	// CapacityTypeReserved is capacity reserved ahead (capacity reservations, blocks).
	CapacityTypeReserved = "reserved"

	// ArchitectureAmd64 is the kubernetes.io/arch of x86-64 nodes.
	ArchitectureAmd64 = "amd64"
	// ArchitectureArm64 is the kubernetes.io/arch of 64-bit Arm nodes.
	ArchitectureArm64 = "arm64"
)

// Standard Kubernetes labels that Karpenter reads and sets.
const (
	LabelInstanceType   = corev1.LabelInstanceTypeStable // node.kubernetes.io/instance-type
	LabelTopologyZone   = corev1.LabelTopologyZone       // topology.kubernetes.io/zone
	LabelTopologyRegion = corev1.LabelTopologyRegion     // topology.kubernetes.io/region
	LabelArch           = corev1.LabelArchStable         // kubernetes.io/arch
	LabelOS             = corev1.LabelOSStable           // kubernetes.io/os
	LabelHostname       = corev1.LabelHostname           // kubernetes.io/hostname
	LabelWindowsBuild   = corev1.LabelWindowsBuild       // node.kubernetes.io/windows-build
)

// Labels of the AWS provider (karpenter.k8s.aws), describing the instance type of a node and
// the offering it was launched from; the same set as upstream's AWS provider.
const (
	AWSGroup = "karpenter.k8s.aws"

	LabelCapacityReservationID                = AWSGroup + "/capacity-reservation-id"
	LabelCapacityReservationType              = AWSGroup + "/capacity-reservation-type"
	LabelCapacityReservationInterruptible     = AWSGroup + "/capacity-reservation-interruptible"
	LabelInstanceHypervisor                   = AWSGroup + "/instance-hypervisor"
	LabelInstanceEncryptionInTransitSupported = AWSGroup + "/instance-encryption-in-transit-supported"
	LabelInstanceNitroEnclavesSupported       = AWSGroup + "/nitro-sandbox"
	LabelInstanceCategory                     = AWSGroup + "/instance-category"
	LabelInstanceCapabilityFlex               = AWSGroup + "/instance-capability-flex"
	LabelInstanceFamily                       = AWSGroup + "/instance-family"
	LabelInstanceGeneration                   = AWSGroup + "/instance-generation"
	LabelInstanceLocalNVME                    = AWSGroup + "/instance-local-nvme"
	LabelInstanceSize                         = AWSGroup + "/instance-size"
	LabelInstanceCPU                          = AWSGroup + "/instance-cpu"
	LabelInstanceCPUManufacturer              = AWSGroup + "/instance-cpu-manufacturer"
	LabelInstanceCPUSustainedClockSpeedMhz    = AWSGroup + "/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceMemory                       = AWSGroup + "/instance-memory"
	LabelInstanceEBSBandwidth                 = AWSGroup + "/instance-ebs-bandwidth"
	LabelInstanceNetworkBandwidth             = AWSGroup + "/instance-network-bandwidth"
	LabelInstanceGPUName                      = AWSGroup + "/instance-gpu-name"
	LabelInstanceGPUManufacturer              = AWSGroup + "/instance-gpu-manufacturer"
	LabelInstanceGPUCount                     = AWSGroup + "/instance-gpu-count"
	LabelInstanceGPUMemory                    = AWSGroup + "/instance-gpu-memory"
	LabelInstanceAcceleratorName              = AWSGroup + "/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer      = AWSGroup + "/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount             = AWSGroup + "/instance-accelerator-count"
	LabelInstanceTenancy                      = AWSGroup + "/instance-tenancy"
	LabelPlacementGroupID                     = AWSGroup + "/placement-group-id"
	LabelPlacementGroupPartition              = AWSGroup + "/placement-group-partition"
	LabelEC2NodeClass                         = AWSGroup + "/ec2nodeclass"
	LabelTopologyZoneID                       = "topology.k8s.aws/zone-id"
)

// Well-known taints.
var (
	// DisruptedNoScheduleTaint is applied to a node before it is drained.
	DisruptedNoScheduleTaint = corev1.Taint{Key: DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}
	// UnregisteredNoExecuteTaint is applied at launch and removed at registration.
	UnregisteredNoExecuteTaint = corev1.Taint{Key: UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}
	// RebootingNoScheduleTaint is on a node while node repair reboots it.
	RebootingNoScheduleTaint = corev1.Taint{Key: RebootingTaintKey, Effect: corev1.TaintEffectNoSchedule}
)

// RestrictedLabelDomains are label domains that a NodePool may not set or require, except for
// the keys in WellKnownLabels: Karpenter's own (docs/api.md, "Labels"). kubernetes.io and k8s.io
// are not among them: Karpenter writes a node's labels itself, so the kubelet's restriction on
// those domains does not apply, as upstream decided.
var RestrictedLabelDomains = sets.New(Group, AWSGroup)

// RestrictedLabels may never be set or required on a NodePool: Karpenter or the kubelet own them.
var RestrictedLabels = sets.New(NodePoolLabelKey, LabelHostname, NodeInitializedLabelKey, NodeRegisteredLabelKey)

// WellKnownLabels are the labels that instance types and offerings are described by; they
// may appear in NodePool requirements and labels although their domains are restricted.
var WellKnownLabels = sets.New(
	NodePoolLabelKey, CapacityTypeLabelKey,
	LabelInstanceType, LabelTopologyZone, LabelTopologyRegion, LabelArch, LabelOS, LabelWindowsBuild,
	LabelCapacityReservationID, LabelCapacityReservationType, LabelCapacityReservationInterruptible,
	LabelInstanceHypervisor, LabelInstanceEncryptionInTransitSupported, LabelInstanceNitroEnclavesSupported,
	LabelInstanceCategory, LabelInstanceCapabilityFlex, LabelInstanceFamily, LabelInstanceGeneration,
	LabelInstanceSize, LabelInstanceLocalNVME, LabelInstanceCPU, LabelInstanceCPUManufacturer,
	LabelInstanceCPUSustainedClockSpeedMhz, LabelInstanceMemory, LabelInstanceEBSBandwidth,
	LabelInstanceNetworkBandwidth, LabelInstanceGPUName, LabelInstanceGPUManufacturer, LabelInstanceGPUCount,
	LabelInstanceGPUMemory, LabelInstanceAcceleratorName, LabelInstanceAcceleratorManufacturer,
	LabelInstanceAcceleratorCount, LabelTopologyZoneID, LabelInstanceTenancy,
	LabelPlacementGroupID, LabelPlacementGroupPartition,
)

// WellKnownValues are the only values some well-known labels take; a requirement on one of
// them that allows none of these can never be met.
var WellKnownValues = map[string]sets.Set[string]{
	CapacityTypeLabelKey: sets.New(CapacityTypeSpot, CapacityTypeOnDemand, CapacityTypeReserved),
	LabelInstanceTenancy: sets.New("default", "dedicated"),
}
