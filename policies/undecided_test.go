package policies

import (
	"context"
	"slices"
	"testing"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// One admission module whose rules read, by kind, only the object, the namespace's usage, its
// labels, and whether the object existed before.
const admissionRego = `package karpenter.admission

import rego.v1

deny contains {"msg": msg, "rule": "max-cpu"} if {
	input.kind == "NodePool"
	units.parse(input.object.spec.limits.cpu) > 500
	msg := sprintf("NodePool %s: cpu limit %s is over 500", [input.object.metadata.name, input.object.spec.limits.cpu])
}

deny contains "budget below what the namespace runs at" if {
	input.kind == "CapacityBudget"
	to_number(input.object.spec.limits.hourlyCost) < input.usage.hourlyCost
}

warn contains "a prod namespace's budget" if {
	input.kind == "CapacityBudget"
	input.namespace.labels.tier == "prod"
}

deny contains "no lowering of limits" if {
	input.kind == "NodePool"
	input.operation == "UPDATE"
	units.parse(input.object.spec.limits.cpu) < units.parse(input.oldObject.spec.limits.cpu)
}
`

func TestAdmissionUndecidedOffline(t *testing.T) {
	e := newEngine(t)
	p := testPolicy("guard", admissionRego, policyv1.EnforcementDeny, policyv1.FailurePolicyIgnore)
	p.Spec.NamespaceSelector = nil
	if probs := e.SetPolicies([]policyv1.CapacityPolicy{p}); len(probs) > 0 {
		t.Fatal(probs)
	}
	ctx := context.Background()
	np := func(cpu string) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": "general"}, "spec": map[string]any{"limits": map[string]any{"cpu": cpu}}}
	}
	offline := []string{UnknownUsage, UnknownNamespaceLabels, UnknownOperation, UnknownOldObject}

	// A NodePool over the limit is denied offline: the rule reads the object only. The
	// update-only rule reads what validate cannot know, so deny is undecided, and the
	// NodePool within the limit is not passed silently either.
	d := e.Admission(ctx, AdmissionInput{Operation: "CREATE", Kind: "NodePool", Object: np("600"), Now: mid, Point: policyv1.PointCI, Unknown: offline})
	if len(d.Violations) != 1 || d.Violations[0].Rule != "max-cpu" || len(d.Undecided) != 1 || d.Undecided[0].Rules != "deny" ||
		!slices.Equal(d.Undecided[0].Reads, []string{UnknownOldObject, UnknownOperation}) {
		t.Errorf("validate, one deny rule reads the operation: violations %+v, undecided %+v", d.Violations, d.Undecided)
	}
	d = e.Admission(ctx, AdmissionInput{Operation: "CREATE", Kind: "NodePool", Object: np("400"), Now: mid, Point: policyv1.PointCI, Unknown: offline})
	if len(d.Violations) != 0 || len(d.Undecided) != 1 {
		t.Errorf("validate, within the cpu rule: violations %+v, undecided %+v", d.Violations, d.Undecided)
	}
	// With the operation known (plan's base), everything is decided: the cpu rule denies.
	known := []string{UnknownUsage, UnknownNamespaceLabels}
	d = e.Admission(ctx, AdmissionInput{Operation: "CREATE", Kind: "NodePool", Object: np("600"), Now: mid, Point: policyv1.PointCI, Unknown: known})
	if len(d.Undecided) != 0 || len(d.Violations) != 1 || d.Violations[0].Rule != "max-cpu" || d.Violations[0].Message != "NodePool general: cpu limit 600 is over 500" {
		t.Errorf("plan: violations %+v, undecided %+v", d.Violations, d.Undecided)
	}
	d = e.Admission(ctx, AdmissionInput{Operation: "CREATE", Kind: "NodePool", Object: np("400"), Now: mid, Point: policyv1.PointCI, Unknown: known})
	if len(d.Undecided) != 0 || len(d.Violations) != 0 {
		t.Errorf("within the rule: violations %+v, undecided %+v", d.Violations, d.Undecided)
	}

	// A CapacityBudget: the deny reads the usage, the warn the labels.
	b := map[string]any{"spec": map[string]any{"limits": map[string]any{"hourlyCost": "1.00"}}}
	ns := &Namespace{Name: "team-a"}
	d = e.Admission(ctx, AdmissionInput{Operation: "CREATE", Kind: "CapacityBudget", Object: b, Namespace: ns, Now: mid, Point: policyv1.PointCI, Unknown: known})
	var rules []string
	for _, u := range d.Undecided {
		rules = append(rules, u.Rules+":"+u.Reads[0])
	}
	slices.Sort(rules)
	if !slices.Equal(rules, []string{"deny:input.usage", "warn:input.namespace.labels"}) || len(d.Violations)+len(d.Warnings) != 0 {
		t.Errorf("budget: undecided %v, violations %+v, warnings %+v", rules, d.Violations, d.Warnings)
	}
	// Known, they decide.
	d = e.Admission(ctx, AdmissionInput{Operation: "CREATE", Kind: "CapacityBudget", Object: b, Now: mid, Point: policyv1.PointCI,
		Namespace: &Namespace{Name: "team-a", Labels: map[string]string{"tier": "prod"}}, Usage: Usage{HourlyCost: 2}})
	if len(d.Undecided) != 0 || len(d.Violations) != 1 || len(d.Warnings) != 1 {
		t.Errorf("budget known: undecided %+v, violations %+v, warnings %+v", d.Undecided, d.Violations, d.Warnings)
	}
}

// A policy with a namespaceSelector cannot be said to apply to a namespace whose labels are
// unknown.
func TestAdmissionUndecidedSelector(t *testing.T) {
	e := newEngine(t)
	p := testPolicy("dev-only", admissionRego, policyv1.EnforcementDeny, policyv1.FailurePolicyIgnore)
	if probs := e.SetPolicies([]policyv1.CapacityPolicy{p}); len(probs) > 0 {
		t.Fatal(probs)
	}
	b := map[string]any{"spec": map[string]any{"limits": map[string]any{"hourlyCost": "1.00"}}}
	d := e.Admission(context.Background(), AdmissionInput{Operation: "CREATE", Kind: "CapacityBudget", Object: b, Namespace: &Namespace{Name: "team-a"},
		Now: mid, Point: policyv1.PointCI, Unknown: []string{UnknownNamespaceLabels}})
	if len(d.Undecided) != 1 || d.Undecided[0].Rules != "namespaceSelector" {
		t.Errorf("undecided %+v", d.Undecided)
	}
}
