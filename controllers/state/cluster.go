// Package state is the controllers' view of the cluster: nodes, NodeClaims, pods, DaemonSets
// and NodePools as the manager's informers hold them, plus what only Karpenter knows, the pods
// it nominated to NodeClaims that are still launching. Snapshot turns it into the solver's
// input. It reads caches only; it never writes to the API server.
package state

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/provisioning/scheduling"
)

// Nominations hold a pending pod's place on the node the solver chose for it, so that the next
// batch neither launches again for it nor gives its room away: while the NodeClaim launches
// and its node registers and becomes Ready (at most LaunchNominationTTL from the nomination),
// then for ExistingNominationTTL more, after which the scheduler should have bound the pod
// and a pod still pending is solved again. A node that is not Ready yet has no room for
// kube-scheduler to bind into, so its nominations cannot have failed.
//
// When kube-scheduler filled a nominated pod's node with other pods, the pod is displaced:
// kube-scheduler binds pods where it sees fit, not where the plan put them, and the room the
// pod needs is then often where the plan put one of those others. Once its node has been Ready
// for the displaced grace (DefaultDisplacedGrace, --displaced-pod-grace; kube-scheduler has
// tried the pending pods on it by then), a displaced pod is solved again, and capacity is
// launched for it only if no node has room for it then.
const (
	LaunchNominationTTL   = 5 * time.Minute
	ExistingNominationTTL = 20 * time.Second
	DefaultDisplacedGrace = 5 * time.Second
)

// Cluster reads the informer caches and remembers nominations.
type Cluster struct {
	client client.Client
	clock  clock.Clock

	mu          sync.Mutex
	nominations map[types.UID]nomination
	// rejected records when kube-scheduler last marked a nominated pod unschedulable.
	rejected map[types.UID]time.Time
	// created are the NodeClaims the provisioner created that the cache has not shown yet: a
	// batch right after the one that created them must see them launching, or it would solve
	// the pods nominated to them again and launch for them twice.
	created map[string]createdClaim
	// blocked is how many pods policies kept pending in the last batch, by namespace.
	blocked map[string]int
	// displacedGrace is how long a displaced pod waits after its node became Ready.
	displacedGrace time.Duration
}

type nomination struct {
	target string
	at     time.Time
}

type createdClaim struct {
	nc *karpv1.NodeClaim
	at time.Time
}

// CreatedClaimTTL bounds how long a created NodeClaim the cache has not shown counts as
// launching; the cache shows one within a second or two, and one deleted before the cache
// showed it (a launch that failed at once) must not hold its pods for long.
const CreatedClaimTTL = 10 * time.Second

// NewCluster returns the state over a cached client.
func NewCluster(c client.Client, clk clock.Clock) *Cluster {
	return &Cluster{client: c, clock: clk, nominations: map[types.UID]nomination{}, rejected: map[types.UID]time.Time{},
		created: map[string]createdClaim{}, displacedGrace: DefaultDisplacedGrace}
}

// WithDisplacedGrace sets how long a displaced pod waits after its node became Ready.
func (c *Cluster) WithDisplacedGrace(d time.Duration) *Cluster {
	c.displacedGrace = d
	return c
}

// Created records a NodeClaim the provisioner has just created.
func (c *Cluster) Created(nc *karpv1.NodeClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created[nc.Name] = createdClaim{nc: nc.DeepCopy(), at: c.clock.Now()}
}

// withCreated adds to the cache's NodeClaims those created lately that it does not show yet,
// and forgets those it shows and those past CreatedClaimTTL.
func (c *Cluster) withCreated(claims []karpv1.NodeClaim) []karpv1.NodeClaim {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.created) == 0 {
		return claims
	}
	shown := map[string]bool{}
	for i := range claims {
		shown[claims[i].Name] = true
	}
	for name, cc := range c.created {
		switch {
		case shown[name] || c.clock.Since(cc.at) > CreatedClaimTTL:
			delete(c.created, name)
		default:
			claims = append(claims, *cc.nc.DeepCopy())
		}
	}
	return claims
}

