package v1beta1

import "k8s.io/apimachinery/pkg/util/validation/field"

// FieldsNotActedOn are the fields the CRD accepts that this autoscaler does not act on for
// this buffer; admission returns them as warnings (a field accepted is acted on, or warned
// about). The buffer's ReadyForProvisioning condition says the same once it is reconciled.
func (cb *CapacityBuffer) FieldsNotActedOn() field.ErrorList {
	spec := field.NewPath("spec")
	var out field.ErrorList
	add := func(p *field.Path, why string) {
		out = append(out, &field.Error{Type: field.ErrorTypeNotSupported, Field: p.String(), BadValue: field.OmitValueType{}, Detail: why})
	}
	s := cb.Spec
	if s.ProvisioningStrategy != nil && *s.ProvisioningStrategy != ActiveProvisioningStrategy {
		add(spec.Child("provisioningStrategy"), "only "+ActiveProvisioningStrategy+" is served: the buffer keeps no room")
	}
	if ref := s.ScalableRef; ref != nil {
		if ref.APIGroup != "" && ref.APIGroup != "apps" {
			add(spec.Child("scalableRef", "apiGroup"), "only Deployments, StatefulSets and ReplicaSets (group apps) are resolved: the buffer keeps no room")
		} else if ref.Kind != KindDeployment && ref.Kind != KindStatefulSet && ref.Kind != KindReplicaSet {
			add(spec.Child("scalableRef", "kind"), "only Deployment, StatefulSet and ReplicaSet are resolved: the buffer keeps no room")
		}
	}
	if s.Percentage != nil && s.ScalableRef == nil {
		add(spec.Child("percentage"), "a percentage counts from a scalableRef's replicas: without one it is ignored")
	}
	if s.PodTemplateRef == nil && s.ScalableRef == nil {
		add(spec, "neither podTemplateRef nor scalableRef is set: the buffer keeps no room")
	}
	return out
}
