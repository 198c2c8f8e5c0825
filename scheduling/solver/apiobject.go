package solver

import (
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// NodeClaimFor builds the NodeClaim of a decision (a batch's, or a disruption replacement) from its
// NodePool's template.
func NodeClaimFor(np *karpv1.NodePool, c *NodeClaim) *karpv1.NodeClaim {
	reqs := c.Requirements.Copy()
	// The NodePool is named by the NodeClaim's label; requirements on Karpenter's own label are
	// refused by validation.
	delete(reqs, karpv1.NodePoolLabelKey)
	names := make([]string, 0, len(c.InstanceTypes))
	for _, it := range c.InstanceTypes {
		names = append(names, it.Name)
	}
	sort.Strings(names)
	if o := c.Offering; o.ReservationID != "" {
		// The solver gave this NodeClaim room in a capacity reservation: launch into it and
		// nothing else, so that the next NodeClaim's share of the room is not taken. If the
		// room is gone at launch, the NodeClaim fails and the pods are provisioned again.
		names = []string{c.InstanceType.Name}
		reqs[karpv1.CapacityTypeLabelKey] = scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeReserved)
		reqs[karpv1.LabelTopologyZone] = scheduling.NewRequirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, o.Zone)
		reqs[karpv1.LabelCapacityReservationID] = scheduling.NewRequirement(karpv1.LabelCapacityReservationID, corev1.NodeSelectorOpIn, o.ReservationID)
	}
	reqs[karpv1.LabelInstanceType] = scheduling.NewRequirement(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, names...).Intersect(reqsOr(reqs, karpv1.LabelInstanceType))
	labels := map[string]string{karpv1.NodePoolLabelKey: np.Name}
	for k, v := range np.Spec.Template.Labels {
		labels[k] = v
	}
	// Every new NodeClaim says whether its minValues were relaxed, as upstream's do.
	annotations := map[string]string{karpv1.NodePoolHashAnnotationKey: np.Hash(), karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion,
		karpv1.NodeClaimMinValuesRelaxedAnnotationKey: strconv.FormatBool(c.MinValuesRelaxed)}
	for k, v := range np.Spec.Template.Annotations {
		annotations[k] = v
	}
	// The offering the solve priced it at: the provider launches it first, and the cluster
	// state prices the NodeClaim by it until then (the one price rule).
	if c.InstanceType != nil {
		annotations[cloudprovider.PricedOfferingAnnotation] = cloudprovider.Priced(c.InstanceType.Name, c.Offering).String()
	}
	// As upstream's, a NodeClaim says when a NodeOverlay changed the price or the capacity of
	// an instance type it may launch as.
	for _, it := range c.InstanceTypes {
		if it.PriceOverlaid {
			annotations[karpv1alpha1.PriceOverlayAppliedAnnotationKey] = "true"
		}
		if it.CapacityOverlaid {
			annotations[karpv1alpha1.CapacityOverlayAppliedAnnotationKey] = "true"
		}
	}
	t := np.Spec.Template.Spec
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s-%s", np.Name, utilrand.String(5)),
			Labels:      labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool", Name: np.Name, UID: np.UID,
				BlockOwnerDeletion: ptrTrue()}},
		},
		Spec: karpv1.NodeClaimSpec{
			Taints: t.Taints, StartupTaints: t.StartupTaints,
			Requirements:           reqs.NodeSelectorRequirements(),
			Resources:              karpv1.ResourceRequirements{Requests: c.Requests},
			NodeClassRef:           t.NodeClassRef,
			ExpireAfter:            t.ExpireAfter,
			TerminationGracePeriod: t.TerminationGracePeriod,
		},
	}
}

func reqsOr(rs scheduling.Requirements, key string) *scheduling.Requirement {
	if r, ok := rs[key]; ok {
		return r
	}
	return scheduling.NewRequirement(key, corev1.NodeSelectorOpExists)
}

func ptrTrue() *bool { b := true; return &b }