// Nominate records that a pod should run on a node, or on a NodeClaim being launched.
func (c *Cluster) Nominate(pod *corev1.Pod, target string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nominations[pod.UID] = nomination{target: target, at: c.clock.Now()}
	delete(c.rejected, pod.UID)
}

// Nominated reports whether the pod has a nomination not yet forgotten.
func (c *Cluster) Nominated(pod *corev1.Pod) bool {
	_, _, ok := c.nominatedTo(pod)
	return ok
}

// nominatedTo returns where a pod is nominated and since when; nominations older than
// LaunchNominationTTL are forgotten.
func (c *Cluster) nominatedTo(pod *corev1.Pod) (string, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nominations[pod.UID]
	if !ok {
		return "", time.Time{}, false
	}
	if c.clock.Since(n.at) > LaunchNominationTTL {
		delete(c.nominations, pod.UID)
		delete(c.rejected, pod.UID)
		return "", time.Time{}, false
	}
	return n.target, n.at, true
}

// Rejected records that kube-scheduler has just marked a nominated pod unschedulable again. Once
// the pod's node has been schedulable (its NodeClaim initialized) for RejectionSettle before
// that, kube-scheduler tried the pod there and refused it: for want of room, or for a
// constraint (topology spread, anti-affinity) that the pods it bound off-plan now break. The
// pod is then displaced, as when its node has no room left, and does not wait out
// ExistingNominationTTL. Pods kube-scheduler has not marked unschedulable are not recorded.
func (c *Cluster) Rejected(pod *corev1.Pod) {
	marked := slices.ContainsFunc(pod.Status.Conditions, func(cond corev1.PodCondition) bool {
		return cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.nominations[pod.UID]; ok && marked {
		c.rejected[pod.UID] = c.clock.Now()
	}
}

// RejectionSettle is how long a node must have been schedulable before a rejection counts:
// kube-scheduler's cache sees the node a moment after ours.
const RejectionSettle = time.Second

// rejectedSince reports whether kube-scheduler refused the pod after since plus
// RejectionSettle.
func (c *Cluster) rejectedSince(pod *corev1.Pod, since time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.rejected[pod.UID]
	return ok && !since.IsZero() && at.After(since.Add(RejectionSettle))
}

// forgetSettled drops the nominations and rejections, made before the pods were listed, of pods
// no longer pending: bound, deleted or finished. It returns how many pods are pending.
func (c *Cluster) forgetSettled(pods []corev1.Pod, listed time.Time) int {
	pending := make(map[types.UID]bool, len(pods))
	for i := range pods {
		if Provisionable(&pods[i]) {
			pending[pods[i].UID] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, n := range c.nominations {
		if !pending[uid] && n.at.Before(listed) {
			delete(c.nominations, uid)
		}
	}
	for uid, at := range c.rejected {
		if !pending[uid] && at.Before(listed) {
			delete(c.rejected, uid)
		}
	}
	return len(pending)
}

// SetPolicyBlocked records, by namespace, how many pods policies kept pending in a batch.
func (c *Cluster) SetPolicyBlocked(byNamespace map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blocked = byNamespace
}

// PolicyBlocked is how many of a namespace's pods policies kept pending in the last batch.
func (c *Cluster) PolicyBlocked(namespace string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.blocked[namespace]
}

// Provisionable reports whether the provisioner should find a node for a pod: pending, not
// bound, not owned by a DaemonSet, not terminating, and either marked unschedulable by its
// scheduler or not yet looked at by kube-scheduler (no PodScheduled condition: not gated, not
// nominated by a preemption, for the default scheduler). The second kind matters in a
// scale-out: kube-scheduler marks new pods unschedulable at about a hundred a second, and
// waiting for its verdict on a thousand kept the batch open ten seconds. The solver places
// such pods on existing nodes with room first, as kube-scheduler would, so they launch
// capacity only where there is none.
func Provisionable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return false
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			return cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable
		}
	}
	return len(p.Spec.SchedulingGates) == 0 && p.Status.NominatedNodeName == "" &&
		(p.Spec.SchedulerName == "" || p.Spec.SchedulerName == corev1.DefaultSchedulerName)
}

// PodsComing reports whether one of the ReplicaSets has fewer pods than it wants: it is
// creating them (a thousand take it a few seconds, in waves), and a batch closed before the
// last wave would plan nodes for part of them, the rest in another batch. A ReplicaSet that
// cannot create its pods (a quota, an admission webhook) holds the batches its pods trigger to
// their maximum window.
func (c *Cluster) PodsComing(ctx context.Context, replicaSets []types.NamespacedName) bool {
	for _, key := range replicaSets {
		rs := &appsv1.ReplicaSet{}
		if err := c.client.Get(ctx, key, rs); err != nil {
			continue
		}
		if rs.DeletionTimestamp == nil && rs.Spec.Replicas != nil && rs.Status.Replicas < *rs.Spec.Replicas {
			return true
		}
	}
	return false
}

// ReplicaSetOf names the ReplicaSet that controls the pod, if one does.
func ReplicaSetOf(pod *corev1.Pod) types.NamespacedName {
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "ReplicaSet" {
		return types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}
	}
	return types.NamespacedName{}
}

