package methods

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
)

// CommandCheck decides whether a command may go ahead; "" lets it, else the reason it may not.
type CommandCheck interface {
	Check(ctx context.Context, c *Cluster, cmd *Command) string
}

// Preferrer is a CommandCheck that also names the candidates consolidation should try first.
type Preferrer interface {
	Prefer(ctx context.Context, c *Cluster, cand *Candidate) bool
}

// PolicyCheck is the only caller of the policy engine's karpenter.disruption decision point:
// it gives the command with each affected namespace's run-rate change (by the cost attribution
// of docs/architecture.md), budget and usage, and refuses it when a Deny policy does. A
// CapacityBudget's rules refuse a command that takes a namespace over its hourly limit or onto
// an instance type it refuses; a CapacityPolicy may refuse by anything the input holds, such
// as the namespaces' labels and the time ("no disruption of tier=prod nodes during office
// hours"). It also refuses a command that moves a budgeted namespace's Spot share out of its
// range when it was within it.
type PolicyCheck struct {
	// Planner holds the engine, the namespaces' labels and their governing budgets.
	Planner *planner.Planner
	// Usage is each namespace's run-rate before the command.
	Usage map[string]policies.Usage
	// over caches, by namespace, whether its run-rate is over its hourly limit in force, and
	// teamOver, by ClusterCapacityBudget account, whether its namespaces' together is.
	over     map[string]bool
	teamOver map[string]bool
	// OnRefusal, when set, hears of every command the gate refuses, with the violations that
	// refused it, and of the exceptions that let a command through: the audit's decisions.
	OnRefusal   func(cmd *Command, denied []policies.Violation)
	OnExemption func(cmd *Command, exempted []policies.Exemption)
	// refused is how the last command refused for its replacements could be narrowed (Narrow).
	refused struct {
		cmd    *Command
		narrow Narrowing
	}
}

// Narrow implements Narrower: a command refused because a namespace's Spot share would
// leave its range is tried again with on-demand replacements; one the engine refused (an
// instance family a budget or a policy denies, say) without the replacements' families. A
// refusal for cost alone (an hourly or monthly limit) is not narrowed: a narrower
// replacement costs no less.
func (g *PolicyCheck) Narrow(cmd *Command) (Narrowing, bool) {
	if g.refused.cmd != cmd {
		return Narrowing{}, false
	}
	n := g.refused.narrow
	return n, n.OnDemandOnly || len(n.Families) > 0
}

// refuse records how the command's replacements could be narrowed after the violations.
func (g *PolicyCheck) refuse(cmd *Command, vs []policies.Violation) {
	var n Narrowing
	for _, v := range vs {
		switch v.Rule {
		case policyv1.BudgetRuleSpot:
			n.OnDemandOnly = true
		case policyv1.BudgetRuleHourlyCost, policyv1.BudgetRuleMonthlyCost:
		default:
			for _, r := range cmd.Replacements {
				n = n.and(Narrowing{Families: []string{planner.Family(r.InstanceType)}})
			}
		}
	}
	g.refused.cmd, g.refused.narrow = cmd, n
}

// NewPolicyCheck is the gate for a snapshot: the planner's policies, with each namespace's usage
// attributed over the snapshot's nodes.
func NewPolicyCheck(pl *planner.Planner, c *Cluster) *PolicyCheck {
	types := make([][]*cloudprovider.InstanceType, 0, len(c.NodePools))
	for _, np := range c.NodePools {
		types = append(types, np.InstanceTypes)
	}
	return &PolicyCheck{Planner: pl, Usage: planner.UsageOf(c.Nodes, planner.NewPriceBook(types...))}
}

