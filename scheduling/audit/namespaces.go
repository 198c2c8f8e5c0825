package audit

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
)

// budgetTolerance keeps rounding in attribution from failing what exactly fits; the engine's
// rules use the same.
const budgetTolerance = 0.005

// budgets judges each CapacityBudget: its limit against the namespace's run-rate, its Spot
// bounds against its share, its instance families against the types its pods run on.
func (a *auditor) budgets(ctx context.Context) {
	names := make([]string, 0, len(a.in.Budgets))
	for ns := range a.in.Budgets {
		names = append(names, ns)
	}
	sort.Strings(names)
	for _, ns := range names {
		b := a.in.Budgets[ns]
		src := policies.Source{Kind: "CapacityBudget", Namespace: b.Namespace, Name: b.Name}
		subject := []Subject{{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "CapacityBudget", Namespace: b.Namespace, Name: b.Name}}
		enforcement := b.EnforcementAt(policyv1.PointAudit)
		u := a.usage[ns]
		bif, err := a.in.Engine.BudgetInForce(ctx, a.namespace(ns), b, u, a.in.Now)
		if err != nil {
			a.add(Result{Namespace: ns, Policy: PolicyName(src), Rule: "evaluation", Outcome: Error, Severity: High, Subjects: subject, Message: err.Error()})
			continue
		}
		exempt := exemptRules(bif.Exemptions)
		violation := func(rule string, over bool, msg string, props map[string]string) {
			props["enforcement"] = string(enforcement)
			r := Result{Namespace: ns, Policy: PolicyName(src), Rule: rule, Subjects: subject, Message: msg, Properties: props}
			switch {
			case exempt[rule] != "" && over:
				r.Outcome, r.Severity = Skip, Info
				r.Message = fmt.Sprintf("%s; exempt by CapacityException %s", msg, exempt[rule])
				r.Properties["exception"] = exempt[rule]
			case over:
				r.Outcome, r.Severity = outcome(policies.Violation{Enforcement: enforcement})
			default:
				r.Outcome, r.Severity = Pass, Info
			}
			a.add(r)
		}
		if bif.HasLimit {
			committed := u.HourlyCost + u.InFlightHourlyCost
			rule := policyv1.BudgetRuleHourlyCost
			if strings.HasPrefix(bif.LimitReason, policyv1.BudgetRuleMonthlyCost) {
				rule = policyv1.BudgetRuleMonthlyCost
			}
			over := committed > bif.HourlyLimit+budgetTolerance
			verb := "within"
			if over {
				verb = "over"
			}
			violation(rule, over, fmt.Sprintf("%s: hourly cost %.2f (%.2f running, %.2f in flight) is %s the limit %.2f (%s)",
				src, committed, u.HourlyCost, u.InFlightHourlyCost, verb, bif.HourlyLimit, bif.LimitReason),
				map[string]string{"hourlyCost": money(u.HourlyCost), "inFlightHourlyCost": money(u.InFlightHourlyCost), "hourlyLimit": money(bif.HourlyLimit)})
		}
		if s := bif.Spot; s.MinPercent > 0 || s.MaxPercent < 100 {
			share := u.SpotShare(s)
			over := !s.InRange(share)
			msg := fmt.Sprintf("%s: Spot share above the on-demand base is %.1f%%, bounds [%.0f, %.0f]", src, share.Percent, s.MinPercent, s.MaxPercent)
			if !share.Counted {
				msg = fmt.Sprintf("%s: nothing runs above the on-demand base", src)
			}
			violation(policyv1.BudgetRuleSpot, over, msg, map[string]string{"spotPercent": fmt.Sprintf("%.1f", share.Percent),
				"minPercent": fmt.Sprintf("%.0f", s.MinPercent), "maxPercent": fmt.Sprintf("%.0f", s.MaxPercent)})
		}
	}
}

// exemptRules names, by rule, the exception that lifts or raises it.
func exemptRules(xs []policies.Exemption) map[string]string {
	out := map[string]string{}
	for _, x := range xs {
		for _, r := range strings.Split(x.Rule, ",") {
			if r != "" && out[r] == "" {
				out[r] = x.Exception
			}
		}
	}
	return out
}

