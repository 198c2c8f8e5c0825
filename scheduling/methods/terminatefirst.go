package methods

import (
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// terminateFirst is upstream's terminate-first (v1.15, RFC #3203; drift's and repair's) for a candidate none of
// whose replacements can launch while it runs: when it holds a slot in a capacity reservation
// and its pods all fit once that slot is free, the command deletes it with no replacement,
// and the provisioner launches for its pods, pending once it has drained, into the slot it
// freed. A node in no reservation, or whose pods do not fit even then, stays: nil, with
// blocked, the reason the replacement could not be simulated.
func (c *Cluster) terminateFirst(r Reason, cand *Candidate, blocked string) (*Command, string, error) {
	id := cand.Node.Labels[karpv1.LabelCapacityReservationID]
	if cand.CapacityType != karpv1.CapacityTypeReserved || id == "" {
		return nil, blocked, nil
	}
	sim, err := c.simulate([]*Candidate{cand}, replacementRule{freed: map[string]int{id: 1}})
	if err != nil {
		return nil, "", err
	}
	if sim.unschedulable != "" {
		return nil, blocked, nil
	}
	// The pods the remaining nodes take move there; the others wait for the provisioner, which
	// is expected to launch the refill for them.
	return &Command{Reason: r, Decision: DecisionDelete, Candidates: []*Candidate{cand}, TerminateFirst: TerminateFirstNoReservedCapacity,
		Moves: sim.moves, Refill: sim.result.NodeClaims}, "", nil
}
