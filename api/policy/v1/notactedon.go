package v1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// notActedOn is a warning: the field is accepted, and acted on by nothing in this version.
func notActedOn(p *field.Path, missing string) *field.Error {
	return &field.Error{Type: field.ErrorTypeNotSupported, Field: p.String(), BadValue: field.OmitValueType{},
		Detail: "accepted but not acted on yet: " + missing}
}

// FieldsNotActedOn are the fields set that the CRD accepts but nothing acts on yet: each is a
// warning at admission and in `karpenterctl validate`, never silently ignored. Every field of
// a CapacityPolicy is acted on.
func (p *CapacityPolicy) FieldsNotActedOn() field.ErrorList { return nil }

// FieldsNotActedOn are the fields set that the CRD accepts but nothing acts on yet: none.
func (b *CapacityBudget) FieldsNotActedOn() field.ErrorList { return nil }

// FieldsNotActedOn are the fields set that the CRD accepts but nothing acts on yet: an
// exemption from ClusterCapacityBudgets (a team's shared budget is not lifted by one
// namespace's exception in this version).
func (e *CapacityException) FieldsNotActedOn() field.ErrorList {
	var out field.ErrorList
	for i, x := range e.Spec.Exempt {
		if x.Kind == ExemptClusterCapacityBudget {
			out = append(out, notActedOn(field.NewPath("spec", "exempt").Index(i).Child("kind"),
				"exceptions do not lift or raise ClusterCapacityBudgets in this version, so the entry exempts from nothing"))
		}
	}
	return out
}

// FieldsNotActedOn are the fields set that the CRD accepts but nothing acts on: none.
func (c *ClusterCapacityBudget) FieldsNotActedOn() field.ErrorList { return nil }