// Check implements CommandCheck.
func (g *PolicyCheck) Check(ctx context.Context, c *Cluster, cmd *Command) string {
	in := policies.DisruptionInput{Reason: string(cmd.Reason), Now: c.Now}
	for _, cand := range cmd.Candidates {
		in.Nodes = append(in.Nodes, policies.DisruptionNode{Name: cand.Name(), InstanceType: instanceTypeName(cand),
			CapacityType: cand.CapacityType, PricePerHour: cand.PricePerHour})
	}
	for _, r := range cmd.Replacements {
		in.Replacements = append(in.Replacements, policies.DisruptionNode{Name: r.Hostname, InstanceType: r.InstanceType.Name,
			Family: planner.Family(r.InstanceType), CapacityType: r.Offering.CapacityType, PricePerHour: r.Offering.Price})
	}
	deltas := costDeltas(c, cmd)
	for ns, d := range deltas {
		n, ok := g.Planner.Namespaces[ns]
		if !ok {
			n = policies.Namespace{Name: ns}
		}
		before := g.Usage[ns]
		b := g.Planner.Budgets[ns]
		if b != nil {
			// The Spot bounds as the CapacityExceptions in force leave them.
			eff := b
			if g.Planner.Engine != nil {
				eff = g.Planner.Engine.EffectiveBudget(b, n, c.Now)
			}
			if reason := spotLeavesRange(eff, before, d); reason != "" {
				vs := []policies.Violation{{Source: policies.Source{Kind: "CapacityBudget", Namespace: b.Namespace, Name: b.Name},
					Enforcement: policyv1.EnforcementDeny, Namespace: ns, Rule: policyv1.BudgetRuleSpot, Message: reason}}
				g.refuse(cmd, vs)
				if g.OnRefusal != nil {
					g.OnRefusal(cmd, vs)
				}
				return reason
			}
		}
		in.Namespaces = append(in.Namespaces, policies.DisruptionNamespace{Namespace: n, CostDelta: d.cost, Budget: b, Usage: before})
	}
	if g.Planner.Engine == nil {
		return ""
	}
	if reason := g.checkTeams(ctx, cmd, in, deltas); reason != "" {
		return reason
	}
	dec := g.Planner.Engine.Disruption(ctx, in)
	if len(dec.Exemptions) > 0 && g.OnExemption != nil {
		g.OnExemption(cmd, dec.Exemptions)
	}
	if denied := dec.Denied(); len(denied) > 0 {
		g.refuse(cmd, denied)
		if g.OnRefusal != nil {
			g.OnRefusal(cmd, denied)
		}
		msgs := make([]string, 0, len(denied))
		for _, v := range denied {
			msgs = append(msgs, v.Message)
		}
		return strings.Join(msgs, "; ")
	}
	return ""
}

// Prefer implements Preferrer: a candidate running pods of a namespace whose run-rate (with
// its in-flight reservation) is over the hourly limit its CapacityBudget has in force now, or
// of a namespace of a ClusterCapacityBudget whose namespaces together are over its limit, so
// that consolidation lowers that cost before anyone else's. The engine's rules let
// such a command through: they refuse only moves that raise an over-budget namespace's cost.
func (g *PolicyCheck) Prefer(ctx context.Context, c *Cluster, cand *Candidate) bool {
	for _, p := range cand.Pods {
		if g.overBudget(ctx, c, p.Namespace) {
			return true
		}
	}
	return false
}

func (g *PolicyCheck) overBudget(ctx context.Context, c *Cluster, ns string) bool {
	if over, ok := g.over[ns]; ok {
		return over
	}
	over := g.teamOverBudget(ctx, c, ns)
	if b := g.Planner.Budgets[ns]; !over && b != nil && g.Planner.Engine != nil {
		n, ok := g.Planner.Namespaces[ns]
		if !ok {
			n = policies.Namespace{Name: ns}
		}
		// A budget the engine cannot evaluate prefers nothing; the gate reports its error
		// when a command reaches it.
		if in, err := g.Planner.Engine.BudgetInForce(ctx, n, b, g.Usage[ns], c.Now); err == nil && in != nil && in.HasLimit {
			over = in.Committed > in.HourlyLimit
		}
	}
	if g.over == nil {
		g.over = map[string]bool{}
	}
	g.over[ns] = over
	return over
}