// Snapshot is the solver's input as the cluster stands now, with the pods to place.
type Snapshot struct {
	Input *scheduling.Input
	// NodePools by name, for the NodeClaims created from the decision.
	NodePools map[string]*karpv1.NodePool
	// Displaced counts the pods left out while they wait for kube-scheduler, and RetryAfter
	// says when the first of them is solved again.
	Displaced  int
	RetryAfter time.Duration
}

// Snapshot lists the pending pods and builds the solver's input: existing nodes (with the pods
// bound or nominated to them) and in-flight NodeClaims, and every ready NodePool with its
// instance types, DaemonSet overhead and usage.
func (c *Cluster) Snapshot(ctx context.Context, cp cloudprovider.CloudProvider) (*Snapshot, error) {
	return c.snapshot(ctx, cp, true)
}

// Placed is the snapshot whether or not pods are pending: what runs and what is launching,
// for the policy status controller's cost attribution.
func (c *Cluster) Placed(ctx context.Context, cp cloudprovider.CloudProvider) (*Snapshot, error) {
	return c.snapshot(ctx, cp, false)
}

func (c *Cluster) snapshot(ctx context.Context, cp cloudprovider.CloudProvider, onlyWithPending bool) (*Snapshot, error) {
	listed := c.clock.Now()
	var pods corev1.PodList
	if err := c.client.List(ctx, &pods); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	if pending := c.forgetSettled(pods.Items, listed); onlyWithPending && pending == 0 {
		return &Snapshot{Input: &scheduling.Input{}, NodePools: map[string]*karpv1.NodePool{}}, nil
	}
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var claims karpv1.NodeClaimList
	if err := c.client.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	claims.Items = c.withCreated(claims.Items)
	var pools karpv1.NodePoolList
	if err := c.client.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("listing nodepools: %w", err)
	}
	// Each NodePool's instance types, asked of the provider once per snapshot; a NodePool whose
	// node class is not ready has none.
	typesOf := map[string][]*cloudprovider.InstanceType{}
	for i := range pools.Items {
		if its, err := cp.GetInstanceTypes(ctx, &pools.Items[i]); err == nil {
			typesOf[pools.Items[i].Name] = its
		}
	}
	var daemonSets appsv1.DaemonSetList
	if err := c.client.List(ctx, &daemonSets); err != nil {
		return nil, fmt.Errorf("listing daemonsets: %w", err)
	}

	in := &scheduling.Input{}
	byNode := map[string][]*corev1.Pod{}
	byClaim := map[string][]*corev1.Pod{}
	// In flight: NodeClaims not being deleted whose Node is not there yet. Once it is, even
	// before registration, and reports what it can allocate (a node's status comes after the
	// node, and the cache may show the NodeClaim's launch between the two), the Node stands for
	// its NodeClaim; a cordoned or deleted one offers no room. usable are the nodes that offer
	// room, with since when each is Ready (zero: not Ready yet).
	nodeByName, nodeByID := map[string]*corev1.Node{}, map[string]*corev1.Node{}
	usable := map[string]time.Time{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if len(n.Status.Allocatable) == 0 && n.DeletionTimestamp == nil && !n.Spec.Unschedulable {
			continue
		}
		nodeByName[n.Name] = n
		if n.Spec.ProviderID != "" {
			nodeByID[n.Spec.ProviderID] = n
		}
		if n.DeletionTimestamp == nil && !n.Spec.Unschedulable {
			usable[n.Name] = time.Time{}
			if r := nodeReady(n); r != nil {
				usable[n.Name] = r.LastTransitionTime.Time
			}
		}
	}
	inFlight := map[string]bool{}
	// nodeOf names the Node of each NodeClaim whose Node is there: a nomination names the
	// NodeClaim it launched for, and holds on its Node once that is there. claimOf is the
	// other way round.
	nodeOf, claimOf := map[string]string{}, map[string]*karpv1.NodeClaim{}
	for i := range claims.Items {
		nc := &claims.Items[i]
		n := nodeByName[nc.Status.NodeName]
		if n == nil {
			n = nodeByID[nc.Status.ProviderID]
		}
		switch {
		case n != nil:
			nodeOf[nc.Name], claimOf[n.Name] = n.Name, nc
		case nc.DeletionTimestamp == nil:
			inFlight[nc.Name] = true
		}
	}
	nominatedOn := map[string][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed:
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		case Provisionable(p):
			// A nominated pod keeps its room where the solver put it, for as long as its
			// nomination holds; then, or if its target is gone, it is solved again.
			target, at, ok := c.nominatedTo(p)
			if name, launched := nodeOf[target]; launched {
				target = name
			}
			ready, onNode := usable[target]
			switch {
			case ok && inFlight[target]:
				byClaim[target] = append(byClaim[target], p)
			case ok && onNode && (ready.IsZero() || c.clock.Since(later(at, ready)) <= ExistingNominationTTL):
				nominatedOn[target] = append(nominatedOn[target], p)
			default:
				in.Pods = append(in.Pods, p)
			}
		}
	}
	// A nomination to a registered node holds only while the node has room for it besides
	// the pods bound there; a displaced pod waits out the displaced grace, then is solved again.
	// A pod kube-scheduler refused once its node was schedulable is displaced too.
	displaced, retryAfter := 0, time.Duration(0)
	for i := range nodes.Items {
		name := nodes.Items[i].Name
		free := nodes.Items[i].Status.Allocatable
		for _, p := range byNode[name] {
			free = scheduling.Subtract(free, scheduling.PodRequests(p))
		}
		// Since when kube-scheduler could bind to the node: its NodeClaim's initialization, or
		// for a node Karpenter did not launch, its readiness.
		schedulable := usable[name]
		if nc := claimOf[name]; nc != nil {
			schedulable = time.Time{}
			if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeInitialized); cond != nil && cond.Status == metav1.ConditionTrue {
				schedulable = cond.LastTransitionTime.Time
			}
		}
		for _, p := range nominatedOn[name] {
			req := scheduling.PodRequests(p)
			if ok, _ := scheduling.Fits(req, free); !ok || c.rejectedSince(p, schedulable) {
				wait := c.displacedGrace
				if ready := usable[name]; !ready.IsZero() {
					wait -= c.clock.Since(ready)
				}
				if wait > 0 {
					displaced++
					if retryAfter == 0 || wait < retryAfter {
						retryAfter = wait
					}
					continue
				}
				in.Pods = append(in.Pods, p)
				continue
			}
			free = scheduling.Subtract(free, req)
			byNode[name] = append(byNode[name], p)
		}
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if _, ok := usable[n.Name]; !ok {
			continue
		}
		// While its NodeClaim initializes, its startup taints and the not-ready taint will go.
		initializing := claimOf[n.Name]
		if initializing != nil && meta.IsStatusConditionTrue(initializing.Status.Conditions, karpv1.ConditionTypeInitialized) {
			initializing = nil
		}
		in.Nodes = append(in.Nodes, &scheduling.Node{Name: n.Name, Labels: n.Labels, Taints: schedulableTaints(n, initializing),
			Allocatable: n.Status.Allocatable, Pods: byNode[n.Name]})
	}
	usage := map[string]corev1.ResourceList{}
	for i := range claims.Items {
		nc := &claims.Items[i]
		pool := nc.Labels[karpv1.NodePoolLabelKey]
		u := usage[pool]
		if u == nil {
			u = corev1.ResourceList{}
			usage[pool] = u
		}
		scheduling.AddResources(u, nc.Status.Capacity)
		scheduling.AddResources(u, corev1.ResourceList{"nodes": *resourceOne()})
		if !inFlight[nc.Name] {
			continue
		}
		// Its pods are the ones nominated to it.
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
		in.Nodes = append(in.Nodes, &scheduling.Node{Name: nc.Name, Labels: labels, Taints: nc.Spec.Taints, Allocatable: alloc,
			Pods: byClaim[nc.Name], InFlight: true, PricePerHour: price})
	}
	templates := make([]corev1.PodTemplateSpec, 0, len(daemonSets.Items))
	for _, ds := range daemonSets.Items {
		templates = append(templates, ds.Spec.Template)
	}
	snap := &Snapshot{Input: in, NodePools: map[string]*karpv1.NodePool{}, Displaced: displaced, RetryAfter: retryAfter}
	sort.Slice(pools.Items, func(i, j int) bool { return pools.Items[i].Name < pools.Items[j].Name })
	for i := range pools.Items {
		np := &pools.Items[i]
		if np.DeletionTimestamp != nil {
			continue
		}
		its, ok := typesOf[np.Name]
		if !ok {
			// A NodePool whose node class is not ready launches nothing; the others still do.
			continue
		}
		snap.NodePools[np.Name] = np
		in.NodePools = append(in.NodePools, &scheduling.NodePool{NodePool: np, InstanceTypes: its,
			DaemonSetOverhead: scheduling.DaemonSetOverhead(np, templates), Usage: usage[np.Name]})
	}
	return snap, nil
}

