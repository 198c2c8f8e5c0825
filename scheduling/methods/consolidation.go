package methods

import (
	"context"
	"fmt"
	"sort"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// MinSpotToSpotTypes is how many cheaper instance types a Spot-to-Spot replacement needs: a
// replacement with fewer options would be interrupted more often than the node it replaces.
// The replacement launches from the cheapest this many.
const MinSpotToSpotTypes = 15

// consolidationCandidates are the candidates consolidation may remove or replace: their
// NodePool allows consolidating underutilized nodes, consolidateAfter has passed, nothing
// blocks them, and they can be priced; those the gate prefers (running pods of a namespace
// over its budget) first, then in order of savings (bySavings).
func consolidationCandidates(ctx context.Context, c *Cluster, candidates []*Candidate) []*Candidate {
	var out []*Candidate
	for _, cand := range candidates {
		switch {
		case !underutilizedAllowed(cand.NodePool) || !consolidatable(c, cand) || cand.Blocked != "":
		case cand.InstanceType == nil:
			c.note(cand, fmt.Sprintf("instance type %s is not in its NodePool's catalog", instanceTypeName(cand)))
		default:
			out = append(out, cand)
		}
	}
	preferred := map[*Candidate]bool{}
	if p, ok := c.Check.(Preferrer); ok {
		for _, cand := range out {
			preferred[cand] = p.Prefer(ctx, c, cand)
		}
	}
	bySavings(out, preferred)
	return out
}

// savingsRatio is what removing the candidate saves per unit of the disruption it causes: its
// price per hour over its disruption cost for the Balanced score (1 plus its reschedulable
// pods' eviction costs, balancedNodeCost), upstream v1.15's Candidate.SavingsRatio. The
// denominator is at least 1, so an empty node's ratio is its price.
func savingsRatio(cand *Candidate) float64 {
	return cand.PricePerHour / balancedNodeCost(cand.Pods)
}

// bySavings orders candidates as upstream v1.15 tries them under every consolidation policy:
// the highest savings ratio first, so that a budget that lets only a few nodes go spends them
// on the moves most worth their disruption, and multi-node consolidation's prefix holds the
// nodes most worth packing. Those preferred (true in preferred; nil prefers none) come before
// the rest; ties go to the lower lifetime-weighted disruption cost (the node nearer its
// expiry), then to the name, so the order does not depend on the input's.
func bySavings(cands []*Candidate, preferred map[*Candidate]bool) {
	ratio := make(map[*Candidate]float64, len(cands))
	for _, cand := range cands {
		ratio[cand] = savingsRatio(cand)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		switch {
		case preferred[a] != preferred[b]:
			return preferred[a]
		case ratio[a] != ratio[b]:
			return ratio[a] > ratio[b]
		case a.DisruptionCost != b.DisruptionCost:
			return a.DisruptionCost < b.DisruptionCost
		}
		return a.Name() < b.Name()
	})
}

// consolidateScored is the command that removes the candidates, their pods moved to the other
// nodes and at most one new node that costs less than they do (its replacements narrowed as
// the policy gate asked, Narrowing), with how the move was scored for each of the candidates'
// NodePools (balanced.go), nil when no move reached scoring; nil, with why, when there is no
// such command.
func (c *Cluster) consolidateScored(cands []*Candidate, consolidationType string, narrow Narrowing) (*Command, string, []PoolScore, error) {
	before := 0.0
	allSpot := true
	for _, cand := range cands {
		before += cand.PricePerHour
		allSpot = allSpot && cand.CapacityType == karpv1.CapacityTypeSpot
	}
	rule := replacementRule{maxPrice: before * (1 - c.Options.MinSavingsFraction)}
	if len(cands) == 1 {
		// The same type again is a delete in disguise, or churn.
		rule.excludeTypes = map[string]bool{cands[0].InstanceType.Name: true}
	}
	if allSpot {
		if !c.Options.SpotToSpotConsolidation {
			rule.onDemandOnly = true
		} else if len(cands) == 1 {
			rule.cheapest = MinSpotToSpotTypes
		}
	}
	rule = rule.narrowed(narrow)
	sim, err := c.simulate(cands, rule)
	if err != nil {
		return nil, "", nil, err
	}
	if sim.unschedulable == "" && len(sim.result.NodeClaims) > 1 {
		// The cheapest cover took several smaller nodes; consolidation launches one, so try
		// again with each NodePool limited to one more node.
		rule.oneNode = true
		if again, err := c.simulate(cands, rule); err != nil {
			return nil, "", nil, err
		} else if again.unschedulable == "" && len(again.result.NodeClaims) == 1 {
			sim = again
		}
	}
	if sim.unschedulable != "" {
		return nil, sim.unschedulable, nil, nil
	}
	switch n := len(sim.result.NodeClaims); {
	case n > 1:
		return nil, fmt.Sprintf("its pods would need %d new nodes", n), nil, nil
	case n == 1 && allSpot && c.Options.SpotToSpotConsolidation && len(cands) == 1 && len(sim.result.NodeClaims[0].InstanceTypes) < MinSpotToSpotTypes:
		return nil, fmt.Sprintf("a Spot replacement needs %d cheaper instance types, %d are", MinSpotToSpotTypes, len(sim.result.NodeClaims[0].InstanceTypes)), nil, nil
	}
	cmd := c.command(ReasonUnderutilized, cands, sim)
	cmd.ConsolidationType = consolidationType
	if cmd.Decision == DecisionReplace && cmd.PriceAfter() >= before*(1-c.Options.MinSavingsFraction) {
		return nil, "no cheaper replacement", nil, nil
	}
	pools := c.poolScores(cands, cmd.Savings())
	if why := balancedRefusal(pools, cmd.Savings()); why != "" {
		return nil, why, pools, nil
	}
	return cmd, "", pools, nil
}

