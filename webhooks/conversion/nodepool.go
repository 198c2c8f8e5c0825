package conversion

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
)

// v1beta1Disruption and v1Disruption are the parts of spec.disruption that the versions hold
// differently.
type v1beta1Disruption struct {
	ConsolidationPolicy karpv1beta1.ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	ConsolidateAfter    *karpv1.NillableDuration        `json:"consolidateAfter,omitempty"`
	Budgets             []karpv1beta1.Budget            `json:"budgets,omitempty"`
}

type v1Disruption struct {
	ConsolidationPolicy karpv1.ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	ConsolidateAfter    karpv1.NillableDuration    `json:"consolidateAfter,omitzero"`
	Budgets             []karpv1.Budget            `json:"budgets,omitempty"`
}

// zeroSeconds is what an omitted v1beta1 consolidateAfter means: consolidate at once.
var zeroSeconds = karpv1.MustParseNillableDuration("0s")

func disruptionToV1(d v1beta1Disruption) v1Disruption {
	out := v1Disruption{ConsolidationPolicy: karpv1.ConsolidationPolicy(d.ConsolidationPolicy)}
	if d.ConsolidationPolicy == karpv1beta1.ConsolidationPolicyWhenUnderutilized {
		out.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	}
	out.ConsolidateAfter = zeroSeconds
	if d.ConsolidateAfter != nil {
		out.ConsolidateAfter = *d.ConsolidateAfter
	}
	for _, b := range d.Budgets {
		out.Budgets = append(out.Budgets, karpv1.Budget{Nodes: b.Nodes, Schedule: b.Schedule, Duration: b.Duration})
	}
	return out
}

func disruptionToV1beta1(d v1Disruption) v1beta1Disruption {
	out := v1beta1Disruption{ConsolidationPolicy: karpv1beta1.ConsolidationPolicy(d.ConsolidationPolicy)}
	// v1beta1 has no Balanced: its nearest is WhenUnderutilized, and the annotation keeps
	// Balanced for the way back.
	if d.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized || d.ConsolidationPolicy == karpv1.ConsolidationPolicyBalanced {
		out.ConsolidationPolicy = karpv1beta1.ConsolidationPolicyWhenUnderutilized
	}
	// v1beta1 allows consolidateAfter with WhenUnderutilized only as Never.
	// An omitted v1 value is 0s (the CRD's default), not Never; v1beta1 omits it too, but
	// under WhenEmpty, which cannot go without it, writes the 0s.
	switch {
	case omitted(d.ConsolidateAfter):
		if out.ConsolidationPolicy == karpv1beta1.ConsolidationPolicyWhenEmpty {
			after := zeroSeconds
			out.ConsolidateAfter = &after
		}
	case out.ConsolidationPolicy != karpv1beta1.ConsolidationPolicyWhenUnderutilized || isNever(d.ConsolidateAfter):
		after := d.ConsolidateAfter
		out.ConsolidateAfter = &after
	}
	for _, b := range d.Budgets {
		out.Budgets = append(out.Budgets, karpv1beta1.Budget{Nodes: b.Nodes, Schedule: b.Schedule, Duration: b.Duration})
	}
	return out
}

// NodePoolToV1 converts a v1beta1 NodePool to v1.
func (c *Converter) NodePoolToV1(_ context.Context, src *karpv1beta1.NodePool, dst *karpv1.NodePool) error {
	ann := copyAnnotations(src.Annotations)
	dst.TypeMeta = src.TypeMeta
	dst.APIVersion = karpv1.SchemeGroupVersion.String()
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()

	in := &src.Spec
	out := karpv1.NodePoolSpec{
		Weight: in.Weight,
		Limits: karpv1.Limits(corev1.ResourceList(in.Limits).DeepCopy()),
		Template: karpv1.NodeClaimTemplate{
			ObjectMeta: karpv1.ObjectMeta{Labels: in.Template.Labels, Annotations: in.Template.Annotations},
			Spec: karpv1.NodeClaimTemplateSpec{
				Taints:        in.Template.Spec.Taints,
				StartupTaints: in.Template.Spec.StartupTaints,
				Requirements:  requirementsToV1(in.Template.Spec.Requirements),
				ExpireAfter:   in.Disruption.ExpireAfter,
			},
		},
	}
	out.Template.Spec.NodeClassRef = piece(in.Template.Spec.NodeClassRef, ann,
		AnnotationV1NodeClassRef, AnnotationV1beta1NodeClassRef, c.nodeClassRefToV1, nodeClassRefToV1beta1)
	piece(in.Template.Spec.Kubelet, ann, "", AnnotationV1beta1Kubelet, kubeletToV1, zero[*karpv1beta1.KubeletConfiguration])
	piece(in.Template.Spec.Resources, ann, "", AnnotationV1beta1TemplateResources, toNothing[karpv1beta1.ResourceRequirements], zero[karpv1beta1.ResourceRequirements])
	out.Template.Spec.TerminationGracePeriod = piece(nothing{}, ann, AnnotationV1TerminationGracePeriod, "", zero[*metav1.Duration], toNothing[*metav1.Duration])
	out.Replicas = piece(nothing{}, ann, AnnotationV1Replicas, "", zero[*int64], toNothing[*int64])
	d := piece(v1beta1Disruption{in.Disruption.ConsolidationPolicy, in.Disruption.ConsolidateAfter, in.Disruption.Budgets}, ann,
		AnnotationV1Disruption, AnnotationV1beta1Disruption, disruptionToV1, disruptionToV1beta1)
	out.Disruption = karpv1.Disruption{ConsolidationPolicy: d.ConsolidationPolicy, ConsolidateAfter: d.ConsolidateAfter, Budgets: d.Budgets}
	dst.Spec = *out.DeepCopy()

	dst.Status = karpv1.NodePoolStatus{
		Resources:                   src.Status.Resources,
		Nodes:                       src.Status.Nodes,
		NodeClassObservedGeneration: src.Status.NodeClassObservedGeneration,
		ObservedGeneration:          src.Status.ObservedGeneration,
		Conditions:                  src.Status.Conditions,
	}
	dst.Status = *dst.Status.DeepCopy()
	dst.Annotations = ann.result(src.Annotations)
	return nil
}