// launchOffer is what an in-flight NodeClaim will be: its launched offering's price, or
// before launch the cheapest offering its requirements allow, which is what a launch picks,
// with that instance type's allocatable, among its NodePool's instance types; zero when it
// cannot be told.
func launchOffer(nc *karpv1.NodeClaim, its []*cloudprovider.InstanceType) (float64, corev1.ResourceList) {
	reqs := scheduling.NewRequirements(nc.Spec.Requirements...)
	for k, v := range nc.Labels {
		if k == karpv1.LabelInstanceType || k == karpv1.LabelTopologyZone || k == karpv1.CapacityTypeLabelKey {
			reqs.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpIn, v))
		}
	}
	best := 0.0
	var alloc corev1.ResourceList
	for _, it := range its {
		if r, ok := reqs[karpv1.LabelInstanceType]; ok && !r.Has(it.Name) {
			continue
		}
		for _, o := range it.Offerings {
			if r, ok := reqs[karpv1.LabelTopologyZone]; ok && !r.Has(o.Zone) {
				continue
			}
			if r, ok := reqs[karpv1.CapacityTypeLabelKey]; ok && !r.Has(o.CapacityType) {
				continue
			}
			if best == 0 || o.Price < best {
				best, alloc = o.Price, it.Allocatable()
			}
		}
	}
	return best, alloc
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

// nodeReady is the node's Ready condition when it is True.
func nodeReady(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func resourceOne() *resource.Quantity { return resource.NewQuantity(1, resource.DecimalSI) }
