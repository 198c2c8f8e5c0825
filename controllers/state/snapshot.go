package state

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// Snapshot is the cluster as it stands now, in the terms scheduling uses: the pods to place,
// the nodes and in-flight NodeClaims with the pods on them, and the NodePools that can launch.
// The provisioner turns it into the solver's input; disruption will simulate on it.
type Snapshot struct {
	// Pods are the pending pods to place.
	Pods []*corev1.Pod
	// Nodes are the nodes that offer room and the in-flight NodeClaims, with the pods bound
	// or nominated to them.
	Nodes []*scheduling.Node
	// NodePools are those that can launch (not being deleted, node class ready), by name.
	NodePools []*NodePool
	// DaemonSets are the pod templates of the cluster's DaemonSets.
	DaemonSets []corev1.PodTemplateSpec
	// Requests are the requests of every pod in Pods and on Nodes, computed once.
	Requests *scheduling.PodRequestCache
	// Displaced counts the pods left out while they wait for kube-scheduler, and RetryAfter
	// says when the first of them is solved again.
	Displaced  int
	RetryAfter time.Duration
}

// NodePool is a NodePool that can launch, with its instance types and what its NodeClaims
// already hold (including "nodes"), for its limits.
type NodePool struct {
	NodePool      *karpv1.NodePool
	InstanceTypes []*cloudprovider.InstanceType
	Usage         corev1.ResourceList
}

// NodePool is the named NodePool of the snapshot, nil when it cannot launch.
func (s *Snapshot) NodePool(name string) *karpv1.NodePool {
	for _, np := range s.NodePools {
		if np.NodePool.Name == name {
			return np.NodePool
		}
	}
	return nil
}

// InstanceTypes are the instance types of each NodePool that can launch.
func (s *Snapshot) InstanceTypes() [][]*cloudprovider.InstanceType {
	out := make([][]*cloudprovider.InstanceType, 0, len(s.NodePools))
	for _, np := range s.NodePools {
		out = append(out, np.InstanceTypes)
	}
	return out
}

// Snapshot lists the pending pods and what they could be placed on: existing nodes (with the
// pods bound or nominated to them), in-flight NodeClaims, and every ready NodePool with its
// instance types, usage and the cluster's DaemonSets. With no pod pending it lists no more.
func (c *Cluster) Snapshot(ctx context.Context, cp cloudprovider.CloudProvider) (*Snapshot, error) {
	return c.snapshot(ctx, cp, true)
}

// Placed is what runs and what is launching, whether or not pods are pending, for the policy
// status controller's cost attribution: the nodes and in-flight NodeClaims with their pods and
// prices. It skips what only placing pods needs (DaemonSets, NodePool usage).
func (c *Cluster) Placed(ctx context.Context, cp cloudprovider.CloudProvider) (*Snapshot, error) {
	return c.snapshot(ctx, cp, false)
}

func (c *Cluster) snapshot(ctx context.Context, cp cloudprovider.CloudProvider, forPending bool) (*Snapshot, error) {
	l, err := c.list(ctx, forPending)
	if err != nil || l == nil {
		return &Snapshot{Requests: scheduling.NewPodRequestCache()}, err
	}
	snap := &Snapshot{Requests: scheduling.NewPodRequestCache()}
	typesOf := instanceTypes(ctx, cp, l.pools)
	nodes := indexNodes(l.nodes)
	claims := indexClaims(l.claims, nodes)
	a := c.assign(l.pods, nodes, claims)
	snap.Pods = a.pending
	snap.Displaced, snap.RetryAfter = c.holdNominations(l.nodes, nodes, claims, a, snap)
	snap.Nodes = append(existingNodes(l.nodes, nodes, claims, a), inFlightNodes(l.claims, claims, a, typesOf)...)
	if forPending {
		for _, ds := range l.daemonSets {
			snap.DaemonSets = append(snap.DaemonSets, ds.Spec.Template)
		}
	}
	snap.NodePools = nodePools(l.pools, typesOf, nodePoolUsage(l.claims))
	return snap, nil
}

// listing is what a snapshot reads from the caches.
type listing struct {
	pods       []corev1.Pod
	nodes      []corev1.Node
	claims     []karpv1.NodeClaim
	pools      []karpv1.NodePool
	daemonSets []appsv1.DaemonSet
}