// policies judges, for each namespace its pods run in, the provisioning rules of its budget
// (instance families) and of every CapacityPolicy that selects it, against what runs there.
func (a *auditor) policies(ctx context.Context) {
	names := make([]string, 0, len(a.byNamespace))
	for ns := range a.byNamespace {
		names = append(names, ns)
	}
	sort.Strings(names)
	for _, ns := range names {
		evals := a.evaluate(ctx, ns)
		if b := a.in.Budgets[ns]; b != nil {
			src := policies.Source{Kind: "CapacityBudget", Namespace: b.Namespace, Name: b.Name}
			found := false
			for _, e := range evals {
				found = a.findings(ns, e, src) || found
			}
			if !found && b.Spec.InstanceFamilies != nil {
				a.add(Result{Namespace: ns, Policy: PolicyName(src), Rule: policyv1.BudgetRuleInstanceFamilies, Outcome: Pass, Severity: Info,
					Subjects: []Subject{{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "CapacityBudget", Namespace: b.Namespace, Name: b.Name}},
					Message:  fmt.Sprintf("%s: the namespace runs on instance families it allows", src), Properties: map[string]string{"enforcement": string(b.EnforcementAt(policyv1.PointAudit))}})
			}
		}
		for _, p := range a.in.Policies {
			if !selects(p, a.namespace(ns)) || !a.in.Engine.Joins(p.Name, policyv1.DecisionPointProvisioning) {
				continue
			}
			a.policy(ns, p, evals)
		}
	}
}

func selects(p *policyv1.CapacityPolicy, ns policies.Namespace) bool {
	if p.Spec.NamespaceSelector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
	return err == nil && sel.Matches(labels.Set(ns.Labels))
}

// policy turns one CapacityPolicy's results in a namespace into results: its findings on the
// nodes in use, its deny and warn results, its errors and exemptions; a pass when it finds
// nothing.
func (a *auditor) policy(ns string, p *policyv1.CapacityPolicy, evals []evaluation) {
	src := policies.Source{Kind: "CapacityPolicy", Name: p.Name}
	subject := []Subject{{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "CapacityPolicy", Name: p.Name}}
	found := false
	seen := map[string]bool{}
	for _, e := range evals {
		found = a.findings(ns, e, src) || found
		for _, v := range append(append([]policies.Violation(nil), e.c.Violations...), e.c.Warnings...) {
			if v.Source != src || seen[v.Rule+"\x00"+v.Message] {
				continue
			}
			seen[v.Rule+"\x00"+v.Message] = true
			out, sev := outcome(v)
			if v.Enforcement == policyv1.EnforcementWarn || containsViolation(e.c.Warnings, v) {
				out, sev = Warn, Medium
			}
			rule := v.Rule
			if rule == "" {
				rule = policyv1.DecisionPointProvisioning
			}
			r := Result{Namespace: ns, Policy: PolicyName(src), Rule: rule, Outcome: out, Severity: sev, Message: v.Message,
				Properties: map[string]string{"enforcement": string(v.Enforcement), "nodePool": e.pool}}
			for _, n := range e.nodes {
				r.Subjects = append(r.Subjects, n.subjects()...)
			}
			a.add(r)
			found = true
		}
		for _, x := range e.c.Errors {
			if x.Source == src {
				a.add(Result{Namespace: ns, Policy: PolicyName(src), Rule: "evaluation", Outcome: Error, Severity: High, Subjects: subject, Message: x.Error()})
				found = true
			}
		}
		for _, x := range e.c.Exemptions {
			if x.Source == src && !seen["exempt\x00"+x.Exception+x.Rule] {
				seen["exempt\x00"+x.Exception+x.Rule] = true
				a.add(Result{Namespace: ns, Policy: PolicyName(src), Rule: x.Rule, Outcome: Skip, Severity: Info, Subjects: subject,
					Message:    fmt.Sprintf("%s; exempt by CapacityException %s", x.Message, x.Exception),
					Properties: map[string]string{"exception": x.Exception}})
				found = true
			}
		}
	}
	if !found {
		a.add(Result{Namespace: ns, Policy: PolicyName(src), Rule: policyv1.DecisionPointProvisioning, Outcome: Pass, Severity: Info, Subjects: subject,
			Message:    fmt.Sprintf("%s: what the namespace runs on breaks none of its provisioning rules", src),
			Properties: map[string]string{"enforcement": string(p.EnforcementAt(policyv1.PointAudit))}})
	}
}

func containsViolation(vs []policies.Violation, v policies.Violation) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}
