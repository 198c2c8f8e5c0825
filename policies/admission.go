package policies

import (
	"context"
	"slices"
	"time"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// AdmissionInput is an object at the validating webhook.
type AdmissionInput struct {
	Operation string
	Kind      string
	// Object and OldObject are the objects as the API server holds them (OldObject on update).
	Object, OldObject any
	// Namespace is the object's namespace; nil for cluster-scoped objects, which only
	// CapacityPolicies without a namespaceSelector see.
	Namespace *Namespace
	// Budget is the object when it is a CapacityBudget.
	Budget *policyv1.CapacityBudget
	// Usage is the namespace's run-rate, for CapacityBudgets.
	Usage Usage
	Now   time.Time
	// Point is the enforcement point: admission (the webhook, the default) or ci (karpenterctl).
	Point policyv1.EnforcementPoint
	// Unknown are the inputs not known (UnknownUsage, ...): karpenterctl's, when its inputs do
	// not give them. A rule that reads one is undecided (Decision.Undecided), never passed.
	Unknown []string
}

// Admission evaluates the admission decision point for one object.
func (e *Engine) Admission(ctx context.Context, in AdmissionInput) *Decision {
	d := &Decision{}
	at := in.Point
	if at == "" {
		at = policyv1.PointAdmission
	}
	doc := map[string]any{"operation": in.Operation, "kind": in.Kind, "object": in.Object, "usage": usageDoc(in.Usage),
		"now": in.Now.UTC().Format(time.RFC3339)}
	if in.OldObject != nil {
		doc["oldObject"] = in.OldObject
	}
	if in.Namespace != nil {
		doc["namespace"] = namespaceDoc(*in.Namespace)
	}
	if in.Budget != nil {
		ns := Namespace{Name: in.Budget.Namespace}
		if in.Namespace != nil {
			ns = *in.Namespace
		}
		eff, x := e.effectiveBudget(in.Budget, ns, in.Now)
		d.Exemptions = append(d.Exemptions, budgetExemptionRecord(in.Budget, x)...)
		bd, err := e.budgetDoc(eff, x, in.Now)
		if err != nil {
			d.Errors = append(d.Errors, EvalError{Source: budgetSource(in.Budget), DecisionPoint: policyv1.DecisionPointAdmission, Err: err})
		} else {
			doc["budget"] = bd
			src, enf := budgetSource(in.Budget), budgetEnforcement(in.Budget, at)
			e.evalAdmissionUnit(ctx, d, e.builtin, at, doc, in.Unknown, func(string) (Source, policyv1.EnforcementAction) { return src, enf }, nil)
		}
	}
	labelsUnknown := slices.Contains(in.Unknown, UnknownNamespaceLabels)
	for _, u := range e.admissionUnits(in.Namespace, labelsUnknown) {
		if in.Namespace != nil && labelsUnknown && !u.selector.Empty() {
			// Whether it applies at all depends on the labels.
			d.Undecided = append(d.Undecided, Undecided{Source: u.source, Rules: "namespaceSelector", Reads: []string{UnknownNamespaceLabels}})
			continue
		}
		var exempt exemptFunc
		if in.Namespace != nil {
			exempt = e.namespaceExempt(*in.Namespace, u.source.Name, in.Now)
		}
		e.evalAdmissionUnit(ctx, d, u, at, doc, in.Unknown, unitEnforcement(u, at), exempt)
	}
	e.observeExemptions(policyv1.DecisionPointAdmission, d.Exemptions)
	return d
}

// admissionUnits are the CapacityPolicies that review an object at admission: those that
// select its namespace (all with a selector, when its labels are unknown), or for a
// cluster-scoped object (ns nil), those without a selector.
func (e *Engine) admissionUnits(ns *Namespace, labelsUnknown bool) []*unit {
	var out []*unit
	for _, u := range *e.policies.Load() {
		if ns != nil && !u.selects(*ns) && (!labelsUnknown || u.selector.Empty()) {
			continue
		}
		if ns == nil && !u.selector.Empty() {
			continue
		}
		out = append(out, u)
	}
	return out
}
