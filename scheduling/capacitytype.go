package scheduling

import (
	"strings"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Labels by which other node provisioners say a node's capacity type, read when a node has no
// karpenter.sh/capacity-type (a managed node group's, a node pool's).
const (
	// LabelEKSCapacityType is EKS managed node groups': ON_DEMAND, SPOT or CAPACITY_BLOCK.
	LabelEKSCapacityType = "eks.amazonaws.com/capacityType"
	// LabelAKSScaleSetPriority is AKS node pools': spot, or regular (absent on regular pools).
	LabelAKSScaleSetPriority = "kubernetes.azure.com/scalesetpriority"
	// LabelGKESpot and LabelGKEPreemptible are GKE's, "true" on Spot and preemptible nodes;
	// LabelGKEProvisioning is standard or spot.
	LabelGKESpot         = "cloud.google.com/gke-spot"
	LabelGKEPreemptible  = "cloud.google.com/gke-preemptible"
	LabelGKEProvisioning = "cloud.google.com/gke-provisioning"
)

// CapacityTypeOf is a node's capacity type, and the label that says it: karpenter.sh/capacity-type
// first, then another provisioner's label (EKS, AKS, GKE); a node none of them label is
// on-demand, from "" (assumed). Every price and Spot share of a running node reads it, so
// that a node the cluster did not label is priced on-demand, not at its type's cheapest
// (Spot) offering.
func CapacityTypeOf(labels map[string]string) (capacityType, from string) {
	if ct := labels[karpv1.CapacityTypeLabelKey]; ct != "" {
		return ct, karpv1.CapacityTypeLabelKey
	}
	switch strings.ToUpper(labels[LabelEKSCapacityType]) {
	case "ON_DEMAND":
		return karpv1.CapacityTypeOnDemand, LabelEKSCapacityType
	case "SPOT":
		return karpv1.CapacityTypeSpot, LabelEKSCapacityType
	case "CAPACITY_BLOCK":
		return karpv1.CapacityTypeReserved, LabelEKSCapacityType
	}
	switch strings.ToLower(labels[LabelAKSScaleSetPriority]) {
	case "spot":
		return karpv1.CapacityTypeSpot, LabelAKSScaleSetPriority
	case "regular":
		return karpv1.CapacityTypeOnDemand, LabelAKSScaleSetPriority
	}
	for _, k := range []string{LabelGKESpot, LabelGKEPreemptible} {
		if labels[k] == "true" {
			return karpv1.CapacityTypeSpot, k
		}
	}
	switch strings.ToLower(labels[LabelGKEProvisioning]) {
	case "spot":
		return karpv1.CapacityTypeSpot, LabelGKEProvisioning
	case "standard":
		return karpv1.CapacityTypeOnDemand, LabelGKEProvisioning
	}
	return karpv1.CapacityTypeOnDemand, ""
}
