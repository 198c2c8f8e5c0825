package disruption

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

// What a consolidation tells, with upstream's names (docs/upstream.md, "Events"): the scored
// moves as karpenter_consolidation_moves_total and karpenter_consolidation_score and, for a
// Balanced pool's approved move, ConsolidationApproved (on the NodeClaim for a single-node
// move, on the NodePool for a multi-node one); a command found as ConsolidationCandidate and,
// when validation drops it, ConsolidationRejected, on each candidate's NodeClaim.
const (
	decisionApproved = "approved"
	decisionRejected = "rejected"
)

// noteScores exports the pass's scored moves and tells the approved Balanced ones.
func (c *Controller) noteScores(snap *methods.Cluster) {
	for _, m := range snap.Scores {
		move := decisionRejected
		if m.Approved {
			move = decisionApproved
		}
		for _, p := range m.Pools {
			metrics.ConsolidationMoves.WithLabelValues(move, p.NodePool, string(p.Policy)).Inc()
			if !p.Scored {
				continue
			}
			decision := decisionRejected
			if p.Approved {
				decision = decisionApproved
			}
			metrics.ConsolidationScore.WithLabelValues(decision, p.NodePool, string(p.Policy)).Observe(p.Score)
			if !p.Approved {
				// Refusals are many under Balanced: they are counted and noted as
				// Unconsolidatable, not told one by one (as upstream).
				continue
			}
			msg := fmt.Sprintf("score %.2f >= threshold %.2f (k: %d, savings %.1f%%, disruption %.1f%%)",
				p.Score, 1/methods.BalancedThreshold, int(methods.BalancedThreshold), 100*p.SavedShare, 100*p.DisruptedShare)
			for _, cand := range m.Candidates {
				if cand.NodePoolName() != p.NodePool {
					continue
				}
				if m.Multi {
					c.recorder.Eventf(cand.NodePool, nil, corev1.EventTypeNormal, "ConsolidationApproved", "Disruption", "%s", msg)
					break
				}
				if cand.NodeClaim != nil {
					c.recorder.Eventf(cand.NodeClaim, nil, corev1.EventTypeNormal, "ConsolidationApproved", "Disruption", "%s", msg)
				}
			}
		}
	}
}

// noteCandidate tells each candidate of a consolidation command found, before it is
// validated.
func (c *Controller) noteCandidate(cmd *methods.Command) {
	for _, cand := range cmd.Candidates {
		c.tell(cand, corev1.EventTypeNormal, "ConsolidationCandidate", "Consolidation candidate: %s (savings: $%.2f)", commandForNode(cmd, cand), cmd.Savings())
	}
}

// noteRejected tells each candidate of a consolidation command validation dropped, and why.
func (c *Controller) noteRejected(cmd *methods.Command, why string) {
	metrics.DisruptionFailedValidations.WithLabelValues(cmd.ConsolidationType).Add(float64(len(cmd.Candidates)))
	for _, cand := range cmd.Candidates {
		c.tell(cand, corev1.EventTypeNormal, "ConsolidationRejected", "Consolidation rejected: %s, reason: %s (savings: $%.2f)", commandForNode(cmd, cand), why, cmd.Savings())
	}
}

// commandForNode is the command as one of its candidates sees it, in upstream's words:
// "delete: [a]", "replace: [a] -> [1 replacement]", or, for a multi-node command,
// "delete: [a] (part of 3-node consolidation)".
func commandForNode(cmd *methods.Command, cand *methods.Candidate) string {
	if len(cmd.Candidates) > 1 {
		return fmt.Sprintf("%s: [%s] (part of %d-node consolidation)", cmd.Decision, cand.Name(), len(cmd.Candidates))
	}
	if n := len(cmd.Replacements); n > 0 {
		plural := "replacements"
		if n == 1 {
			plural = "replacement"
		}
		return fmt.Sprintf("%s: [%s] -> [%d %s]", cmd.Decision, strings.Join(names(cmd.Candidates), ", "), n, plural)
	}
	return fmt.Sprintf("%s: [%s]", cmd.Decision, strings.Join(names(cmd.Candidates), ", "))
}
