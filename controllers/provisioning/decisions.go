package provisioning

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/audit"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
)

// Decision kinds the provisioner records for the audit (audit.Result.Properties["decision"]).
const (
	DecisionHeld       = "held"
	DecisionWouldHold  = "held-dryrun"
	DecisionExemption  = "provisioning"
	maxPodsInADecision = 10
)

// recordDecisions makes a batch's policy outcome decisions the audit reports: per namespace
// and policy rule, the pods held back (how many, the first few, the newest message), what a
// DryRun source would have held, and the exceptions that let pods through. A namespace the
// batch accounted for that has no pod held any more has its held decisions dropped: they are
// decided again at every batch.
func (p *Provisioner) recordDecisions(out *planner.Outcome) {
	decisions := p.cluster.PolicyDecisions()
	now := p.clock.Now()
	accounted := map[string]bool{}
	for ns := range out.Namespaces {
		accounted[ns] = true
	}
	// What the batch decides; the held decisions of accounted namespaces it does not decide
	// again are dropped after (recorded first, one decided again keeps when it was first taken).
	var held []audit.Result
	defer func() {
		again := map[string]bool{}
		for _, r := range held {
			again[r.Key()] = true
			decisions.Record(r, now)
		}
		decisions.Forget(func(r audit.Result, _ time.Time) bool {
			d := r.Properties["decision"]
			return accounted[r.Namespace] && (d == DecisionHeld || d == DecisionWouldHold) && !again[r.Key()]
		})
	}()
	type group struct {
		ns   string
		v    policies.Violation
		pods []string
	}
	groups := map[string]*group{}
	for _, b := range out.Blocked {
		if scheduling.IsVirtual(b.Pod) {
			continue
		}
		k := b.Pod.Namespace + "|" + audit.PolicyName(b.Violation.Source) + "|" + b.Violation.Rule
		g, ok := groups[k]
		if !ok {
			g = &group{ns: b.Pod.Namespace, v: b.Violation}
			groups[k] = g
		}
		g.pods = append(g.pods, b.Pod.Name)
	}
	for _, g := range groups {
		ns := g.ns
		sort.Strings(g.pods)
		rule := g.v.Rule
		if rule == "" {
			rule = policyv1.DecisionPointProvisioning
		}
		r := audit.Result{Namespace: ns, Policy: audit.PolicyName(g.v.Source), Rule: rule, Outcome: audit.Fail, Severity: audit.High,
			Subjects:   []audit.Subject{{APIVersion: "v1", Kind: "Namespace", Name: ns}},
			Message:    fmt.Sprintf("%d pods held back: %s", len(g.pods), g.v.Message),
			Properties: map[string]string{"decision": DecisionHeld, "pods": strconv.Itoa(len(g.pods)), "enforcement": string(g.v.Enforcement)}}
		for _, name := range g.pods[:min(len(g.pods), maxPodsInADecision)] {
			r.Subjects = append(r.Subjects, audit.Subject{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: name})
		}
		held = append(held, r)
	}
	for _, v := range out.DryRun {
		if v.Namespace == "" {
			continue
		}
		rule := v.Rule
		if rule == "" {
			rule = policyv1.DecisionPointProvisioning
		}
		held = append(held, audit.Result{Namespace: v.Namespace, Policy: audit.PolicyName(v.Source), Rule: rule, Outcome: audit.Fail, Severity: audit.Medium,
			Subjects:   []audit.Subject{{APIVersion: "v1", Kind: "Namespace", Name: v.Namespace}},
			Message:    "would have held pods back (DryRun): " + v.Message,
			Properties: map[string]string{"decision": DecisionWouldHold, "enforcement": string(policyv1.EnforcementDryRun)}})
	}
	for _, x := range out.Exemptions {
		if x.Namespace == "" {
			continue
		}
		rule := x.Rule
		if rule == "" {
			rule = "exception"
		}
		decisions.Record(audit.Result{Namespace: x.Namespace, Policy: audit.PolicyName(x.Source), Rule: rule, Outcome: audit.Skip, Severity: audit.Info,
			Subjects:   []audit.Subject{{APIVersion: "v1", Kind: "Namespace", Name: x.Namespace}},
			Message:    fmt.Sprintf("CapacityException %s applied to provisioning: %s", x.Exception, x.Message),
			Properties: map[string]string{"decision": DecisionExemption, "exception": x.Exception}}, now)
	}
}
