package disruption

import (
	"context"
)

// Expiration replaces nodes whose NodePool's expireAfter has passed since they were created.
// It is forceful: budgets, do-not-disrupt and PDBs do not hold it back (the drain still waits
// for them, within terminationGracePeriod). Each expired node is its own command, with the
// replacements its pods need; pods that fit nowhere are left to the provisioner.
type Expiration struct{}

// Reason implements Method.
func (Expiration) Reason() Reason { return ReasonExpired }

// Consolidation implements Method.
func (Expiration) Consolidation() string { return "" }

// Qualifies implements Method.
func (Expiration) Qualifies(c *Cluster, cand *Candidate) bool {
	d := cand.NodePool.Spec.Template.Spec.ExpireAfter.Duration
	return d != nil && !c.Now.Before(cand.CreatedAt.Add(*d))
}

// Commands implements Method.
func (Expiration) Commands(ctx context.Context, c *Cluster, candidates []*Candidate, _ *Budgets) ([]*Command, error) {
	var out []*Command
	for _, cand := range candidates {
		sim, err := c.simulate([]*Candidate{cand}, replacementRule{})
		if err != nil {
			return nil, err
		}
		cmd := c.command(ReasonExpired, []*Candidate{cand}, sim)
		if c.admit(ctx, cmd) {
			out = append(out, cmd)
		}
	}
	return out, nil
}
