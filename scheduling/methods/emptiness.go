package methods

import (
	"context"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// Emptiness deletes nodes with no pod to reschedule (DaemonSet and mirror pods do not count)
// once consolidateAfter has passed, under either consolidation policy: all the empty nodes of
// a NodePool its Empty budget allows, in one command per NodePool.
type Emptiness struct{}

// Reason implements Method.
func (Emptiness) Reason() Reason { return ReasonEmpty }

// Consolidation implements Method.
func (Emptiness) Consolidation() string { return "empty" }

// Qualifies implements Method.
func (Emptiness) Qualifies(c *Cluster, cand *Candidate) bool {
	return len(cand.Pods) == 0 && cand.Blocked == "" && consolidatable(c, cand)
}

// Commands implements Method.
func (m Emptiness) Commands(ctx context.Context, c *Cluster, candidates []*Candidate, budgets *Budgets) ([]*Command, error) {
	return emptyCommands(ctx, c, candidates, budgets, ReasonEmpty, "empty"), nil
}

// emptyCommands deletes, per NodePool, as many of the empty candidates as its budget for the
// reason allows, in one command each: for Empty the most expensive first, otherwise in the
// candidates' order.
func emptyCommands(ctx context.Context, c *Cluster, candidates []*Candidate, budgets *Budgets, r Reason, consolidationType string) []*Command {
	byPool := map[string][]*Candidate{}
	for _, cand := range candidates {
		if len(cand.Pods) != 0 {
			continue
		}
		if b, ok := c.holdsBuffer(cand); ok && r == ReasonEmpty {
			// Empty of pods, but it is the room a CapacityBuffer keeps: deleting it would only
			// have the provisioner launch it again. Consolidation may still replace it with
			// cheaper room (its simulation moves the virtual pods), and drift deletes it (the
			// provisioner launches the room again from the current spec).
			c.note(cand, "it holds the room of CapacityBuffer "+b)
			continue
		}
		byPool[cand.NodePoolName()] = append(byPool[cand.NodePoolName()], cand)
	}
	var out []*Command
	for _, pool := range sortedKeys(byPool) {
		cands := byPool[pool]
		if r == ReasonEmpty {
			// The most expensive first (an empty node's savings ratio is its price), as
			// upstream: a budget that lets only some go removes the most cost. Drift keeps its
			// own order (the longest drifted first).
			bySavings(cands, nil)
		}
		n := min(len(cands), budgets.Allowed(pool, r))
		if n == 0 {
			for _, cand := range cands {
				c.note(cand, "the NodePool's disruption budget allows no more "+string(r)+" disruptions now")
			}
			continue
		}
		cmd := &Command{Reason: r, Decision: DecisionDelete, Candidates: cands[:n], ConsolidationType: consolidationType}
		if c.admit(ctx, cmd) {
			budgets.Take(pool, n)
			out = append(out, cmd)
		}
	}
	return out
}

// holdsBuffer names a CapacityBuffer whose virtual pods wait for the candidate's room
// (placeWaiting); ok is false when none does.
func (c *Cluster) holdsBuffer(cand *Candidate) (string, bool) {
	c.placeWaiting()
	for _, p := range c.waiting[cand.Name()] {
		if key, ok := scheduling.BufferOf(p); ok {
			return key.String(), true
		}
	}
	return "", false
}

// consolidatable reports whether consolidation may look at the candidate: its NodePool's
// consolidateAfter is not Never and has passed since a pod last came or went.
func consolidatable(c *Cluster, cand *Candidate) bool {
	after := cand.NodePool.Spec.Disruption.ConsolidateAfter.Duration
	if after == nil {
		return false
	}
	return cand.LastPodEvent.IsZero() || !c.Now.Before(cand.LastPodEvent.Add(*after))
}

// underutilizedAllowed reports whether the NodePool's policy lets consolidation remove or
// replace nodes that still run pods.
func underutilizedAllowed(np *karpv1.NodePool) bool {
	return np.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmpty
}
