package methods

import (
	"context"
	"time"
)

// MaxMultiNodeCandidates bounds how many candidates multi-node consolidation weighs at once,
// as upstream does.
const MaxMultiNodeCandidates = 100

// DefaultMultiNodeTimeout bounds multi-node consolidation's search.
const DefaultMultiNodeTimeout = time.Minute

// MultiNode consolidation removes the largest prefix of the candidates (highest savings ratio
// first, bySavings, within budgets) whose pods fit on the remaining nodes plus at most one new node
// cheaper than the prefix, found by binary search over the prefix length. The search stops at
// the timeout with the best command found so far (TimedOut counts it).
type MultiNode struct {
	// Clock tells the time for the timeout; nil is the wall clock.
	Clock func() time.Time
	// TimedOut is set when the last search ran out of time.
	TimedOut bool
}

// Reason implements Method.
func (*MultiNode) Reason() Reason { return ReasonUnderutilized }

// Consolidation implements Method.
func (*MultiNode) Consolidation() string { return "multi" }

// Qualifies implements Method.
func (*MultiNode) Qualifies(c *Cluster, cand *Candidate) bool { return len(cand.Pods) > 0 }

// Commands implements Method.
func (m *MultiNode) Commands(ctx context.Context, c *Cluster, candidates []*Candidate, budgets *Budgets) ([]*Command, error) {
	now := m.Clock
	if now == nil {
		now = time.Now
	}
	timeout := c.Options.MultiNodeTimeout
	if timeout == 0 {
		timeout = DefaultMultiNodeTimeout
	}
	deadline := now().Add(timeout)
	m.TimedOut = false
	cands := withinBudgets(c, consolidationCandidates(ctx, c, candidates), budgets)
	if len(cands) > MaxMultiNodeCandidates {
		cands = cands[:MaxMultiNodeCandidates]
	}
	if len(cands) < 2 {
		return nil, nil
	}
	var best *Command
	var rejected []*Candidate
	var bestPools, rejectedPools []PoolScore
	lo, hi := 2, len(cands)
	for lo <= hi {
		if now().After(deadline) {
			m.TimedOut = true
			break
		}
		mid := (lo + hi) / 2
		if c.prefixHopeless(cands[:mid]) {
			hi = mid - 1
			continue
		}
		cmd, _, pools, err := c.consolidateScored(cands[:mid], "multi", Narrowing{})
		if err != nil {
			return nil, err
		}
		if cmd != nil && cmd.Savings() > 0 {
			best, bestPools, lo = cmd, pools, mid+1
		} else {
			if cmd == nil && pools != nil {
				// Balanced refused it: told once, for the last (smallest) such prefix.
				rejected, rejectedPools = cands[:mid], pools
			}
			hi = mid - 1
		}
	}
	switch {
	case best != nil:
		c.recordMove(best.Candidates, true, bestPools)
	case rejected != nil:
		c.recordMove(rejected, true, rejectedPools)
	}
	if best == nil || !c.admit(ctx, best) {
		return nil, nil
	}
	for _, cand := range best.Candidates {
		budgets.Take(cand.NodePoolName(), 1)
	}
	return []*Command{best}, nil
}
