package disruption

import (
	"fmt"
	"strings"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/audit"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

// recordGate makes the policy gate's refusals and exemptions decisions the audit reports
// (docs/policies.md, "Audit"): the newest per namespace, policy, rule and first node.
func (c *Controller) recordGate(g *methods.PolicyCheck) {
	decisions := c.cluster.PolicyDecisions()
	subjects := func(cmd *methods.Command) ([]audit.Subject, []string) {
		var out []audit.Subject
		var names []string
		for _, cand := range cmd.Candidates {
			out = append(out, audit.Subject{APIVersion: "v1", Kind: "Node", Name: cand.Name()})
			if cand.NodeClaim != nil {
				out = append(out, audit.Subject{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: cand.NodeClaim.Name})
			}
			names = append(names, cand.Name())
		}
		return out, names
	}
	g.OnRefusal = func(cmd *methods.Command, denied []policies.Violation) {
		subj, names := subjects(cmd)
		for _, v := range denied {
			rule := v.Rule
			if rule == "" {
				rule = policyv1.DecisionPointDisruption
			}
			decisions.Record(audit.Result{Namespace: v.Namespace, Policy: audit.PolicyName(v.Source), Rule: rule, Outcome: audit.Fail, Severity: audit.Medium,
				Subjects: subj, Message: fmt.Sprintf("refused %s (%s) of nodes %s: %s", strings.ToLower(string(cmd.Reason)), cmd.Decision, strings.Join(names, ", "), v.Message),
				Properties: map[string]string{"decision": "disruption", "reason": string(cmd.Reason), "enforcement": string(v.Enforcement)}}, c.clock.Now())
		}
	}
	g.OnExemption = func(cmd *methods.Command, xs []policies.Exemption) {
		subj, names := subjects(cmd)
		for _, x := range xs {
			decisions.Record(exemptionResult(x, subj, fmt.Sprintf("let %s of nodes %s through", strings.ToLower(string(cmd.Reason)), strings.Join(names, ", ")), "disruption"), c.clock.Now())
		}
	}
}

// exemptionResult is an exception applied to a decision, as the audit reports it.
func exemptionResult(x policies.Exemption, subjects []audit.Subject, what, decision string) audit.Result {
	rule := x.Rule
	if rule == "" {
		rule = "exception"
	}
	ns := x.Namespace
	if strings.Contains(ns, ",") {
		ns = ""
	}
	return audit.Result{Namespace: ns, Policy: audit.PolicyName(x.Source), Rule: rule, Outcome: audit.Skip, Severity: audit.Info, Subjects: subjects,
		Message:    fmt.Sprintf("CapacityException %s %s: %s", x.Exception, what, x.Message),
		Properties: map[string]string{"decision": decision, "exception": x.Exception}}
}
