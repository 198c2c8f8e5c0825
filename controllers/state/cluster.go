// Package state is the controllers' one model of the cluster: pods, nodes, NodeClaims,
// NodePools, DaemonSets, PodDisruptionBudgets, namespaces and CapacityBudgets, kept up to date
// object by object by informer event handlers (model.go), with a Synced gate that holds every
// decision until the caches have caught up, plus what only this process knows: the pods it
// nominated to nodes and NodeClaims, the NodeClaims it created that the caches do not show
// yet, and when pods last came to or left each node. Build (snapshot.go) is the one place
// where objects become the nodes, NodeClaims and pods decisions read; the provisioner,
// disruption, the policy gate and status, and karpenterctl (on objects read from manifests)
// all use it. It never writes to the API server, never lists the cluster, and never imports
// the solver: both speak package scheduling.
package state

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling/overlay"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
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
// (ExistingNominationTTL is snapshot.ExistingNominationTTL: the snapshot applies it.)
const (
	LaunchNominationTTL   = 5 * time.Minute
	DefaultDisplacedGrace = 5 * time.Second
)

// Cluster is the model and what this process knows besides it.
type Cluster struct {
	client client.Client
	clock  clock.Clock
	model  *model

	mu          sync.Mutex
	nominations map[types.UID]nomination
	// rejected records when kube-scheduler last marked a nominated pod unschedulable.
	rejected map[types.UID]time.Time
	// created are the NodeClaims the provisioner created that the cache has not shown yet: a
	// batch right after the one that created them must see them launching, or it would solve
	// the pods nominated to them again and launch for them twice.
	created map[string]createdClaim
	// blocked are the pods policies kept pending in the last batch (by namespace, then name,
	// with the UID), and the namespaces that batch accounted for.
	blocked map[string]map[types.NamespacedName]types.UID
	// displacedGrace is how long a displaced pod waits after its node became Ready.
	displacedGrace time.Duration
	// overlays remembers the last NodeOverlays resolved for a snapshot; overlaySet is the
	// set the last whole snapshot applied, which launches price by (LaunchOverlays).
	overlays   overlay.Memo
	overlaySet *overlay.Set
	// launchApplied are LaunchOverlays' last answers, by NodePool.
	launchApplied map[string]launchApplied
	// podEvents are, by node name, when a pod last came to the node or left it.
	podEvents map[string]time.Time
	// misfits and preempted bound relaunches for pods their nodes cannot hold (backoff.go),
	// by workload.
	misfits   map[string]*misfit
	preempted map[string]preemption
	// registrations are the NodePools' latest registration outcomes (registration.go).
	registrations registrations
	// decisions are the provisioner's scheduling decisions per pod (decisions.go).
	decisions decisions
	// policyDecisions are the controllers' policy decisions, for the audit (policydecisions.go).
	policyDecisions PolicyDecisions
	// buffers, when set, are the CapacityBuffers' virtual pods (WithBuffers).
	buffers func() []*corev1.Pod
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

// NewCluster returns an empty model; Register feeds it from the manager's informers. c reads
// the few objects the model does not hold (ReplicaSets, for PodsComing) from the cache.
func NewCluster(c client.Client, clk clock.Clock) *Cluster {
	return &Cluster{client: c, clock: clk, model: newModel(), nominations: map[types.UID]nomination{}, rejected: map[types.UID]time.Time{},
		created: map[string]createdClaim{}, displacedGrace: DefaultDisplacedGrace, podEvents: map[string]time.Time{},
		misfits: map[string]*misfit{}, preempted: map[string]preemption{}}
}

// WithNodeOverlays makes the model watch NodeOverlays and give them to every snapshot (the
// NodeOverlay feature gate); call it before Register.
func (c *Cluster) WithNodeOverlays() *Cluster {
	c.model.mu.Lock()
	c.model.overlaysOn = true
	c.model.mu.Unlock()
	return c
}

// WithBuffers gives every snapshot the CapacityBuffers' virtual pods, as pending pods (the
// CapacityBuffer feature gate); call it before the first snapshot.
func (c *Cluster) WithBuffers(pods func() []*corev1.Pod) *Cluster {
	c.buffers = pods
	return c
}

// BuffersChanged moves the revision: a CapacityBuffer's virtual pods changed, which changes
// what disruption may take (a buffer's room is not empty), as a pod would.
func (c *Cluster) BuffersChanged() { c.changed() }

// BufferPods are the CapacityBuffers' virtual pods now; none without WithBuffers.
func (c *Cluster) BufferPods() []*corev1.Pod {
	if c.buffers == nil {
		return nil
	}
	return c.buffers()
}

// WithDisplacedGrace sets how long a displaced pod waits after its node became Ready.
func (c *Cluster) WithDisplacedGrace(d time.Duration) *Cluster {
	c.displacedGrace = d
	return c
}

// Created records a NodeClaim the provisioner has just created.
func (c *Cluster) Created(nc *karpv1.NodeClaim) {
	c.mu.Lock()
	c.created[nc.Name] = createdClaim{nc: nc.DeepCopy(), at: c.clock.Now()}
	c.mu.Unlock()
	c.changed()
}

// changed moves the revision for what this process knows that changes a decision (a
// nomination, a NodeClaim created).
func (c *Cluster) changed() {
	c.model.mu.Lock()
	defer c.model.mu.Unlock()
	c.model.revision++
}

// withCreated adds to the model's NodeClaims those created lately that it does not show yet,
// and forgets those it shows and those past CreatedClaimTTL.
func (c *Cluster) withCreated(claims []*karpv1.NodeClaim) []*karpv1.NodeClaim {
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
			claims = append(claims, cc.nc)
		}
	}
	return claims
}