// list reads the caches; nil when forPending and no pod is pending. It forgets the
// nominations of pods that settled, whatever it returns.
func (c *Cluster) list(ctx context.Context, forPending bool) (*listing, error) {
	listed := c.clock.Now()
	var pods corev1.PodList
	if err := c.client.List(ctx, &pods); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	if pending := c.forgetSettled(pods.Items, listed); forPending && pending == 0 {
		return nil, nil
	}
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var claims karpv1.NodeClaimList
	if err := c.client.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	var pools karpv1.NodePoolList
	if err := c.client.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("listing nodepools: %w", err)
	}
	l := &listing{pods: pods.Items, nodes: nodes.Items, claims: c.withCreated(claims.Items), pools: pools.Items}
	if forPending {
		var daemonSets appsv1.DaemonSetList
		if err := c.client.List(ctx, &daemonSets); err != nil {
			return nil, fmt.Errorf("listing daemonsets: %w", err)
		}
		l.daemonSets = daemonSets.Items
	}
	sort.Slice(l.pools, func(i, j int) bool { return l.pools[i].Name < l.pools[j].Name })
	return l, nil
}

// instanceTypes asks the provider for each NodePool's instance types, once per snapshot; a
// NodePool whose node class is not ready has none.
func instanceTypes(ctx context.Context, cp cloudprovider.CloudProvider, pools []karpv1.NodePool) map[string][]*cloudprovider.InstanceType {
	typesOf := map[string][]*cloudprovider.InstanceType{}
	for i := range pools {
		if its, err := cp.GetInstanceTypes(ctx, &pools[i]); err == nil {
			typesOf[pools[i].Name] = its
		}
	}
	return typesOf
}

// nodeIndex finds the nodes that count: those that report what they can allocate (a node's
// status comes after the node), and cordoned or deleted ones, which offer no room but still
// stand for their NodeClaims. usable are the nodes that offer room, with since when each is
// Ready (zero: not Ready yet).
type nodeIndex struct {
	byName, byID map[string]*corev1.Node
	usable       map[string]time.Time
}

func indexNodes(nodes []corev1.Node) nodeIndex {
	idx := nodeIndex{byName: map[string]*corev1.Node{}, byID: map[string]*corev1.Node{}, usable: map[string]time.Time{}}
	for i := range nodes {
		n := &nodes[i]
		if len(n.Status.Allocatable) == 0 && n.DeletionTimestamp == nil && !n.Spec.Unschedulable {
			continue
		}
		idx.byName[n.Name] = n
		if n.Spec.ProviderID != "" {
			idx.byID[n.Spec.ProviderID] = n
		}
		if n.DeletionTimestamp == nil && !n.Spec.Unschedulable {
			idx.usable[n.Name] = time.Time{}
			if ready, since := scheduling.NodeReady(n); ready {
				idx.usable[n.Name] = since
			}
		}
	}
	return idx
}

// claimIndex pairs NodeClaims with their Nodes. A NodeClaim is in flight, not being deleted,
// until its Node (found by name or provider ID) is there; from then on the Node stands for it.
// nodeOf names each NodeClaim's Node (a nomination names the NodeClaim it launched for, and
// holds on its Node once that is there); claimOf is the other way round.
type claimIndex struct {
	inFlight map[string]bool
	nodeOf   map[string]string
	claimOf  map[string]*karpv1.NodeClaim
}

func indexClaims(claims []karpv1.NodeClaim, nodes nodeIndex) claimIndex {
	idx := claimIndex{inFlight: map[string]bool{}, nodeOf: map[string]string{}, claimOf: map[string]*karpv1.NodeClaim{}}
	for i := range claims {
		nc := &claims[i]
		n := nodes.byName[nc.Status.NodeName]
		if n == nil {
			n = nodes.byID[nc.Status.ProviderID]
		}
		switch {
		case n != nil:
			idx.nodeOf[nc.Name], idx.claimOf[n.Name] = n.Name, nc
		case nc.DeletionTimestamp == nil:
			idx.inFlight[nc.Name] = true
		}
	}
	return idx
}

// assignment is where each pod is: bound to a node, nominated to an in-flight NodeClaim or to
// a node (held only while the node has room, see holdNominations), or pending.
type assignment struct {
	byNode, byClaim, nominatedOn map[string][]*corev1.Pod
	pending                      []*corev1.Pod
}

