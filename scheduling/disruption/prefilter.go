package disruption

import (
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// hopeless reports, without simulating, that single-node consolidation cannot move the
// candidate: neither delete it (some pod is larger than the most room any other node has) nor
// replace it (no instance type of any NodePool holds all its pods for less than it costs).
// Both are necessary conditions the simulation would check with every constraint: they only
// spare it the candidates it would refuse anyway, which on a large, well-packed cluster are
// most of them. The reason says which.
func (c *Cluster) hopeless(cand *Candidate) (bool, string) {
	c.roomOnce()
	total := corev1.ResourceList{}
	fitsSomewhere := true
	for _, p := range cand.Pods {
		req := c.Requests.Of(p)
		scheduling.AddResources(total, req)
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			q := req[name]
			if free, ok := c.mostRoom[name]; ok && q.Cmp(free) > 0 {
				fitsSomewhere = false
			}
		}
	}
	if fitsSomewhere {
		return false, ""
	}
	ceiling := cand.PricePerHour * (1 - c.Options.MinSavingsFraction)
	onDemandOnly := cand.CapacityType == karpv1.CapacityTypeSpot && !c.Options.SpotToSpotConsolidation
	cheaper := func(it *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
		return o.Available && o.Price < ceiling && (cand.InstanceType == nil || it.Name != cand.InstanceType.Name) &&
			(!onDemandOnly || o.CapacityType != karpv1.CapacityTypeSpot)
	}
	if c.cheaperNode(total, cheaper) {
		return false, ""
	}
	return true, "no other node has room for its largest pod, and no cheaper instance type holds its pods"
}

// roomOnce computes, once per Cluster, the most free cpu and memory any node offers.
func (c *Cluster) roomOnce() {
	if c.mostRoom != nil {
		return
	}
	c.mostRoom = corev1.ResourceList{}
	for _, n := range c.Nodes {
		free := n.Allocatable
		for _, p := range n.Pods {
			free = scheduling.Subtract(free, c.Requests.Of(p))
		}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := free[name]; ok {
				if cur, seen := c.mostRoom[name]; !seen || q.Cmp(cur) > 0 {
					c.mostRoom[name] = q
				}
			}
		}
	}
}

// prefixHopeless reports, without simulating, that multi-node consolidation cannot remove the
// candidates: their pods need more than the room of the other nodes that could take even
// their smallest pod, and what is left fits no instance type of any NodePool that costs less
// than the candidates together. A necessary condition only, as hopeless: on a cluster of full
// nodes it spares the binary search its solves.
func (c *Cluster) prefixHopeless(cands []*Candidate) bool {
	gone := map[string]bool{}
	need := corev1.ResourceList{}
	var smallest corev1.ResourceList
	price := 0.0
	for _, cand := range cands {
		gone[cand.Name()] = true
		price += cand.PricePerHour
		for _, p := range cand.Pods {
			req := c.Requests.Of(p)
			scheduling.AddResources(need, req)
			if smallest == nil || req.Cpu().Cmp(*smallest.Cpu()) < 0 {
				smallest = req
			}
		}
	}
	if smallest == nil {
		return false
	}
	// The room of the other nodes, each counted only if the smallest pod fits there.
	room := corev1.ResourceList{}
	for _, n := range c.Nodes {
		if gone[n.Name] {
			continue
		}
		free := n.Allocatable
		for _, p := range n.Pods {
			free = scheduling.Subtract(free, c.Requests.Of(p))
		}
		if ok, _ := scheduling.Fits(smallest, free); ok {
			scheduling.AddResources(room, free)
		}
	}
	rest := corev1.ResourceList{}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q := need[name].DeepCopy()
		q.Sub(room[name])
		if q.Sign() > 0 {
			rest[name] = q
		}
	}
	if len(rest) == 0 {
		return false
	}
	ceiling := price * (1 - c.Options.MinSavingsFraction)
	return !c.cheaperNode(rest, func(_ *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
		return o.Available && o.Price < ceiling
	})
}

// cheaperNode reports whether some NodePool that launches could launch a node that holds
// requests, within its own requirements, in an offering keep allows.
func (c *Cluster) cheaperNode(requests corev1.ResourceList, keep scheduling.OfferingFilter) bool {
	for _, np := range c.NodePools {
		if np.NodePool.IsStatic() {
			continue
		}
		reqs := scheduling.NewRequirements(np.NodePool.Spec.Template.Spec.Requirements...)
		if _, ok := scheduling.CheapestOffering(np.InstanceTypes, reqs, requests, keep); ok {
			return true
		}
	}
	return false
}
