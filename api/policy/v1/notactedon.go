package v1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// notActedOn is a warning: the field is accepted, and acted on by nothing in this version.
func notActedOn(p *field.Path, missing string) *field.Error {
	return &field.Error{Type: field.ErrorTypeNotSupported, Field: p.String(), BadValue: field.OmitValueType{},
		Detail: "accepted but not acted on yet: " + missing}
}

// scopedNotActedOn warns of the enforcement points no code consults yet: the audit of what
// runs (docs/policies.md, "Enforcement per point").
func scopedNotActedOn(scoped []ScopedEnforcement) field.ErrorList {
	var out field.ErrorList
	for i, s := range scoped {
		for j, p := range s.Points {
			if p == PointAudit {
				out = append(out, notActedOn(field.NewPath("spec", "scopedEnforcement").Index(i).Child("points").Index(j),
					"no audit of running capacity runs in this version, so the action at audit changes nothing"))
			}
		}
	}
	return out
}

// FieldsNotActedOn are the fields set that the CRD accepts but nothing acts on yet: each is a
// warning at admission and in `karpenterctl validate`, never silently ignored.
func (p *CapacityPolicy) FieldsNotActedOn() field.ErrorList {
	return scopedNotActedOn(p.Spec.ScopedEnforcement)
}

// FieldsNotActedOn are the fields set that the CRD accepts but nothing acts on yet.
func (b *CapacityBudget) FieldsNotActedOn() field.ErrorList {
	return scopedNotActedOn(b.Spec.ScopedEnforcement)
}

// FieldsNotActedOn are the fields set that the CRD accepts but nothing acts on yet: an
// exemption from ClusterCapacityBudgets, a kind this version does not have.
func (e *CapacityException) FieldsNotActedOn() field.ErrorList {
	var out field.ErrorList
	for i, x := range e.Spec.Exempt {
		if x.Kind == ExemptClusterCapacityBudget {
			out = append(out, notActedOn(field.NewPath("spec", "exempt").Index(i).Child("kind"),
				"this version has no ClusterCapacityBudget, so the entry exempts from nothing"))
		}
	}
	return out
}
