package methods

import (
	"context"
	"time"
)

// SingleNode consolidation removes one node whose pods fit on the others, or replaces it with
// one cheaper node: on-demand may be replaced by Spot; Spot by Spot only with the
// SpotToSpotConsolidation feature gate and at least MinSpotToSpotTypes cheaper types; never by
// its own instance type; and only when the replacement saves at least MinSavingsFraction.
// Under the Balanced policy a candidate whose deletion (the best a move on it can do) would
// not pass the score is not simulated at all. Candidates are tried highest savings ratio
// first (bySavings), until one works.
type SingleNode struct {
	// Clock tells the time for the timeout; nil is the wall clock.
	Clock func() time.Time
	// TimedOut is set when the last search ran out of time.
	TimedOut bool
}

// DefaultSingleNodeTimeout bounds single-node consolidation's search through the candidates
// (upstream gives it three minutes); the candidates not reached are tried in a later pass.
const DefaultSingleNodeTimeout = time.Minute

// Reason implements Method.
func (*SingleNode) Reason() Reason { return ReasonUnderutilized }

// Consolidation implements Method.
func (*SingleNode) Consolidation() string { return "single" }

// Qualifies implements Method.
func (*SingleNode) Qualifies(c *Cluster, cand *Candidate) bool { return len(cand.Pods) > 0 }

// Commands implements Method.
func (s *SingleNode) Commands(ctx context.Context, c *Cluster, candidates []*Candidate, budgets *Budgets) ([]*Command, error) {
	now := s.Clock
	if now == nil {
		now = time.Now
	}
	timeout := c.Options.SingleNodeTimeout
	if timeout == 0 {
		timeout = DefaultSingleNodeTimeout
	}
	deadline := now().Add(timeout)
	s.TimedOut = false
	// Every candidate is tried, as long as its NodePool's budget allows one more node: a
	// command disrupts one node, so the budget is no cut-off in the candidates' order (as
	// withinBudgets is for multi-node consolidation).
	return c.firstCommand(ctx, consolidationCandidates(ctx, c, candidates), budgets, ReasonUnderutilized,
		func(cand *Candidate, narrow Narrowing) (*Command, string, error) {
			if why := balancedRefusal(c.poolScores([]*Candidate{cand}, cand.PricePerHour), cand.PricePerHour); why != "" {
				return nil, why + " even deleted", nil
			}
			if hopeless, why := c.hopeless(cand); hopeless {
				return nil, why, nil
			}
			if now().After(deadline) {
				s.TimedOut = true
				return nil, "not simulated: single-node consolidation ran out of time in this pass", nil
			}
			cmd, why, pools, err := c.consolidateScored([]*Candidate{cand}, "single", narrow)
			if pools != nil {
				c.recordMove([]*Candidate{cand}, false, pools)
			}
			return cmd, why, err
		})
}
