package methods

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// simulation is what rescheduling some candidates' pods takes: the solver's placements on
// the other nodes and the new NodeClaims it would launch.
type simulation struct {
	result *solver.Result
	moves  []Move
	// unschedulable is the first pod the solver could not place, with why; "" when all fit.
	unschedulable string
}

// priceCap limits replacements to offerings cheaper than a price (consolidation); 0 is none.
type replacementRule struct {
	maxPrice float64
	// onDemandOnly forbids Spot replacements (Spot candidates without SpotToSpotConsolidation).
	onDemandOnly bool
	// excludeTypes are instance types a replacement may not be (the candidate's own).
	excludeTypes map[string]bool
	// cheapest keeps only the n cheapest instance types (Spot-to-Spot: 15); 0 keeps all.
	cheapest int
	// oneNode lets each NodePool launch one node at most (its nodes limit), for a
	// consolidation whose cheapest cover took several smaller nodes.
	oneNode bool
	// freed are capacity reservation slots the candidates free when they go (terminate-first).
	freed map[string]int
	// excludeFamilies are instance families a replacement may not be (a policy refused them).
	excludeFamilies map[string]bool
	// alsoGone are nodes that go too (other expired NodeClaims): none of the pods moves there.
	alsoGone map[string]bool
}

// Narrowing is how a gate that refused a command's replacements would have them: on-demand
// only (a Spot share would leave its range), or without some instance families (a budget
// denies them). The zero Narrowing narrows nothing.
type Narrowing struct {
	OnDemandOnly bool
	// Families are instance families the replacements may not be.
	Families []string
}

// Narrower is a CommandCheck that says how to narrow the replacements of a command it
// refused so that it might not refuse them; ok is false when narrowing cannot help (the
// refusal is about the candidates, or the cost).
type Narrower interface {
	Narrow(cmd *Command) (n Narrowing, ok bool)
}

// and is both narrowings at once.
func (n Narrowing) and(o Narrowing) Narrowing {
	out := Narrowing{OnDemandOnly: n.OnDemandOnly || o.OnDemandOnly, Families: append([]string(nil), n.Families...)}
	for _, f := range o.Families {
		if !slices.Contains(out.Families, f) {
			out.Families = append(out.Families, f)
		}
	}
	return out
}

// widens reports whether o narrows something n does not yet: trying again with both can
// give another answer.
func (n Narrowing) widens(o Narrowing) bool {
	if o.OnDemandOnly && !n.OnDemandOnly {
		return true
	}
	for _, f := range o.Families {
		if !slices.Contains(n.Families, f) {
			return true
		}
	}
	return false
}

// narrowed is the rule with the narrowing's restrictions too.
func (r replacementRule) narrowed(n Narrowing) replacementRule {
	r.onDemandOnly = r.onDemandOnly || n.OnDemandOnly
	if len(n.Families) > 0 {
		r.excludeFamilies = map[string]bool{}
		for _, f := range n.Families {
			r.excludeFamilies[f] = true
		}
	}
	return r
}