func (c *Cluster) assign(pods []corev1.Pod, nodes nodeIndex, claims claimIndex) assignment {
	a := assignment{byNode: map[string][]*corev1.Pod{}, byClaim: map[string][]*corev1.Pod{}, nominatedOn: map[string][]*corev1.Pod{}}
	for i := range pods {
		p := &pods[i]
		switch {
		case p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed:
			a.byNode[p.Spec.NodeName] = append(a.byNode[p.Spec.NodeName], p)
		case Provisionable(p):
			// A nominated pod keeps its room where the solver put it, for as long as its
			// nomination holds; then, or if its target is gone, it is solved again.
			target, at, ok := c.nominatedTo(p)
			if name, launched := claims.nodeOf[target]; launched {
				target = name
			}
			ready, onNode := nodes.usable[target]
			switch {
			case ok && claims.inFlight[target]:
				a.byClaim[target] = append(a.byClaim[target], p)
			case ok && onNode && (ready.IsZero() || c.clock.Since(later(at, ready)) <= ExistingNominationTTL):
				a.nominatedOn[target] = append(a.nominatedOn[target], p)
			default:
				a.pending = append(a.pending, p)
			}
		}
	}
	return a
}

// holdNominations keeps a nomination to a registered node only while the node has room for
// the pod besides the pods bound there; a displaced pod waits out the displaced grace, then
// is solved again (appended to snap.Pods). A pod kube-scheduler refused once its node was
// schedulable is displaced too. It returns how many pods wait, and for how long the first.
func (c *Cluster) holdNominations(list []corev1.Node, nodes nodeIndex, claims claimIndex, a assignment, snap *Snapshot) (int, time.Duration) {
	displaced, retryAfter := 0, time.Duration(0)
	for i := range list {
		name := list[i].Name
		free := list[i].Status.Allocatable
		for _, p := range a.byNode[name] {
			free = scheduling.Subtract(free, snap.Requests.Of(p))
		}
		// Since when kube-scheduler could bind to the node: its NodeClaim's initialization, or
		// for a node Karpenter did not launch, its readiness.
		schedulable := nodes.usable[name]
		if nc := claims.claimOf[name]; nc != nil {
			schedulable = time.Time{}
			if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeInitialized); cond != nil && cond.Status == metav1.ConditionTrue {
				schedulable = cond.LastTransitionTime.Time
			}
		}
		for _, p := range a.nominatedOn[name] {
			req := snap.Requests.Of(p)
			if ok, _ := scheduling.Fits(req, free); ok && !c.rejectedSince(p, schedulable) {
				free = scheduling.Subtract(free, req)
				a.byNode[name] = append(a.byNode[name], p)
				continue
			}
			wait := c.displacedGrace
			if ready := nodes.usable[name]; !ready.IsZero() {
				wait -= c.clock.Since(ready)
			}
			if wait <= 0 {
				snap.Pods = append(snap.Pods, p)
				continue
			}
			displaced++
			if retryAfter == 0 || wait < retryAfter {
				retryAfter = wait
			}
		}
	}
	return displaced, retryAfter
}

// existingNodes are the nodes that offer room, with the pods bound or held there. While its
// NodeClaim initializes, a node's startup taints and the not-ready taint do not count: they
// will go.
func existingNodes(list []corev1.Node, nodes nodeIndex, claims claimIndex, a assignment) []*scheduling.Node {
	var out []*scheduling.Node
	for i := range list {
		n := &list[i]
		if _, ok := nodes.usable[n.Name]; !ok {
			continue
		}
		initializing := claims.claimOf[n.Name]
		if initializing != nil && meta.IsStatusConditionTrue(initializing.Status.Conditions, karpv1.ConditionTypeInitialized) {
			initializing = nil
		}
		out = append(out, &scheduling.Node{Name: n.Name, Labels: n.Labels, Taints: schedulableTaints(n, initializing),
			Allocatable: n.Status.Allocatable, Pods: a.byNode[n.Name]})
	}
	return out
}

