package methods

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// Consolidation simulates with the solver, which on a large cluster costs a solve over every
// node per candidate (or prefix) weighed. Most candidates of a well-packed cluster cannot move,
// and these necessary conditions tell so without a solve: the simulation checks the same and
// more (requirements, topology, affinity), so a candidate they refuse it would refuse too.

// hopeless reports that single-node consolidation cannot move the candidate: neither delete it
// nor replace it with one node cheaper than it (never its own instance type; Spot by Spot only
// with SpotToSpotConsolidation). The reason says why.
func (c *Cluster) hopeless(cand *Candidate) (bool, string) {
	onDemandOnly := cand.CapacityType == karpv1.CapacityTypeSpot && !c.Options.SpotToSpotConsolidation
	ceiling := cand.PricePerHour * (1 - c.Options.MinSavingsFraction)
	keep := func(it *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
		return o.Available && o.Price < ceiling && (cand.InstanceType == nil || it.Name != cand.InstanceType.Name) &&
			(!onDemandOnly || o.CapacityType != karpv1.CapacityTypeSpot)
	}
	if c.unmovable([]*Candidate{cand}, keep) {
		return true, "its pods fit neither the room other nodes have nor one cheaper node"
	}
	return false, ""
}

// prefixHopeless reports that multi-node consolidation cannot remove the candidates: their
// pods fit neither the room of the other nodes nor, the rest, one node cheaper than the
// candidates together.
func (c *Cluster) prefixHopeless(cands []*Candidate) bool {
	price := 0.0
	for _, cand := range cands {
		price += cand.PricePerHour
	}
	ceiling := price * (1 - c.Options.MinSavingsFraction)
	return c.unmovable(cands, func(_ *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
		return o.Available && o.Price < ceiling
	})
}

// unmovable reports that the candidates' pods cannot go: the other nodes (with the room the
// pods waiting for a place take) have too few places for them, counting on each node only as
// many as its room holds of their smallest pod, and what is left over fits no node that a
// NodePool, within its requirements, launches in an offering keep allows.
func (c *Cluster) unmovable(cands []*Candidate, keep scheduling.OfferingFilter) bool {
	c.placeWaiting()
	gone := map[string]bool{}
	need := corev1.ResourceList{}
	var moving []*corev1.Pod
	// smallest is no larger than any of the pods in cpu and in memory (each the least of them).
	smallest := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	pods := 0
	for _, cand := range cands {
		gone[cand.Name()] = true
		for _, p := range append(append([]*corev1.Pod(nil), cand.Pods...), c.waiting[cand.Name()]...) {
			moving = append(moving, p)
			req := c.Requests.Of(p)
			scheduling.AddResources(need, req)
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if q, cur := req[name], smallest[name]; pods == 0 || q.Cmp(cur) < 0 {
					smallest[name] = q
				}
			}
			pods++
		}
	}
	if pods == 0 {
		return false
	}
	// Places elsewhere: on each other node, as many of the smallest pod as its room holds.
	room, places := corev1.ResourceList{}, 0
	for _, n := range c.Nodes {
		if gone[n.Name] {
			continue
		}
		free := c.freeOn(n)
		k := fitCount(smallest, free)
		if k == 0 {
			continue
		}
		places += k
		scheduling.AddResources(room, free)
	}
	rest := corev1.ResourceList{}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q := need[name].DeepCopy()
		q.Sub(room[name])
		// At least the pods without a place elsewhere, each no smaller than the smallest.
		if short := pods - places; short > 0 {
			least := smallest[name].DeepCopy()
			least.Mul(int64(short))
			if least.Cmp(q) > 0 {
				q = least
			}
		}
		if q.Sign() > 0 {
			rest[name] = q
		}
	}
	if len(rest) == 0 {
		return false
	}
	return !c.cheaperNode(moving, rest, keep)
}

// freeOn is the node's room less its pods and the pods waiting for a place put there (after
// placeWaiting), computed once per node. Callers must not change it.
func (c *Cluster) freeOn(n *scheduling.Node) corev1.ResourceList {
	if free, ok := c.free[n.Name]; ok {
		return free
	}
	if c.free == nil {
		c.free = map[string]corev1.ResourceList{}
	}
	free := n.Allocatable
	for _, p := range n.Pods {
		free = scheduling.Subtract(free, c.Requests.Of(p))
	}
	for _, p := range c.waiting[n.Name] {
		free = scheduling.Subtract(free, c.Requests.Of(p))
	}
	c.free[n.Name] = free
	return free
}

// fitCount is how many pods of these requests fit in free, by cpu and memory (at most 1000).
func fitCount(req, free corev1.ResourceList) int {
	n := 1000
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		r := req[name]
		if r.IsZero() {
			continue
		}
		f, ok := free[name]
		if !ok {
			return 0
		}
		n = min(n, int(f.MilliValue()/max(1, r.MilliValue())))
	}
	if ok, _ := scheduling.Fits(req, free); !ok {
		return 0
	}
	return n
}

// cheaperNode reports whether some NodePool that launches, and that could host one of the
// pods at least, could launch a node that holds requests, within its own requirements, in an
// offering keep allows.
func (c *Cluster) cheaperNode(pods []*corev1.Pod, requests corev1.ResourceList, keep scheduling.OfferingFilter) bool {
	for _, np := range c.NodePools {
		if np.NodePool.IsStatic() || !mayHostOne(np.NodePool, pods) {
			continue
		}
		reqs := scheduling.NewRequirements(np.NodePool.Spec.Template.Spec.Requirements...)
		if _, ok := scheduling.CheapestOffering(np.InstanceTypes, reqs, requests, keep); ok {
			return true
		}
	}
	return false
}

// mayHostOne reports whether a node of the NodePool might take one of the pods: one that
// tolerates its taints and whose node selector and first required affinity term (any term,
// when it has more) the pool's requirements, name and template labels do not rule out. On a
// cluster of several pools, most pools cannot take the pods of another's nodes, and their
// cheaper types say nothing of whether those pods can move.
func mayHostOne(np *karpv1.NodePool, pods []*corev1.Pod) bool {
	reqs := scheduling.NewRequirements(np.Spec.Template.Spec.Requirements...)
	reqs.Add(scheduling.NewRequirement(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, np.Name))
	for k, v := range np.Spec.Template.Labels {
		reqs.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpIn, v))
	}
	for _, p := range pods {
		if !scheduling.Tolerates(p, np.Spec.Template.Spec.Taints, false) {
			continue
		}
		if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil &&
			len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) > 1 {
			return true
		}
		if !reqs.RulesOut(solver.PodRequirements(p)) {
			return true
		}
	}
	return false
}
