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
	for _, np := range c.NodePools {
		if np.NodePool.IsStatic() {
			continue
		}
		if _, ok := scheduling.CheapestOffering(np.InstanceTypes, nil, total, cheaper); ok {
			return false, ""
		}
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
