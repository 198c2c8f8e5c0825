package methods

import (
	"context"
	"sort"
)

// Drift replaces nodes that no longer match their NodePool: the template hash differs from the
// NodeClaim's, the node's labels no longer meet the NodePool's requirements, or the cloud
// provider says the instance drifted (a changed node class). Empty drifted nodes go first, all
// the Drifted budget allows; then one node at a time, the longest drifted first, with its
// replacements launched (and initialized, by the queue) before it drains. With
// TerminateFirstDrift, a reserved node whose pods fit nowhere else goes first when the slot
// it frees in its reservation takes them (terminateFirst).
type Drift struct{}

// Reason implements Method.
func (Drift) Reason() Reason { return ReasonDrifted }

// Consolidation implements Method.
func (Drift) Consolidation() string { return "" }

// Qualifies implements Method.
func (Drift) Qualifies(_ *Cluster, cand *Candidate) bool {
	return cand.DriftReason != "" && cand.Blocked == ""
}

// Commands implements Method.
func (Drift) Commands(ctx context.Context, c *Cluster, candidates []*Candidate, budgets *Budgets) ([]*Command, error) {
	sorted := append([]*Candidate(nil), candidates...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if !sorted[i].DriftedSince.Equal(sorted[j].DriftedSince) {
			return sorted[i].DriftedSince.Before(sorted[j].DriftedSince)
		}
		return sorted[i].Name() < sorted[j].Name()
	})
	if empty := emptyCommands(ctx, c, sorted, budgets, ReasonDrifted, ""); len(empty) > 0 {
		return empty, nil
	}
	return c.firstCommand(ctx, sorted, budgets, ReasonDrifted, func(cand *Candidate, narrow Narrowing) (*Command, string, error) {
		cmd, why, err := c.replacing(ReasonDrifted, []*Candidate{cand}, replacementRule{}.narrowed(narrow))
		if cmd != nil || err != nil || !c.Options.TerminateFirstDrift {
			return cmd, why, err
		}
		return c.terminateFirst(ReasonDrifted, cand, why)
	})
}