// inFlightNodes are the in-flight NodeClaims with the pods nominated to them, priced and sized
// by what they launched, or before launch by what a launch would pick.
func inFlightNodes(list []karpv1.NodeClaim, claims claimIndex, a assignment, typesOf map[string][]*cloudprovider.InstanceType) []*scheduling.Node {
	var out []*scheduling.Node
	for i := range list {
		nc := &list[i]
		if !claims.inFlight[nc.Name] {
			continue
		}
		price, launchAlloc := launchOffer(nc, typesOf[nc.Labels[karpv1.NodePoolLabelKey]])
		alloc := nc.Status.Allocatable
		if len(alloc) == 0 {
			alloc = launchAlloc
		}
		if len(alloc) == 0 {
			alloc = nc.Spec.Resources.Requests
		}
		labels := map[string]string{corev1.LabelHostname: nc.Name}
		for k, v := range nc.Labels {
			labels[k] = v
		}
		out = append(out, &scheduling.Node{Name: nc.Name, Labels: labels, Taints: nc.Spec.Taints, Allocatable: alloc,
			Pods: a.byClaim[nc.Name], InFlight: true, PricePerHour: price})
	}
	return out
}

// nodePoolUsage is what each NodePool's NodeClaims hold, with "nodes", against its limits.
func nodePoolUsage(claims []karpv1.NodeClaim) map[string]corev1.ResourceList {
	usage := map[string]corev1.ResourceList{}
	for i := range claims {
		nc := &claims[i]
		pool := nc.Labels[karpv1.NodePoolLabelKey]
		u := usage[pool]
		if u == nil {
			u = corev1.ResourceList{}
			usage[pool] = u
		}
		scheduling.AddResources(u, nc.Status.Capacity)
		scheduling.AddResources(u, corev1.ResourceList{"nodes": *resource.NewQuantity(1, resource.DecimalSI)})
	}
	return usage
}

// nodePools are the NodePools that can launch: not being deleted, with instance types (a
// NodePool whose node class is not ready launches nothing; the others still do).
func nodePools(pools []karpv1.NodePool, typesOf map[string][]*cloudprovider.InstanceType, usage map[string]corev1.ResourceList) []*NodePool {
	var out []*NodePool
	for i := range pools {
		np := &pools[i]
		its, ok := typesOf[np.Name]
		if np.DeletionTimestamp != nil || !ok {
			continue
		}
		out = append(out, &NodePool{NodePool: np, InstanceTypes: its, Usage: usage[np.Name]})
	}
	return out
}

// launchOffer is what an in-flight NodeClaim will be: its launched offering's price, or
// before launch the cheapest available offering its requirements allow
// (scheduling.CheapestOffering, as the provider's launch picks), with that instance type's
// allocatable, among its NodePool's instance types; zero when it cannot be told.
func launchOffer(nc *karpv1.NodeClaim, its []*cloudprovider.InstanceType) (float64, corev1.ResourceList) {
	reqs := scheduling.NewRequirements(nc.Spec.Requirements...)
	for k, v := range nc.Labels {
		if k == karpv1.LabelInstanceType || k == karpv1.LabelTopologyZone || k == karpv1.CapacityTypeLabelKey || k == karpv1.LabelCapacityReservationID {
			reqs.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpIn, v))
		}
	}
	requests, keep := nc.Spec.Resources.Requests, scheduling.OfferingFilter(scheduling.Available)
	if nc.Labels[karpv1.LabelInstanceType] != "" {
		// Launched: its offering is what it costs, available now or not.
		requests, keep = nil, nil
	}
	l, ok := scheduling.CheapestOffering(its, reqs, requests, keep)
	if !ok {
		return 0, nil
	}
	return l.Offering.Price, l.InstanceType.Allocatable()
}

// schedulableTaints are the taints that decide what the solver may place on a node: not the
// unregistered taint, and while its NodeClaim initializes, neither its startup taints nor the
// node's not-ready taint, which go once it is Ready (pods placed there are bound then).
func schedulableTaints(n *corev1.Node, initializing *karpv1.NodeClaim) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.UnregisteredTaintKey {
			continue
		}
		if initializing != nil && (t.Key == corev1.TaintNodeNotReady || slices.ContainsFunc(initializing.Spec.StartupTaints, func(st corev1.Taint) bool { return st.MatchTaint(&t) })) {
			continue
		}
		out = append(out, t)
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
