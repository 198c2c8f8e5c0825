package methods

import (
	"context"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
)

// checkTeams refuses a command that takes the namespaces a ClusterCapacityBudget selects,
// together, past its hourly limit, or onto instance types it refuses, as the built-in budget
// policies judge a namespace's CapacityBudget; "" lets it through. The violations carry no
// namespace: the ClusterCapacityBudget is cluster-scoped.
func (g *PolicyCheck) checkTeams(ctx context.Context, cmd *Command, in policies.DisruptionInput, deltas map[string]delta) string {
	if len(g.Planner.ClusterBudgets) == 0 || g.Planner.Engine == nil {
		return ""
	}
	var entries []policies.DisruptionNamespace
	for _, cb := range g.Planner.ClusterBudgets {
		e := policies.DisruptionNamespace{Namespace: policies.Namespace{Name: planner.TeamKey(cb.Budget.Name)}, Budget: cb.Budget}
		touched := false
		for _, ns := range slices.Sorted(maps.Keys(deltas)) {
			if cb.Selector.Matches(labels.Set(g.Planner.Namespaces[ns].Labels)) {
				e.CostDelta += deltas[ns].cost
				touched = true
			}
		}
		if !touched {
			continue
		}
		e.Usage = g.teamUsage(cb)
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return ""
	}
	in.Namespaces = entries
	dec := g.Planner.Engine.ClusterBudgetsDisruption(ctx, in)
	denied := dec.Denied()
	if len(denied) == 0 {
		return ""
	}
	msgs := make([]string, 0, len(denied))
	for i := range denied {
		denied[i].Namespace = ""
		msgs = append(msgs, denied[i].Message)
	}
	g.refuse(cmd, denied)
	if g.OnRefusal != nil {
		g.OnRefusal(cmd, denied)
	}
	return strings.Join(msgs, "; ")
}

// teamOverBudget reports whether a ClusterCapacityBudget that selects the namespace has its
// namespaces' run-rate together over its hourly limit in force (cached per budget).
func (g *PolicyCheck) teamOverBudget(ctx context.Context, c *Cluster, ns string) bool {
	if g.Planner.Engine == nil {
		return false
	}
	set := labels.Set(g.Planner.Namespaces[ns].Labels)
	for _, cb := range g.Planner.ClusterBudgets {
		if !cb.Selector.Matches(set) {
			continue
		}
		key := planner.TeamKey(cb.Budget.Name)
		over, ok := g.teamOver[key]
		if !ok {
			if in, err := g.Planner.Engine.BudgetInForce(ctx, policies.Namespace{}, cb.Budget, g.teamUsage(cb), c.Now); err == nil && in != nil && in.HasLimit {
				over = in.Committed > in.HourlyLimit
			}
			if g.teamOver == nil {
				g.teamOver = map[string]bool{}
			}
			g.teamOver[key] = over
		}
		if over {
			return true
		}
	}
	return false
}

// teamUsage is the usage of the namespaces a ClusterCapacityBudget selects, summed in order.
func (g *PolicyCheck) teamUsage(cb *planner.ClusterBudget) policies.Usage {
	var u policies.Usage
	for _, name := range slices.Sorted(maps.Keys(g.Usage)) {
		if cb.Selector.Matches(labels.Set(g.Planner.Namespaces[name].Labels)) {
			u = u.Add(g.Usage[name])
		}
	}
	return u
}
