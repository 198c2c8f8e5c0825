package methods

import (
	"errors"
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

// podEvictionCost is what evicting one pod costs, as upstream v1.15 weighs it: 1, plus its
// karpenter.sh/disruption-cost (or, without one, its pod-deletion-cost) over 2^27 and its
// priority over 2^25, clamped to [-10, 10]. Both annotations are int32s, as the ReplicaSet
// controller and upstream parse them; a value that is not one counts as unset (InvalidEvictionCost
// names it, for the controller to tell), and a karpenter.sh/disruption-cost that is not one
// still hides the pod-deletion-cost, as upstream's.
func podEvictionCost(p *corev1.Pod) float64 {
	cost := 1.0
	if _, _, n, err := evictionCostAnnotation(p); err == nil {
		cost += float64(n) / math.Exp2(27)
	}
	if p.Spec.Priority != nil {
		cost += float64(*p.Spec.Priority) / math.Exp2(25)
	}
	return min(10, max(-10, cost))
}

// errNoEvictionCost: the pod has neither eviction-cost annotation.
var errNoEvictionCost = errors.New("no eviction cost annotation")

// evictionCostAnnotation is the annotation podEvictionCost reads for a pod
// (karpenter.sh/disruption-cost when the pod has it, else pod-deletion-cost), its value, and
// the value parsed as an int32; errNoEvictionCost when the pod has neither.
func evictionCostAnnotation(p *corev1.Pod) (key, value string, n int64, err error) {
	key = karpv1.DisruptionCostAnnotationKey
	value, ok := p.Annotations[key]
	if !ok {
		key = PodDeletionCostAnnotation
		if value, ok = p.Annotations[key]; !ok {
			return "", "", 0, errNoEvictionCost
		}
	}
	n, err = strconv.ParseInt(value, 10, 32)
	return key, value, n, err
}

// InvalidEvictionCost names the annotation podEvictionCost reads for the pod when its value is
// not an int32, and why; "" when it is one, or the pod has neither annotation.
func InvalidEvictionCost(p *corev1.Pod) (key, value, why string) {
	key, value, _, err := evictionCostAnnotation(p)
	switch {
	case err == nil || errors.Is(err, errNoEvictionCost):
		return "", "", ""
	case errors.Is(err, strconv.ErrRange):
		return key, value, "out of the int32 range"
	}
	return key, value, "not an integer"
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

// PoolScore is how a consolidation move was judged for one of its candidates' NodePools, for
// upstream's karpenter_consolidation_moves_total and karpenter_consolidation_score and its
// ConsolidationApproved event (controllers/disruption). Only a Balanced pool is scored; any
// other pool approves every move.
type PoolScore struct {
	NodePool string
	Policy   karpv1.ConsolidationPolicy
	Approved bool
	// Scored is true for a Balanced pool: Score is its SavedShare over its DisruptedShare.
	Scored                            bool
	Score, SavedShare, DisruptedShare float64
}

// MoveScore is a consolidation move that reached scoring in a pass: each single-node move
// found, and multi-node's chosen move (or, when it chose none, its last one Balanced refused),
// as upstream counts them.
type MoveScore struct {
	Candidates []*Candidate
	// Multi is true for a multi-node move (its ConsolidationApproved event is on the NodePool).
	Multi    bool
	Approved bool
	Pools    []PoolScore
}

// poolScores scores a move that removes the candidates and saves savings per hour for each of
// the candidates' NodePools, in name order: a Balanced pool against its totals, its share of
// the savings (split by the candidates' prices when the move spans pools) over its total
// price, against its candidates' disruption cost over its total, as upstream does. A move
// that saves nothing, or a Balanced pool that cannot be priced, scores 0: nothing shows the
// move is worth it. The tolerance lets a move exactly on the threshold (a uniform pool's
// half-price replacement) through despite rounding.
func (c *Cluster) poolScores(cands []*Candidate, savings float64) []PoolScore {
	type part struct {
		policy            karpv1.ConsolidationPolicy
		price, disruption float64
	}
	parts := map[string]*part{}
	total := 0.0
	for _, cand := range cands {
		total += cand.PricePerHour
		p := parts[cand.NodePoolName()]
		if p == nil {
			p = &part{policy: cand.NodePool.Spec.Disruption.ConsolidationPolicy}
			parts[cand.NodePoolName()] = p
		}
		p.price += cand.PricePerHour
		if p.policy == karpv1.ConsolidationPolicyBalanced {
			p.disruption += balancedNodeCost(cand.Pods)
		}
	}
	out := make([]PoolScore, 0, len(parts))
	for _, pool := range sortedKeys(parts) {
		p := parts[pool]
		ps := PoolScore{NodePool: pool, Policy: p.policy, Approved: true}
		if p.policy == karpv1.ConsolidationPolicyBalanced {
			ps.Scored = true
			if b := c.balance(pool); b.price > 0 && b.disruption > 0 && savings > 0 {
				share := savings
				if total > 0 && p.price < total {
					share = savings * p.price / total
				}
				ps.SavedShare, ps.DisruptedShare = share/b.price, p.disruption/b.disruption
				ps.Score = ps.SavedShare / ps.DisruptedShare
			}
			ps.Approved = savings > 0 && ps.Score >= 1/BalancedThreshold-1e-9
		}
		out = append(out, ps)
	}
	return out
}

// recordMove notes a consolidation move that reached scoring, for the controller's metrics
// and events.
func (c *Cluster) recordMove(cands []*Candidate, multi bool, pools []PoolScore) {
	approved := true
	for _, p := range pools {
		approved = approved && p.Approved
	}
	c.Scores = append(c.Scores, MoveScore{Candidates: cands, Multi: multi, Approved: approved, Pools: pools})
}

// balancedRefusal is why the Balanced policy refuses a move whose pools were scored so, ""
// when every pool approves (a pool not Balanced always does). Every Balanced source pool must
// approve: a permissive pool cannot carry a Balanced one's node along; the lowest score is
// the one told.
func balancedRefusal(pools []PoolScore, savings float64) string {
	var worst *PoolScore
	for i := range pools {
		if p := &pools[i]; p.Scored && (worst == nil || p.Score < worst.Score) {
			worst = p
		}
	}
	switch {
	case worst == nil:
		return ""
	case savings <= 0:
		return "Balanced: the move saves nothing"
	case !worst.Approved:
		return fmt.Sprintf("Balanced: score %.2f < %.2f (saves %.1f%% of the NodePool's cost for %.1f%% of its disruption cost)",
			worst.Score, 1/BalancedThreshold, 100*worst.SavedShare, 100*worst.DisruptedShare)
	}
	return ""
}
