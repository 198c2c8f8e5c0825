package audit

import (
	"context"
	"fmt"
	"sort"
	"strings"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
)

// admission judges NodePools and CapacityBudgets as they are now by the CapacityPolicies'
// karpenter.admission rules, at the audit point: what a policy added since they were admitted
// says of them. The built-in admission rules of budgets say what the budget results say.
func (a *auditor) admission(ctx context.Context) {
	nps := append([]*karpv1.NodePool(nil), a.in.NodePools...)
	sort.Slice(nps, func(i, j int) bool { return nps[i].Name < nps[j].Name })
	for _, np := range nps {
		subject := []Subject{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool", Name: np.Name}}
		obj := objectOf(np)
		d := a.in.Engine.Admission(ctx, policies.AdmissionInput{Operation: "UPDATE", Kind: "NodePool", Object: obj, OldObject: obj,
			Now: a.in.Now, Point: policyv1.PointAudit})
		a.decision("", subject, d, false)
	}
	names := make([]string, 0, len(a.in.Budgets))
	for ns := range a.in.Budgets {
		names = append(names, ns)
	}
	sort.Strings(names)
	for _, ns := range names {
		b := a.in.Budgets[ns]
		subject := []Subject{{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "CapacityBudget", Namespace: b.Namespace, Name: b.Name}}
		obj := objectOf(b)
		n := a.namespace(ns)
		d := a.in.Engine.Admission(ctx, policies.AdmissionInput{Operation: "UPDATE", Kind: "CapacityBudget", Object: obj, OldObject: obj,
			Namespace: &n, Budget: b, Usage: a.usage[ns], Now: a.in.Now, Point: policyv1.PointAudit})
		a.decision(ns, subject, d, true)
	}
}

// decision turns an admission decision's results into results about the subject.
func (a *auditor) decision(ns string, subject []Subject, d *policies.Decision, skipBuiltin bool) {
	add := func(v policies.Violation, out Outcome, sev Severity) {
		if skipBuiltin && v.Source.Kind == "CapacityBudget" {
			return
		}
		rule := v.Rule
		if rule == "" {
			rule = policyv1.DecisionPointAdmission
		}
		a.add(Result{Namespace: ns, Policy: PolicyName(v.Source), Rule: rule, Outcome: out, Severity: sev, Subjects: subject, Message: v.Message,
			Properties: map[string]string{"enforcement": string(v.Enforcement)}})
	}
	for _, v := range d.Violations {
		out, sev := outcome(v)
		add(v, out, sev)
	}
	for _, v := range d.Warnings {
		add(v, Warn, Medium)
	}
	for _, e := range d.Errors {
		a.add(Result{Namespace: ns, Policy: PolicyName(e.Source), Rule: "evaluation", Outcome: Error, Severity: High, Subjects: subject, Message: e.Error()})
	}
}

// nodePools lists in the cluster's report, per NodePool, the policy results that failed or
// warned about its nodes in the namespaces' reports: which NodePool runs capacity a policy
// refuses, for which namespaces.
func (a *auditor) nodePools() {
	type group struct {
		policy, rule, pool string
		outcome            Outcome
		severity           Severity
		claims, nodes      map[string]bool
		namespaces         map[string]bool
		enforcement        string
	}
	groups := map[string]*group{}
	for _, r := range a.out {
		if r.Namespace == "" || (r.Outcome != Fail && r.Outcome != Warn) {
			continue
		}
		pool, ok := r.Properties["nodePool"]
		if !ok || pool == "" {
			continue
		}
		k := pool + "|" + r.Policy + "|" + r.Rule
		g, ok := groups[k]
		if !ok {
			g = &group{policy: r.Policy, rule: r.Rule, pool: pool, outcome: r.Outcome, severity: r.Severity, claims: map[string]bool{},
				nodes: map[string]bool{}, namespaces: map[string]bool{}, enforcement: r.Properties["enforcement"]}
			groups[k] = g
		}
		if r.Outcome == Fail {
			g.outcome, g.severity = Fail, r.Severity
		}
		g.namespaces[r.Namespace] = true
		for _, s := range r.Subjects {
			switch s.Kind {
			case "NodeClaim":
				g.claims[s.Name] = true
			case "Node":
				g.nodes[s.Name] = true
			}
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g := groups[k]
		subjects := []Subject{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool", Name: g.pool}}
		for _, c := range sorted(g.claims) {
			subjects = append(subjects, Subject{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: c})
		}
		a.add(Result{Policy: g.policy, Rule: g.rule, Outcome: g.outcome, Severity: g.severity, Subjects: subjects,
			Message: fmt.Sprintf("NodePool %s runs %d nodes that %s refuses (rule %s), for namespaces %s", g.pool, len(g.nodes), g.policy, g.rule,
				strings.Join(sorted(g.namespaces), ", ")),
			Properties: map[string]string{"enforcement": g.enforcement, "nodePool": g.pool, "nodes": fmt.Sprint(len(g.nodes))}})
	}
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