// RejectionSettle is how long a node must have been schedulable before a rejection counts:
// kube-scheduler's cache sees the node a moment after ours.
const RejectionSettle = time.Second

// forgetSettled drops the nominations and rejections, made before now, of pods no longer
// pending: bound, deleted or finished.
func (c *Cluster) forgetSettled(now time.Time) {
	pending := c.provisionableUIDs()
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, n := range c.nominations {
		if !pending[uid] && n.at.Before(now) {
			delete(c.nominations, uid)
		}
	}
	for uid, at := range c.rejected {
		if !pending[uid] && at.Before(now) {
			delete(c.rejected, uid)
		}
	}
}

// provisionableUIDs are the UIDs of the pods the provisioner should find a node for.
func (c *Cluster) provisionableUIDs() map[types.UID]bool {
	m := c.model
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[types.UID]bool, len(m.provisionable))
	for key := range m.provisionable {
		if p := m.pods[key]; p != nil {
			out[p.UID] = true
		}
	}
	return out
}

// podEvent records that a pod came to the node or left it now (the model's handlers call it).
func (c *Cluster) podEvent(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.podEvents[node] = c.clock.Now()
}

// forgetPodEvents forgets a node that is gone.
func (c *Cluster) forgetPodEvents(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.podEvents, node)
}

