package disruption

import (
	"fmt"
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// BalancedThreshold is k of the Balanced consolidation policy: a move is approved when its
// score, the share of its NodePools' cost it saves over the share of their disruption cost it
// causes, reaches 1/k. At 2 a uniform pool replaces a node only by one at most half its price,
// and a same-price replacement (score 0) is never approved, so churn loops cannot start
// (docs/disruption.md, "Balanced").
const BalancedThreshold = 2.0

// nodeDisruptionBaseline is what disrupting a node costs before its pods: it keeps an empty
// node's cost, and every pool's total, above zero.
const nodeDisruptionBaseline = 1.0

// poolBalance is what a NodePool's nodes cost per hour and to disrupt, the denominators of
// the Balanced score.
type poolBalance struct {
	price      float64
	disruption float64
}

// podEvictionCost is what evicting one pod costs, as upstream weighs it: 1, plus its
// pod-deletion-cost over 2^27 and its priority over 2^25, clamped to [-10, 10].
func podEvictionCost(p *corev1.Pod) float64 {
	cost := 1.0
	if v, err := strconv.ParseFloat(p.Annotations[PodDeletionCostAnnotation], 64); err == nil {
		cost += v / math.Exp2(27)
	}
	if p.Spec.Priority != nil {
		cost += float64(*p.Spec.Priority) / math.Exp2(25)
	}
	return min(10, max(-10, cost))
}

// balancedNodeCost is a node's disruption cost for the Balanced score: the baseline plus its
// reschedulable pods' eviction costs, negative ones counted as 0 (a pod cheap to evict does
// not make its node cheaper than an empty one).
func balancedNodeCost(pods []*corev1.Pod) float64 {
	total := nodeDisruptionBaseline
	for _, p := range pods {
		if scheduling.IsReschedulable(p) {
			total += max(0, podEvictionCost(p))
		}
	}
	return total
}

// balance is the NodePool's totals over every node of it that offers room, candidate or not
// (a node within consolidateAfter still counts, so a pool just consolidated is not judged
// smaller than it is). Computed once per snapshot.
func (c *Cluster) balance(pool string) poolBalance {
	if c.balances == nil {
		c.balances = map[string]poolBalance{}
		for _, n := range c.Nodes {
			p := n.Labels[karpv1.NodePoolLabelKey]
			if p == "" {
				continue
			}
			b := c.balances[p]
			b.price += n.PricePerHour
			b.disruption += balancedNodeCost(n.Pods)
			c.balances[p] = b
		}
	}
	return c.balances[pool]
}

// balancedScore scores a move that removes the candidates and saves savings per hour, for
// each of the candidates' NodePools that is Balanced, against that pool's totals: its share of
// the savings (split by the candidates' prices when the move spans pools) over its total
// price, against its candidates' disruption cost over its total, as upstream does. It
// returns the lowest score (every Balanced source pool must approve: a permissive pool cannot
// carry a Balanced one's node along) with that pool's shares; scored is false when no
// candidate's pool is Balanced.
func (c *Cluster) balancedScore(cands []*Candidate, savings float64) (score, savedShare, disruptedShare float64, scored bool) {
	type part struct{ price, disruption float64 }
	parts := map[string]*part{}
	total := 0.0
	for _, cand := range cands {
		total += cand.PricePerHour
		if cand.NodePool.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyBalanced {
			continue
		}
		p := parts[cand.NodePoolName()]
		if p == nil {
			p = &part{}
			parts[cand.NodePoolName()] = p
		}
		p.price += cand.PricePerHour
		p.disruption += balancedNodeCost(cand.Pods)
	}
	for _, pool := range sortedKeys(parts) {
		p, b := parts[pool], c.balance(pool)
		if b.price <= 0 || b.disruption <= 0 {
			continue
		}
		share := savings
		if total > 0 && p.price < total {
			share = savings * p.price / total
		}
		saved, disrupted := share/b.price, p.disruption/b.disruption
		if s := saved / disrupted; !scored || s < score {
			score, savedShare, disruptedShare, scored = s, saved, disrupted, true
		}
	}
	// A Balanced pool that cannot be priced scores 0: nothing shows the move is worth it.
	return score, savedShare, disruptedShare, len(parts) > 0
}

// balancedRefusal is why the Balanced policy refuses a move saving savings per hour, "" when
// it approves it or no candidate's NodePool is Balanced. A move that saves nothing is refused
// at any threshold.
func (c *Cluster) balancedRefusal(cands []*Candidate, savings float64) string {
	score, saved, disrupted, scored := c.balancedScore(cands, savings)
	switch {
	case !scored:
		return ""
	case savings <= 0:
		return "Balanced: the move saves nothing"
	// The tolerance lets a move exactly on the threshold (a uniform pool's half-price
	// replacement) through despite rounding.
	case score < 1/BalancedThreshold-1e-9:
		return fmt.Sprintf("Balanced: score %.2f < %.2f (saves %.1f%% of the NodePool's cost for %.1f%% of its disruption cost)",
			score, 1/BalancedThreshold, 100*saved, 100*disrupted)
	}
	return ""
}
