package disruption

import "context"

// SingleNode consolidation removes one node whose pods fit on the others, or replaces it with
// one cheaper node: on-demand may be replaced by Spot; Spot by Spot only with the
// SpotToSpotConsolidation feature gate and at least MinSpotToSpotTypes cheaper types; never by
// its own instance type; and only when the replacement saves at least MinSavingsFraction.
// Under the Balanced policy a candidate whose deletion (the best a move on it can do) would
// not pass the score is not simulated at all. Candidates are tried cheapest to disrupt first,
// until one works.
type SingleNode struct{}

// Reason implements Method.
func (SingleNode) Reason() Reason { return ReasonUnderutilized }

// Consolidation implements Method.
func (SingleNode) Consolidation() string { return "single" }

// Qualifies implements Method.
func (SingleNode) Qualifies(c *Cluster, cand *Candidate) bool { return len(cand.Pods) > 0 }

// Commands implements Method.
func (SingleNode) Commands(ctx context.Context, c *Cluster, candidates []*Candidate, budgets *Budgets) ([]*Command, error) {
	// Every candidate is tried, as long as its NodePool's budget allows one more node: a
	// command disrupts one node, so the budget is no cut-off in the candidates' order (as
	// withinBudgets is for multi-node consolidation).
	return c.firstCommand(ctx, consolidationCandidates(ctx, c, candidates), budgets, ReasonUnderutilized,
		func(cand *Candidate) (*Command, string, error) {
			if why := c.balancedRefusal([]*Candidate{cand}, cand.PricePerHour); why != "" {
				return nil, why + " even deleted", nil
			}
			if hopeless, why := c.hopeless(cand); hopeless {
				return nil, why, nil
			}
			return c.consolidate([]*Candidate{cand}, "single")
		})
}