func instanceTypeName(c *Candidate) string {
	if c.InstanceType != nil {
		return c.InstanceType.Name
	}
	return c.Node.Labels[corev1.LabelInstanceTypeStable]
}

// delta is how a command changes a namespace's run-rate and Spot and on-demand vCPU.
type delta struct {
	cost, spotCPU, onDemandCPU float64
}

// costDeltas are, by namespace, the attributed run-rate and vCPU of its moved pods where
// they go less where they were.
func costDeltas(c *Cluster, cmd *Command) map[string]delta {
	out := map[string]delta{}
	from := map[*corev1.Pod]*Candidate{}
	for _, cand := range cmd.Candidates {
		for _, p := range cand.Pods {
			from[p] = cand
		}
	}
	targets := map[string]*scheduling.Node{}
	for _, n := range c.Nodes {
		targets[n.Name] = n
	}
	replacements := map[string]*replacementTarget{}
	for _, r := range cmd.Replacements {
		replacements[r.Hostname] = &replacementTarget{price: r.Offering.Price, alloc: r.InstanceType.Allocatable(), capacityType: r.Offering.CapacityType}
	}
	for _, m := range cmd.Moves {
		cand := from[m.Pod]
		if cand == nil {
			continue
		}
		cpu, mem, gpu := c.Requests.Amounts(m.Pod)
		req := policies.Amounts{CPU: cpu, Memory: mem, GPU: gpu}
		d := out[m.Pod.Namespace]
		d.cost -= policies.AttributedCost(cand.PricePerHour, req, amountsOf(cand.Node.Allocatable))
		addCPU(&d, cand.CapacityType, -cpu)
		if r, ok := replacements[m.To]; ok {
			d.cost += policies.AttributedCost(r.price, req, amountsOf(r.alloc))
			addCPU(&d, r.capacityType, cpu)
		} else if n, ok := targets[m.To]; ok {
			d.cost += policies.AttributedCost(n.PricePerHour, req, amountsOf(n.Allocatable))
			addCPU(&d, nodeCapacityType(n.Labels), cpu)
		}
		out[m.Pod.Namespace] = d
	}
	// Pods of nodes deleted without moving (none: every pod has a move) cost nothing more.
	return out
}

type replacementTarget struct {
	price        float64
	alloc        corev1.ResourceList
	capacityType string
}

func addCPU(d *delta, capacityType string, cpu float64) {
	if capacityType == karpv1.CapacityTypeSpot {
		d.spotCPU += cpu
	} else {
		d.onDemandCPU += cpu
	}
}

// amountsOf is a node's allocatable as cost attribution reads it.
func amountsOf(l corev1.ResourceList) policies.Amounts {
	cpu, mem, gpu := scheduling.AmountsOf(l)
	return policies.Amounts{CPU: cpu, Memory: mem, GPU: gpu}
}

// spotLeavesRange refuses a command that takes a namespace's Spot share, in range before,
// out of its budget's range (with the spec's bounds: schedule windows are the engine's), when
// the budget denies at the disruption point.
func spotLeavesRange(b *policyv1.CapacityBudget, before policies.Usage, d delta) string {
	if b.Spec.Spot == nil || b.EnforcementAt(policyv1.PointDisruption) != policyv1.EnforcementDeny {
		return ""
	}
	bounds := policies.SpecSpotBounds(b)
	after := before
	after.SpotCPU, after.OnDemandCPU = max(0, before.SpotCPU+d.spotCPU), max(0, before.OnDemandCPU+d.onDemandCPU)
	if bounds.InRange(before.SpotShare(bounds)) && !bounds.InRange(after.SpotShare(bounds)) {
		return "CapacityBudget " + b.Namespace + "/" + b.Name + ": the move would take the namespace's Spot share out of its range"
	}
	return ""
}

// nodeCapacityType is the capacity type of a node pods move to (scheduling.CapacityTypeOf).
func nodeCapacityType(labels map[string]string) string {
	ct, _ := scheduling.CapacityTypeOf(labels)
	return ct
}