// simulate solves the candidates' pods onto every other node and in-flight NodeClaim that
// offers room (not being disrupted) and, when needed, new NodeClaims from the NodePools, within
// the rule. The pods waiting for a place (pending, or on deleting nodes) are where the solver
// first puts them (placeWaiting): they keep that room, and those placed on a candidate go with
// its pods. A pod placed on an in-flight NodeClaim or on a node not initialized and Ready makes
// the simulation unschedulable: the room is there, but not yet to count on.
func (c *Cluster) simulate(cands []*Candidate, rule replacementRule) (*simulation, error) {
	c.placeWaiting()
	gone := map[string]bool{}
	var pods []*corev1.Pod
	var taken []string
	for name := range rule.alsoGone {
		gone[name] = true
		taken = append(taken, name)
	}
	slices.Sort(taken)
	for _, cand := range cands {
		gone[cand.Name()] = true
		taken = append(taken, cand.Name())
		pods = append(pods, cand.Pods...)
		pods = append(pods, c.waiting[cand.Name()]...)
	}
	in := c.Options.Scheduling.Apply(&solver.Input{Pods: pods, Requests: c.Requests, GrowFreely: rule.oneNode, VolumeRequirements: c.volumeRequirements(), PodVolumes: c.podVolumes(),
		FreedReservations: rule.freed, TakenHostnames: taken, NamespaceLabels: c.namespaceLabels(), Catalog: c.nodeCatalog()})
	for _, n := range c.Nodes {
		if gone[n.Name] {
			continue
		}
		in.Nodes = append(in.Nodes, c.withWaiting(n))
	}
	for _, name := range sortedKeys(c.NodePools) {
		np := c.NodePools[name]
		if np.NodePool.IsStatic() {
			// Static pools launch only to keep their size (controllers/static).
			continue
		}
		usage := c.usage(name, gone)
		pool := np.NodePool
		if rule.oneNode {
			pool = pool.DeepCopy()
			if pool.Spec.Limits == nil {
				pool.Spec.Limits = karpv1.Limits{}
			}
			n := usage["nodes"]
			n.Add(*resourceQuantity(1))
			if cur, ok := pool.Spec.Limits["nodes"]; !ok || cur.Cmp(n) > 0 {
				pool.Spec.Limits["nodes"] = n
			}
		}
		in.NodePools = append(in.NodePools, &solver.NodePool{NodePool: pool, InstanceTypes: rule.filter(np.InstanceTypes),
			DaemonSetOverhead: np.DaemonSetOverhead, Usage: usage})
	}
	start := time.Now()
	res, err := solver.Solve(in)
	if c.Options.Solved != nil {
		c.Options.Solved(time.Since(start))
	}
	if err != nil {
		return nil, fmt.Errorf("simulating the rescheduling of %d pods: %w", len(pods), err)
	}
	sim := &simulation{result: res}
	if len(res.Unschedulable) > 0 {
		u := res.Unschedulable[0]
		sim.unschedulable = fmt.Sprintf("pod %s/%s would not schedule: %s", u.Pod.Namespace, u.Pod.Name, u.Reason)
	}
	for _, name := range sortedKeys(res.Existing) {
		for _, p := range res.Existing[name] {
			if sim.unschedulable == "" && c.uninitialized[name] {
				// As upstream: a command counts only on room that is up. A node that never
				// initializes (a replacement a rolled-back command left) would otherwise take
				// the pods of the node it was to replace.
				sim.unschedulable = fmt.Sprintf("pod %s/%s would move to %s, which is not initialized yet", p.Namespace, p.Name, name)
			}
			sim.moves = append(sim.moves, Move{Pod: p, To: name})
		}
	}
	for _, nc := range res.NodeClaims {
		for _, p := range nc.Pods {
			sim.moves = append(sim.moves, Move{Pod: p, To: nc.Hostname})
		}
	}
	return sim, nil
}

// withWaiting is the node with the waiting pods placeWaiting put on it, made once per Cluster
// so that every simulation sees the same node (and the solver's catalog knows it).
func (c *Cluster) withWaiting(n *scheduling.Node) *scheduling.Node {
	w := c.waiting[n.Name]
	if len(w) == 0 {
		return n
	}
	if cp, ok := c.waitingNodes[n.Name]; ok && cp.Name == n.Name {
		return cp
	}
	cp := *n
	cp.Pods = append(append([]*corev1.Pod(nil), n.Pods...), w...)
	if c.waitingNodes == nil {
		c.waitingNodes = map[string]*scheduling.Node{}
	}
	c.waitingNodes[n.Name] = &cp
	return &cp
}

// nodeCatalog keeps the nodes the simulations prepare, for the next simulations of the pass:
// the nodes that stay are the same from one candidate to the next.
func (c *Cluster) nodeCatalog() *solver.Catalog {
	if c.catalog == nil {
		c.catalog = solver.NewNodeCatalog()
	}
	return c.catalog
}

