package methods

import (
	"context"
	"time"
)

// ExpiresAt is when the candidate's NodeClaim expires: its creation plus its own
// spec.expireAfter, set at launch from the NodePool's template (a node without a NodeClaim
// takes the template's); zero when it never does. controllers/nodeclaim/expiration deletes
// the NodeClaim then, whatever budgets or do-not-disrupt say.
func (cand *Candidate) ExpiresAt() time.Time {
	expireAfter := cand.NodePool.Spec.Template.Spec.ExpireAfter
	if cand.NodeClaim != nil {
		expireAfter = cand.NodeClaim.Spec.ExpireAfter
	}
	if expireAfter.Duration == nil {
		return time.Time{}
	}
	return cand.CreatedAt.Add(*expireAfter.Duration)
}

// Expirations are what the expiration controller's deletions amount to, as commands, for a
// simulation of the cluster (karpenterctl simulate --disrupt): one per expired candidate,
// with the capacity the provisioner would then launch for its pods (none of them counting on
// the room of another node that expires with it). They are not a method of
// a pass; budgets, do-not-disrupt and PodDisruptionBudgets do not hold them back.
func (c *Cluster) Expirations(ctx context.Context) ([]*Command, error) {
	var expired []*Candidate
	for _, cand := range c.Candidates {
		if at := cand.ExpiresAt(); !at.IsZero() && !c.Now.Before(at) {
			expired = append(expired, cand)
		}
	}
	var out []*Command
	for _, cand := range expired {
		// The other expired nodes go too: no pod counts on their room.
		others := map[string]bool{}
		for _, o := range expired {
			if o != cand {
				others[o.Name()] = true
			}
		}
		sim, err := c.simulate([]*Candidate{cand}, replacementRule{alsoGone: others})
		if err != nil {
			return nil, err
		}
		out = append(out, c.command(ReasonExpired, []*Candidate{cand}, sim))
	}
	return out, nil
}
