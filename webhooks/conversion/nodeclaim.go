package conversion

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
)

// defaultExpireAfter is v1's default for a NodeClaim's expireAfter; a v1beta1 NodeClaim,
// which has none, converts to it, so that v1's defaulting on read changes nothing.
var defaultExpireAfter = karpv1.MustParseNillableDuration("720h")

func expireAfterToV1(nothing) *karpv1.NillableDuration {
	d := defaultExpireAfter
	return &d
}

// nillableRef makes an omitted v1 expireAfter (the zero value) distinguishable from Never.
func nillableRef(d karpv1.NillableDuration) *karpv1.NillableDuration {
	if d.Duration == nil && d.Raw == nil {
		return nil
	}
	return &d
}

func nillableDeref(d *karpv1.NillableDuration) karpv1.NillableDuration {
	if d == nil {
		return karpv1.NillableDuration{}
	}
	return *d
}

// NodeClaimToV1 converts a v1beta1 NodeClaim to v1.
func (c *Converter) NodeClaimToV1(_ context.Context, src *karpv1beta1.NodeClaim, dst *karpv1.NodeClaim) error {
	ann := copyAnnotations(src.Annotations)
	dst.TypeMeta = src.TypeMeta
	dst.APIVersion = karpv1.SchemeGroupVersion.String()
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()

	in := &src.Spec
	out := karpv1.NodeClaimSpec{
		Taints:        in.Taints,
		StartupTaints: in.StartupTaints,
		Requirements:  requirementsToV1(in.Requirements),
		Resources:     karpv1.ResourceRequirements{Requests: in.Resources.Requests},
	}
	out.NodeClassRef = piece(in.NodeClassRef, ann, AnnotationV1NodeClassRef, AnnotationV1beta1NodeClassRef, c.nodeClassRefToV1, nodeClassRefToV1beta1)
	piece(in.Kubelet, ann, "", AnnotationV1beta1Kubelet, kubeletToV1, zero[*karpv1beta1.KubeletConfiguration])
	out.TerminationGracePeriod = piece(nothing{}, ann, AnnotationV1TerminationGracePeriod, "", zero[*metav1.Duration], toNothing[*metav1.Duration])
	out.ExpireAfter = nillableDeref(piece(nothing{}, ann, AnnotationV1ExpireAfter, "", expireAfterToV1, toNothing[*karpv1.NillableDuration]))
	dst.Spec = *out.DeepCopy()

	dst.Status = *(&karpv1.NodeClaimStatus{
		NodeName: src.Status.NodeName, ProviderID: src.Status.ProviderID, ImageID: src.Status.ImageID,
		Capacity: src.Status.Capacity, Allocatable: src.Status.Allocatable, Conditions: src.Status.Conditions,
		LastPodEventTime: src.Status.LastPodEventTime, ObservedGeneration: src.Status.ObservedGeneration,
	}).DeepCopy()
	dst.Annotations = ann.result(src.Annotations)
	return nil
}

// NodeClaimToV1beta1 converts a v1 NodeClaim to v1beta1.
func (c *Converter) NodeClaimToV1beta1(_ context.Context, src *karpv1.NodeClaim, dst *karpv1beta1.NodeClaim) error {
	ann := copyAnnotations(src.Annotations)
	dst.TypeMeta = src.TypeMeta
	dst.APIVersion = karpv1beta1.SchemeGroupVersion.String()
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()

	in := &src.Spec
	out := karpv1beta1.NodeClaimSpec{
		Taints:        in.Taints,
		StartupTaints: in.StartupTaints,
		Requirements:  requirementsToV1beta1(in.Requirements),
		Resources:     karpv1beta1.ResourceRequirements{Requests: in.Resources.Requests},
	}
	out.NodeClassRef = piece(in.NodeClassRef, ann, AnnotationV1beta1NodeClassRef, AnnotationV1NodeClassRef, nodeClassRefToV1beta1, c.nodeClassRefToV1)
	out.Kubelet = piece(nothing{}, ann, AnnotationV1beta1Kubelet, "", zero[*karpv1beta1.KubeletConfiguration], kubeletToV1)
	piece(in.TerminationGracePeriod, ann, "", AnnotationV1TerminationGracePeriod, toNothing[*metav1.Duration], zero[*metav1.Duration])
	piece(nillableRef(in.ExpireAfter), ann, "", AnnotationV1ExpireAfter, toNothing[*karpv1.NillableDuration], expireAfterToV1)
	dst.Spec = *out.DeepCopy()

	dst.Status = *(&karpv1beta1.NodeClaimStatus{
		NodeName: src.Status.NodeName, ProviderID: src.Status.ProviderID, ImageID: src.Status.ImageID,
		Capacity: src.Status.Capacity, Allocatable: src.Status.Allocatable, Conditions: src.Status.Conditions,
		LastPodEventTime: src.Status.LastPodEventTime, ObservedGeneration: src.Status.ObservedGeneration,
	}).DeepCopy()
	dst.Annotations = ann.result(src.Annotations)
	return nil
}