// firstCommand is the command of the first candidate, in order, that its NodePool's budget for
// the reason allows, that build finds one for and that admit lets go; it takes the node from the
// budgets and notes why the candidates before it were left alone. One node at a time: drift and
// single-node consolidation. When the gate refuses a command for its replacements (a Spot
// share, a family a budget denies) and says how to narrow them (Narrower), the candidate is
// built again with its replacements narrowed, at most maxNarrowings times: the cheapest
// replacement a policy allows, rather than none.
func (c *Cluster) firstCommand(ctx context.Context, cands []*Candidate, budgets *Budgets, r Reason,
	build func(*Candidate, Narrowing) (*Command, string, error)) ([]*Command, error) {
	for _, cand := range cands {
		if budgets.Allowed(cand.NodePoolName(), r) < 1 {
			c.note(cand, "the NodePool's disruption budget allows no more "+string(r)+" disruptions now")
			continue
		}
		var narrow Narrowing
		for try := 0; try <= maxNarrowings; try++ {
			cmd, why, err := build(cand, narrow)
			if err != nil {
				return nil, err
			}
			if cmd == nil {
				c.note(cand, why)
				break
			}
			if c.admit(ctx, cmd) {
				budgets.Take(cand.NodePoolName(), 1)
				cmd.Narrowed = narrow
				return []*Command{cmd}, nil
			}
			n, ok := c.Check.(Narrower)
			if !ok || len(cmd.Replacements) == 0 {
				break
			}
			next, ok := n.Narrow(cmd)
			if !ok || !narrow.widens(next) {
				break
			}
			narrow = narrow.and(next)
		}
	}
	return nil, nil
}

// maxNarrowings bounds how many times a refused command's replacements are narrowed.
const maxNarrowings = 3

// withinBudgets keeps, in order, the candidates each NodePool's Underutilized budget allows.
func withinBudgets(c *Cluster, cands []*Candidate, budgets *Budgets) []*Candidate {
	used := map[string]int{}
	var out []*Candidate
	for _, cand := range cands {
		pool := cand.NodePoolName()
		if used[pool] >= budgets.Allowed(pool, ReasonUnderutilized) {
			c.note(cand, "the NodePool's disruption budget allows no more Underutilized disruptions now")
			continue
		}
		used[pool]++
		out = append(out, cand)
	}
	return out
}

// replacing is the command that removes the candidates with whatever replacements their pods
// need; nil, with why, when some pod would fit nowhere.
func (c *Cluster) replacing(r Reason, cands []*Candidate, rule replacementRule) (*Command, string, error) {
	sim, err := c.simulate(cands, rule)
	if err != nil {
		return nil, "", err
	}
	if sim.unschedulable != "" {
		return nil, sim.unschedulable, nil
	}
	return c.command(r, cands, sim), "", nil
}

// command makes the simulation a command.
func (c *Cluster) command(r Reason, cands []*Candidate, sim *simulation) *Command {
	cmd := &Command{Reason: r, Decision: DecisionDelete, Candidates: cands, Moves: sim.moves, Replacements: sim.result.NodeClaims}
	if len(cmd.Replacements) > 0 {
		cmd.Decision = DecisionReplace
	}
	return cmd
}

// admit checks a command against the PodDisruptionBudgets (forceful repair does not heed
// them) and the gate.
func (c *Cluster) admit(ctx context.Context, cmd *Command) bool {
	if !cmd.Forceful && c.pdbs != nil {
		if pdb := c.pdbs.blocking(cmd.pods()); pdb != "" {
			for _, cand := range cmd.Candidates {
				c.note(cand, "PodDisruptionBudget "+pdb+" allows no more evictions now")
			}
			return false
		}
	}
	if c.Check != nil {
		if why := c.Check.Check(ctx, c, cmd); why != "" {
			for _, cand := range cmd.Candidates {
				c.note(cand, "denied by policy: "+why)
			}
			return false
		}
	}
	return true
}

// note records why consolidation left a node alone, once per node per pass.
func (c *Cluster) note(cand *Candidate, why string) {
	for _, u := range c.Unconsolidatable {
		if u.Node == cand.Name() {
			return
		}
	}
	c.Unconsolidatable = append(c.Unconsolidatable, Unconsolidatable{Node: cand.Name(), Reason: why})
}