// NodePoolToV1beta1 converts a v1 NodePool to v1beta1.
func (c *Converter) NodePoolToV1beta1(_ context.Context, src *karpv1.NodePool, dst *karpv1beta1.NodePool) error {
	ann := copyAnnotations(src.Annotations)
	dst.TypeMeta = src.TypeMeta
	dst.APIVersion = karpv1beta1.SchemeGroupVersion.String()
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()

	in := &src.Spec
	out := karpv1beta1.NodePoolSpec{
		Weight: in.Weight,
		Limits: karpv1beta1.Limits(corev1.ResourceList(in.Limits).DeepCopy()),
		Template: karpv1beta1.NodeClaimTemplate{
			ObjectMeta: karpv1beta1.ObjectMeta{Labels: in.Template.Labels, Annotations: in.Template.Annotations},
			Spec: karpv1beta1.NodeClaimSpec{
				Taints:        in.Template.Spec.Taints,
				StartupTaints: in.Template.Spec.StartupTaints,
				Requirements:  requirementsToV1beta1(in.Template.Spec.Requirements),
			},
		},
	}
	out.Template.Spec.NodeClassRef = piece(in.Template.Spec.NodeClassRef, ann,
		AnnotationV1beta1NodeClassRef, AnnotationV1NodeClassRef, nodeClassRefToV1beta1, c.nodeClassRefToV1)
	out.Template.Spec.Kubelet = piece(nothing{}, ann, AnnotationV1beta1Kubelet, "", zero[*karpv1beta1.KubeletConfiguration], kubeletToV1)
	out.Template.Spec.Resources = piece(nothing{}, ann, AnnotationV1beta1TemplateResources, "", zero[karpv1beta1.ResourceRequirements], toNothing[karpv1beta1.ResourceRequirements])
	piece(in.Template.Spec.TerminationGracePeriod, ann, "", AnnotationV1TerminationGracePeriod, toNothing[*metav1.Duration], zero[*metav1.Duration])
	piece(in.Replicas, ann, "", AnnotationV1Replicas, toNothing[*int64], zero[*int64])
	d := piece(v1Disruption{in.Disruption.ConsolidationPolicy, in.Disruption.ConsolidateAfter, in.Disruption.Budgets}, ann,
		AnnotationV1beta1Disruption, AnnotationV1Disruption, disruptionToV1beta1, disruptionToV1)
	out.Disruption = karpv1beta1.Disruption{
		ConsolidationPolicy: d.ConsolidationPolicy, ConsolidateAfter: d.ConsolidateAfter, Budgets: d.Budgets,
		ExpireAfter: in.Template.Spec.ExpireAfter,
	}
	dst.Spec = *out.DeepCopy()

	dst.Status = karpv1beta1.NodePoolStatus{
		Resources:                   src.Status.Resources,
		Nodes:                       src.Status.Nodes,
		NodeClassObservedGeneration: src.Status.NodeClassObservedGeneration,
		ObservedGeneration:          src.Status.ObservedGeneration,
		Conditions:                  src.Status.Conditions,
	}
	dst.Status = *dst.Status.DeepCopy()
	dst.Annotations = ann.result(src.Annotations)
	return nil
}

func requirementsToV1(in []karpv1beta1.NodeSelectorRequirementWithMinValues) []karpv1.NodeSelectorRequirementWithMinValues {
	if in == nil {
		return nil
	}
	out := make([]karpv1.NodeSelectorRequirementWithMinValues, len(in))
	for i, r := range in {
		out[i] = karpv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values, MinValues: r.MinValues}
	}
	return out
}

func requirementsToV1beta1(in []karpv1.NodeSelectorRequirementWithMinValues) []karpv1beta1.NodeSelectorRequirementWithMinValues {
	if in == nil {
		return nil
	}
	out := make([]karpv1beta1.NodeSelectorRequirementWithMinValues, len(in))
	for i, r := range in {
		out[i] = karpv1beta1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values, MinValues: r.MinValues}
	}
	return out
}
