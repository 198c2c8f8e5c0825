package validation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	"github.com/karpenter-policy/karpenter/scheduling/overlay"
)

// NodePool validates a v1 NodePool (v1beta1 ones are validated after conversion).
func (v *Validator) NodePool(np *karpv1.NodePool) field.ErrorList {
	spec := field.NewPath("spec")
	tmpl := spec.Child("template")
	var errs field.ErrorList
	for key, value := range np.Spec.Template.Labels {
		errs = append(errs, validateLabelKey(tmpl.Child("metadata", "labels").Key(key), key, true)...)
		for _, msg := range k8svalidation.IsValidLabelValue(value) {
			errs = append(errs, field.Invalid(tmpl.Child("metadata", "labels").Key(key), value, msg))
		}
		if key == karpv1.NodePoolLabelKey {
			errs = append(errs, field.Invalid(tmpl.Child("metadata", "labels").Key(key), key, "Karpenter sets the node's NodePool label"))
		}
	}
	errs = append(errs, v.nodeClaimTemplate(tmpl.Child("spec"), &np.Spec.Template.Spec)...)
	// A requirement that allows none of a well-known label's values can never launch a node.
	// NodeClaims are not held to this, as upstream: Karpenter writes them from offerings.
	for i, r := range np.Spec.Template.Spec.Requirements {
		if known, ok := karpv1.WellKnownValues[r.Key]; ok && r.Operator == corev1.NodeSelectorOpIn && !known.HasAny(r.Values...) {
			errs = append(errs, field.NotSupported(tmpl.Child("spec", "requirements").Index(i).Child("values"), r.Values, sets.List(known)))
		}
	}
	d := spec.Child("disruption")
	for i, b := range np.Spec.Disruption.Budgets {
		bp := d.Child("budgets").Index(i)
		if (b.Schedule == nil) != (b.Duration == nil) {
			errs = append(errs, field.Invalid(bp, b.Nodes, "schedule and duration must be set together"))
		}
		if b.Schedule != nil {
			errs = append(errs, validateSchedule(bp.Child("schedule"), *b.Schedule)...)
		}
		errs = append(errs, validatePositiveDuration(bp.Child("duration"), b.Duration)...)
	}
	for name, q := range np.Spec.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(spec.Child("limits").Key(string(name)), q.String(), "must not be negative"))
		}
	}
	return errs
}

func (v *Validator) nodeClaimTemplate(p *field.Path, spec *karpv1.NodeClaimTemplateSpec) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateRequirements(p.Child("requirements"), spec.Requirements)...)
	for i, r := range spec.Requirements {
		if r.Key == karpv1.NodePoolLabelKey {
			errs = append(errs, field.Invalid(p.Child("requirements").Index(i).Child("key"), r.Key, "Karpenter sets the node's NodePool label"))
		}
	}
	errs = append(errs, validateTaints(p.Child("taints"), spec.Taints)...)
	errs = append(errs, validateTaints(p.Child("startupTaints"), spec.StartupTaints)...)
	errs = append(errs, v.validateNodeClassRef(p.Child("nodeClassRef"), spec.NodeClassRef)...)
	if spec.ExpireAfter.Duration != nil && *spec.ExpireAfter.Duration <= 0 {
		errs = append(errs, field.Invalid(p.Child("expireAfter"), spec.ExpireAfter.String(), "must be greater than zero, or Never"))
	}
	errs = append(errs, validatePositiveDuration(p.Child("terminationGracePeriod"), spec.TerminationGracePeriod)...)
	return errs
}

// NodeClaim validates a v1 NodeClaim.
func (v *Validator) NodeClaim(nc *karpv1.NodeClaim) field.ErrorList {
	p := field.NewPath("spec")
	errs := v.nodeClaimTemplate(p, &karpv1.NodeClaimTemplateSpec{
		Taints: nc.Spec.Taints, StartupTaints: nc.Spec.StartupTaints, Requirements: nc.Spec.Requirements,
		NodeClassRef: nc.Spec.NodeClassRef, ExpireAfter: nc.Spec.ExpireAfter, TerminationGracePeriod: nc.Spec.TerminationGracePeriod,
	})
	for name, q := range nc.Spec.Resources.Requests {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("resources", "requests").Key(string(name)), q.String(), "must not be negative"))
		}
	}
	return errs
}

// NodeOverlay checks what the NodeOverlay CRD's schema cannot, as upstream's runtime
// validation does (scheduling/overlay.Validate): an overlay that fails it would never apply.
func (v *Validator) NodeOverlay(o *karpv1alpha1.NodeOverlay) field.ErrorList {
	return overlay.Validate(o)
}
