package policies

import (
	"context"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// A ClusterCapacityBudget reaches the engine as a CapacityBudget with no namespace and the
// kind set (policyv1.ClusterCapacityBudget.AsBudget): the built-in budget policies evaluate
// it with the usage of the namespaces it selects together; CapacityPolicies and
// CapacityExceptions, which apply per namespace, do not.

const clusterBudgetKind = "ClusterCapacityBudget"

// IsClusterBudget reports whether b is a ClusterCapacityBudget as the policies read it
// (policyv1.ClusterCapacityBudget.AsBudget).
func IsClusterBudget(b *policyv1.CapacityBudget) bool { return b.Kind == clusterBudgetKind }

// BudgetSource names a budget as decisions name their source.
func BudgetSource(b *policyv1.CapacityBudget) Source { return budgetSource(b) }

// ClusterBudgetsDisruption evaluates the built-in budget policies alone at the disruption
// decision point, for ClusterCapacityBudgets: each entry of in.Namespaces is one, its Budget
// the budget as the policies read it (IsClusterBudget), its Usage and CostDelta its
// namespaces' together. CapacityPolicies and exceptions apply per namespace (Disruption).
func (e *Engine) ClusterBudgetsDisruption(ctx context.Context, in DisruptionInput) *Decision {
	command, parts := disruptionInput(in)
	d := &Decision{}
	budgets := e.addBudgets(d, policyv1.DecisionPointDisruption, parts, in.Now)
	e.evalBuiltin(ctx, d, policyv1.DecisionPointDisruption, command, parts, in.Now, budgets)
	return d
}