// LastPodEvent is when a pod last came to the node or left it, as this process saw; zero when
// it saw none (the NodeClaim's status.lastPodEventTime then tells).
func (c *Cluster) LastPodEvent(node string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.podEvents[node]
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

// Snapshot is the model as it stands, with this process's nominations and the NodeClaims it
// created that the model does not show yet, and the CapacityBuffers' virtual pods, built by
// snapshot.Build. Without pending or virtual pods it is empty: the provisioner has nothing to
// do, and no snapshot is built.
func (c *Cluster) Snapshot(ctx context.Context, cp cloudprovider.CloudProvider) (*snapshot.Snapshot, error) {
	return c.snapshot(ctx, cp, true)
}

// Placed is the whole snapshot whether or not pods are pending: for disruption and the policy
// status, which look at what runs.
func (c *Cluster) Placed(ctx context.Context, cp cloudprovider.CloudProvider) (*snapshot.Snapshot, error) {
	return c.snapshot(ctx, cp, false)
}

func (c *Cluster) snapshot(ctx context.Context, cp cloudprovider.CloudProvider, forPending bool) (*snapshot.Snapshot, error) {
	now := c.clock.Now()
	c.forgetSettled(now)
	buffers := c.BufferPods()
	if forPending && c.PendingPods() == 0 && len(buffers) == 0 {
		return snapshot.Build(&snapshot.Objects{}, snapshot.Env{Now: now}), nil
	}
	objs := c.Objects()
	objs.BufferPods = buffers
	objs.NodeClaims = c.withCreated(objs.NodeClaims)
	types := func(np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
		if cp == nil {
			return nil, nil
		}
		return c.instanceTypes(ctx, cp, np)
	}
	snap := snapshot.Build(objs, snapshot.Env{Now: now, InstanceTypes: types, Nominations: c.Nominations(), SeenPodEvent: c.LastPodEvent, Overlays: &c.overlays})
	c.mu.Lock()
	c.overlaySet = snap.Overlays
	c.mu.Unlock()
	return snap, nil
}

// LaunchOverlays applies to a NodePool's instance types the NodeOverlays the last whole
// snapshot applied (cloudprovider.LaunchOverlays), so that a provider launches the offering
// the decision chose; without overlays, or for a NodePool the model does not hold, it returns
// them as they are.
func (c *Cluster) LaunchOverlays(nodePool string, its []*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
	c.mu.Lock()
	set := c.overlaySet
	c.mu.Unlock()
	if set.Empty() {
		return its
	}
	c.model.mu.RLock()
	np := c.model.pools[nodePool]
	c.model.mu.RUnlock()
	if np == nil || len(its) == 0 {
		return its
	}
	// A launch after another of the same NodePool, under the same overlays, over the same
	// list from the provider, buys at the same prices: applying a set to a catalog of 1363
	// types costs milliseconds, once per list.
	key := launchApplied{set: set, pool: np, first: &its[0], n: len(its)}
	c.mu.Lock()
	if last, ok := c.launchApplied[nodePool]; ok && last.set == key.set && last.pool == key.pool && last.first == key.first && last.n == key.n {
		c.mu.Unlock()
		return last.out
	}
	c.mu.Unlock()
	key.out = set.Apply(np, its)
	c.mu.Lock()
	if c.launchApplied == nil {
		c.launchApplied = map[string]launchApplied{}
	}
	c.launchApplied[nodePool] = key
	c.mu.Unlock()
	return key.out
}

// launchApplied is LaunchOverlays' last answer for a NodePool, with what it was made from:
// the set, the NodePool object (the model replaces it on every change) and the provider's list.
type launchApplied struct {
	set   *overlay.Set
	pool  *karpv1.NodePool
	first **cloudprovider.InstanceType
	n     int
	out   []*cloudprovider.InstanceType
}

// NodePoolUsage is what a NodePool's nodes and NodeClaims hold against its limits, by the one
// definition (snapshot.Snapshot.Usage), and what they cost per hour (snapshot.Snapshot.Cost),
// over the model's objects of that NodePool only: the NodePool status reads it on every
// NodeClaim change without building the whole snapshot.
func (c *Cluster) NodePoolUsage(ctx context.Context, cp cloudprovider.CloudProvider, np *karpv1.NodePool) (corev1.ResourceList, float64) {
	m := c.model
	m.mu.RLock()
	objs := &snapshot.Objects{NodePools: []*karpv1.NodePool{np}, NodeOverlays: sortedValues(m.overlays, func(o *karpv1alpha1.NodeOverlay) string { return o.Name })}
	for _, n := range m.nodes {
		if n.Labels[karpv1.NodePoolLabelKey] == np.Name {
			objs.Nodes = append(objs.Nodes, n)
		}
	}
	for _, nc := range m.claims {
		if nc.Labels[karpv1.NodePoolLabelKey] == np.Name {
			objs.NodeClaims = append(objs.NodeClaims, nc)
		}
	}
	m.mu.RUnlock()
	types := func(np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
		if cp == nil {
			return nil, nil
		}
		return c.instanceTypes(ctx, cp, np)
	}
	snap := snapshot.Build(objs, snapshot.Env{Now: c.clock.Now(), InstanceTypes: types, Overlays: &c.overlays})
	return snap.Usage(np.Name, nil), snap.Cost(np.Name)
}

// PolicyDecisions are the policy decisions the controllers took, for the audit's reports.
func (c *Cluster) PolicyDecisions() *PolicyDecisions { return &c.policyDecisions }
