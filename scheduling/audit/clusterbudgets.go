package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
)

// clusterBudgets judges each ClusterCapacityBudget in the ClusterReport: its limit against the
// run-rate of the namespaces it selects together, its Spot bounds against their Spot share
// together, and its instance families against the types their pods run on (each node named
// once).
func (a *auditor) clusterBudgets(ctx context.Context) {
	list := append([]*policyv1.ClusterCapacityBudget(nil), a.in.ClusterBudgets...)
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	for _, c := range list {
		view := c.AsBudget()
		src := policies.BudgetSource(view)
		subject := []Subject{{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "ClusterCapacityBudget", Name: c.Name}}
		enforcement := view.EnforcementAt(policyv1.PointAudit)
		sel, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector)
		if err != nil {
			a.add(Result{Policy: PolicyName(src), Rule: "evaluation", Outcome: Error, Severity: High, Subjects: subject, Message: err.Error()})
			continue
		}
		var members []string
		var u policies.Usage
		for name, ns := range a.in.Namespaces {
			if sel.Matches(labels.Set(ns.Labels)) {
				members = append(members, name)
			}
		}
		sort.Strings(members)
		for _, name := range members {
			u = u.Add(a.usage[name])
		}
		bif, err := a.in.Engine.BudgetInForce(ctx, policies.Namespace{}, view, u, a.in.Now)
		if err != nil {
			a.add(Result{Policy: PolicyName(src), Rule: "evaluation", Outcome: Error, Severity: High, Subjects: subject, Message: err.Error()})
			continue
		}
		result := func(rule string, over bool, subjects []Subject, msg string, props map[string]string) {
			props["enforcement"] = string(enforcement)
			props["namespaces"] = fmt.Sprint(len(members))
			r := Result{Policy: PolicyName(src), Rule: rule, Subjects: subjects, Message: msg, Properties: props}
			if over {
				r.Outcome, r.Severity = outcome(policies.Violation{Enforcement: enforcement})
			} else {
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
			result(rule, over, subject, fmt.Sprintf("%s: hourly cost %.2f of its %d namespaces (%.2f running, %.2f in flight) is %s the limit %.2f (%s)",
				src, committed, len(members), u.HourlyCost, u.InFlightHourlyCost, verb, bif.HourlyLimit, bif.LimitReason),
				map[string]string{"hourlyCost": money(u.HourlyCost), "inFlightHourlyCost": money(u.InFlightHourlyCost), "hourlyLimit": money(bif.HourlyLimit)})
		}
		if s := bif.Spot; s.MinPercent > 0 || s.MaxPercent < 100 {
			share := u.SpotShare(s)
			msg := fmt.Sprintf("%s: Spot share of its %d namespaces above the on-demand base is %.1f%%, bounds [%.0f, %.0f]", src, len(members), share.Percent, s.MinPercent, s.MaxPercent)
			if !share.Counted {
				msg = fmt.Sprintf("%s: nothing of its namespaces runs above the on-demand base", src)
			}
			result(policyv1.BudgetRuleSpot, !s.InRange(share), subject, msg, map[string]string{"spotPercent": fmt.Sprintf("%.1f", share.Percent),
				"minPercent": fmt.Sprintf("%.0f", s.MinPercent), "maxPercent": fmt.Sprintf("%.0f", s.MaxPercent)})
		}
		if f := c.Spec.InstanceFamilies; f != nil && (len(f.Allow) > 0 || len(f.Deny) > 0) {
			a.clusterBudgetFamilies(ctx, view, members, subject, result)
		}
	}
}

// clusterBudgetFamilies fails the nodes the budget's namespaces run on whose instance type
// it refuses, as the built-in policies judge them at the audit point (each node once).
func (a *auditor) clusterBudgetFamilies(ctx context.Context, view *policyv1.CapacityBudget, members []string, subject []Subject, result func(string, bool, []Subject, string, map[string]string)) {
	byPool := map[string][]node{}
	seen := map[string]bool{}
	for _, ns := range members {
		for pool, nodes := range a.nodesOf(ns) {
			for _, n := range nodes {
				if !seen[n.name] {
					seen[n.name] = true
					byPool[pool] = append(byPool[pool], n)
				}
			}
		}
	}
	var refused []node
	var reasons []string
	for _, pool := range slices.Sorted(maps.Keys(byPool)) {
		nodes := byPool[pool]
		var its []*cloudprovider.InstanceType
		have := map[string]bool{}
		for _, n := range nodes {
			if it, ok := a.types[n.instanceType]; ok && !have[n.instanceType] {
				have[n.instanceType] = true
				its = append(its, it)
			}
		}
		types, err := a.in.Engine.InstanceTypes(planner.InstanceTypeInfos(its))
		if err != nil {
			continue
		}
		c := a.in.Engine.Provisioning(ctx, policies.ProvisioningInput{NodePool: pool, InstanceTypes: types, Budget: view, Now: a.in.Now, Point: policyv1.PointAudit})
		denied := map[string]string{}
		for _, f := range c.Findings {
			if f.InstanceType != "" {
				denied[f.InstanceType] = f.Violation.Message
			}
		}
		for _, n := range nodes {
			if msg, no := denied[n.instanceType]; no {
				refused = append(refused, n)
				reasons = append(reasons, msg)
			}
		}
	}
	sort.Slice(refused, func(i, j int) bool { return refused[i].name < refused[j].name })
	subjects := append([]Subject(nil), subject...)
	for _, n := range refused {
		subjects = append(subjects, n.subjects()...)
	}
	msg := fmt.Sprintf("%s: its namespaces run on instance families it allows", policies.BudgetSource(view))
	if len(refused) > 0 {
		sort.Strings(reasons)
		msg = fmt.Sprintf("%d nodes of its namespaces run on refused types; %s", len(refused), reasons[0])
	}
	result(policyv1.BudgetRuleInstanceFamilies, len(refused) > 0, subjects, msg, map[string]string{"nodes": fmt.Sprint(len(refused))})
}