// namespaceLabels are the snapshot's namespaces' labels, for pod affinity namespaceSelectors.
func (c *Cluster) namespaceLabels() map[string]map[string]string {
	if c.snap == nil {
		return nil
	}
	if c.nsLabels == nil {
		c.nsLabels = c.snap.NamespaceLabels()
	}
	return c.nsLabels
}

// placeWaiting puts the pods waiting for a place (the snapshot's pending pods and the pods of
// its deleting nodes) where the solver would, on the nodes and in-flight NodeClaims that offer
// room, once per Cluster. Those that would need new nodes are left to the provisioner: the
// room they take there is room no command can count on either.
func (c *Cluster) placeWaiting() {
	if c.placed {
		return
	}
	c.placed = true
	if c.snap == nil || len(c.snap.Pods)+len(c.snap.Deleting) == 0 {
		return
	}
	pods := append(append([]*corev1.Pod(nil), c.snap.Pods...), c.snap.Deleting...)
	res, err := solver.Solve(c.Options.Scheduling.Apply(&solver.Input{Pods: pods, Nodes: c.Nodes, Requests: c.Requests, VolumeRequirements: c.volumeRequirements(), PodVolumes: c.podVolumes(), NamespaceLabels: c.namespaceLabels()}))
	if err != nil {
		return
	}
	c.waiting = res.Existing
}

// filter is the instance types a replacement may be, with the offerings the rule allows.
func (r replacementRule) filter(types []*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
	if r.maxPrice == 0 && !r.onDemandOnly && len(r.excludeTypes) == 0 && r.cheapest == 0 && len(r.excludeFamilies) == 0 {
		return types
	}
	var out []*cloudprovider.InstanceType
	for _, it := range types {
		if r.excludeTypes[it.Name] || r.excludeFamilies[planner.Family(it)] {
			continue
		}
		var offs cloudprovider.Offerings
		for _, o := range it.Offerings {
			if r.maxPrice > 0 && o.Price >= r.maxPrice {
				continue
			}
			if r.onDemandOnly && o.CapacityType == karpv1.CapacityTypeSpot {
				continue
			}
			offs = append(offs, o)
		}
		if len(offs.Available()) == 0 {
			continue
		}
		cp := *it
		cp.Offerings = offs
		out = append(out, &cp)
	}
	if r.cheapest > 0 && len(out) > r.cheapest {
		cheapestOf := func(it *cloudprovider.InstanceType) float64 {
			o, _ := it.Offerings.Available().Cheapest()
			return o.Price
		}
		sortByPrice(out, cheapestOf)
		out = out[:r.cheapest]
	}
	return out
}

// usage is what the NodePool's nodes and in-flight NodeClaims hold against its limits, the
// gone ones aside (snapshot.Usage, the one definition).
func (c *Cluster) usage(pool string, gone map[string]bool) corev1.ResourceList {
	if c.snap == nil {
		return corev1.ResourceList{}
	}
	u := c.snap.Usage(pool, func(name string) bool { return gone[name] || c.removed[name] })
	// The replacements of earlier commands (Apply) are not in the snapshot.
	for _, cand := range c.Candidates {
		if cand.NodePool.Name == pool && !gone[cand.Name()] && c.applied[cand.Name()] && cand.InstanceType != nil {
			scheduling.AddResources(u, cand.InstanceType.Capacity)
			n := u["nodes"]
			n.Add(*resourceQuantity(1))
			u["nodes"] = n
		}
	}
	return u
}

// volumeRequirements are what the pods' volumes require of their nodes (the snapshot's).
func (c *Cluster) volumeRequirements() map[string][]corev1.NodeSelectorRequirement {
	if c.snap == nil {
		return nil
	}
	return c.snap.VolumeRequirements
}

// podVolumes are the volumes the pods attach, by driver (the snapshot's).
func (c *Cluster) podVolumes() map[string]scheduling.Volumes {
	if c.snap == nil {
		return nil
	}
	return c.snap.PodVolumes
}
