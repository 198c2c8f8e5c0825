// Package snapshot turns a plain set of API objects into what every decision reads: the
// pending pods, the nodes and in-flight NodeClaims with their pods, labels, taints and prices,
// the NodePools that can launch with their instance types and usage, and the pods of deleting
// nodes. Build is the one builder: the provisioner, disruption, the policy gate and status
// (through controllers/state, over the informer-fed model) and karpenterctl simulate and plan
// (over objects read from manifests) all use it, so they cannot disagree about what the
// cluster is. It is pure: it reads no client and no clock, and never modifies the objects
// (docs/architecture.md, "Data flow").
package snapshot

import (
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/overlay"
)

// Objects is a plain set of the API objects decisions are made from: what the cluster model
// holds, or what karpenterctl read from manifests. Build turns it into a Snapshot. Nothing
// modifies the objects: the model's are the informers' own.
type Objects struct {
	Pods            []*corev1.Pod
	Nodes           []*corev1.Node
	NodeClaims      []*karpv1.NodeClaim
	NodePools       []*karpv1.NodePool
	DaemonSets      []*appsv1.DaemonSet
	PDBs            []*k8spolicyv1.PodDisruptionBudget
	Namespaces      []*corev1.Namespace
	CapacityBudgets []*policyv1.CapacityBudget
	// ClusterCapacityBudgets are the budgets shared by the namespaces each selects.
	ClusterCapacityBudgets []*policyv1.ClusterCapacityBudget
	// LimitRanges and RuntimeClasses add to what a DaemonSet's pods request when the API
	// server admits them (scheduling.Admission).
	LimitRanges    []*corev1.LimitRange
	RuntimeClasses []*nodev1.RuntimeClass
	// PersistentVolumes, PersistentVolumeClaims and StorageClasses say where pods' volumes
	// can be reached (volumes.go); CSINodes how many volumes each node can attach.
	PersistentVolumes      []*corev1.PersistentVolume
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	StorageClasses         []*storagev1.StorageClass
	CSINodes               []*storagev1.CSINode
	// NodeOverlays change the NodePools' instance types (scheduling/overlay); the manager
	// gives them only with the NodeOverlay feature gate on.
	NodeOverlays []*karpv1alpha1.NodeOverlay
	// BufferPods are the CapacityBuffers' virtual pods (scheduling.BufferPods): pending pods
	// that exist nowhere but here, solved after the real ones.
	BufferPods []*corev1.Pod
}

// Snapshot is the cluster at one moment in the terms every decision uses: the provisioner
// solves its pending pods onto its Nodes and NodePools, disruption picks candidates among its
// StateNodes and simulates on the same Nodes, the policy gate and the budget status attribute
// cost over them, and karpenterctl simulate and plan take one built from manifests. One
// builder (Build) makes it, from a plain set of objects; nothing else turns objects into nodes.
type Snapshot struct {
	Now time.Time
	// Overlays are the NodeOverlays applied to the NodePools' instance types; nil: none.
	Overlays *overlay.Set
	// Objects are what it was built from.
	Objects *Objects
	// Pods are the pending pods to place, less those a nomination holds, then the
	// CapacityBuffers' virtual pods (scheduling.IsVirtual).
	Pods []*corev1.Pod
	// Deleting are the reschedulable pods of nodes being deleted: they need a place soon.
	Deleting []*corev1.Pod
	// Nodes are the nodes that offer room and the in-flight NodeClaims, with the pods bound
	// or nominated to them, labelled (instance-type labels included), tainted as the
	// scheduler will see them, and priced.
	Nodes []*scheduling.Node
	// StateNodes are every node and in-flight NodeClaim, with what decisions read of them.
	StateNodes []*StateNode
	// NodePools are those that can launch (not being deleted, node class ready).
	NodePools []*NodePool
	// DaemonSets are the cluster's DaemonSets' pods as they would run on a new node, with
	// their requests as the API server admits them (scheduling.DaemonSetRequests).
	DaemonSets []scheduling.DaemonSetPod
	// PDBs are the PodDisruptionBudgets.
	PDBs []*k8spolicyv1.PodDisruptionBudget
	// Requests are the requests of every pod of the snapshot, computed once.
	Requests *scheduling.PodRequestCache
	// Displaced counts the pods left out while they wait for kube-scheduler, and RetryAfter
	// says when the first of them is solved again.
	Displaced  int
	RetryAfter time.Duration
	// VolumeRequirements are what the volumes of the pods that have claims require of their
	// node, by pod namespace/name (pending and bound pods: disruption moves the latter).
	VolumeRequirements map[string][]corev1.NodeSelectorRequirement
	// PodVolumes are the volumes each pod with claims attaches, by driver (attach limits).
	PodVolumes map[string]scheduling.Volumes
	// Unresolved are the pending pods left out because a claim or StorageClass they need does
	// not exist yet: nothing can be launched for them until it does.
	Unresolved []Unresolved
	// Misfits are the pending pods among Pods displaced from a node that cannot hold them
	// beside its DaemonSet pods and higher-priority pods.
	Misfits []Misfit
	// volumeLimits are the nodes' CSINode attach limits, by node and driver.
	volumeLimits map[string]map[string]int
	// instanceTypes are every NodePool's, ready or not, to price nodes by.
	instanceTypes map[string][]*cloudprovider.InstanceType
}

// StateNode is a node, or a NodeClaim in flight, with what decisions read of it.
type StateNode struct {
	// Node is nil while the NodeClaim is in flight; NodeClaim is nil for a node Karpenter did
	// not launch.
	Node      *corev1.Node
	NodeClaim *karpv1.NodeClaim
	// Sched is the node as the solver sees it; nil when it offers no room (cordoned, being
	// deleted, or not reporting what it can allocate yet).
	Sched *scheduling.Node
	// Pods are the pods bound to it that have not finished (terminating ones included).
	Pods []*corev1.Pod
	// NodePool is the NodePool it belongs to, "" for a node of none.
	NodePool string
	// Labels are the node's labels with its hostname and its instance type's labels.
	Labels map[string]string
	// PricePerHour is what it costs, 0 when it cannot be priced.
	PricePerHour float64
	// Deleting is set when the node or its NodeClaim is being deleted; Disrupted when it is
	// tainted karpenter.sh/disrupted; Ready when its Ready condition is True; Initialized
	// when its NodeClaim is Initialized (a node of no NodeClaim: when Ready).
	InFlight, Deleting, Disrupted, Ready, Initialized bool
	// Rebooting is set while node repair reboots it in place (its NodeClaim's Rebooting
	// condition is True): its room is coming back, so the solver sees it without the
	// rebooting fence, and no disruption method takes it.
	Rebooting bool
	// Nominated is set when pending pods are nominated to it: the provisioner counts on its
	// room.
	Nominated bool
	// LastPodEvent is when a pod last came to it or left it (LastPodEvent); zero when unknown.
	LastPodEvent time.Time
}

// Name is the node's name, or the in-flight NodeClaim's.
func (n *StateNode) Name() string {
	if n.Node != nil {
		return n.Node.Name
	}
	return n.NodeClaim.Name
}

// NodePool is a NodePool that can launch, with its instance types and what its nodes and
// NodeClaims hold against its limits (Usage, "nodes" included).
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

// Namespaces are the snapshot's namespaces with their labels, by name.
func (s *Snapshot) Namespaces() map[string]map[string]string {
	out := make(map[string]map[string]string, len(s.Objects.Namespaces))
	for _, ns := range s.Objects.Namespaces {
		out[ns.Name] = ns.Labels
	}
	return out
}

// Budgets are the CapacityBudgets, not being deleted.
func (s *Snapshot) Budgets() []*policyv1.CapacityBudget { return s.Objects.CapacityBudgets }

// Env is what a snapshot needs besides the objects: the time, the NodePools' instance types,
// and what only the running controller knows (its nominations; nil for karpenterctl).
type Env struct {
	Now time.Time
	// InstanceTypes gives a NodePool's instance types; an error means it cannot launch.
	InstanceTypes func(*karpv1.NodePool) ([]*cloudprovider.InstanceType, error)
	// Nominations, when set, keeps the places the provisioner gave pending pods.
	Nominations Nominations
	// SeenPodEvent, when set, is when this process last saw a pod come to a node or leave it.
	SeenPodEvent func(node string) time.Time
	// Overlays, when set, remembers the last NodeOverlays resolved, so that a snapshot taken
	// every few seconds does not resolve them again while nothing changed.
	Overlays *overlay.Memo
}

// Nominations are the places a running provisioner gave pending pods (controllers/state).
type Nominations interface {
	// NominatedTo is the node or NodeClaim the pod is nominated to, and since when.
	NominatedTo(p *corev1.Pod) (target string, at time.Time, ok bool)
	// RejectedSince reports whether kube-scheduler refused the pod on its nominated node after
	// the node became schedulable at since.
	RejectedSince(p *corev1.Pod, since time.Time) bool
	// DisplacedGrace is how long a pod displaced from its nominated node waits after the node
	// became Ready before it is solved again.
	DisplacedGrace() time.Duration
}

// ExistingNominationTTL is how long a nomination to a node holds once the node is Ready:
// kube-scheduler should have bound the pod by then, and a pod still pending is solved again.
const ExistingNominationTTL = 20 * time.Second

// Build turns objects into a snapshot: the one place where nodes, NodeClaims and pods become
// what decisions read (docs/architecture.md, "Data flow").
func Build(objs *Objects, env Env) *Snapshot {
	snap := &Snapshot{Now: env.Now, Objects: objs, Requests: scheduling.NewPodRequestCache(), PDBs: objs.PDBs,
		instanceTypes: map[string][]*cloudprovider.InstanceType{}}
	launchable := map[string]bool{}
	var pools []overlay.Pool
	for _, np := range objs.NodePools {
		if env.InstanceTypes == nil {
			continue
		}
		if its, err := env.InstanceTypes(np); err == nil {
			snap.instanceTypes[np.Name] = its
			launchable[np.Name] = np.DeletionTimestamp == nil
			pools = append(pools, overlay.Pool{NodePool: np, InstanceTypes: its})
		}
	}
	snap.applyOverlays(objs.NodeOverlays, pools, env.Overlays)
	nodes := indexNodes(objs.Nodes)
	claims := indexClaims(objs.NodeClaims, nodes)
	a := assign(objs.Pods, nodes, claims, env)
	snap.Pods = a.pending
	unresolved := snap.resolveVolumes(objs)
	snap.volumeLimits = volumeLimits(objs.CSINodes)
	snap.Displaced, snap.RetryAfter = holdNominations(objs.Nodes, nodes, claims, a, snap, env)
	snap.leaveOutUnresolved(unresolved)
	// The buffers' room is wanted as any pending pod's: placed on existing and in-flight room
	// first, launched for otherwise. Nothing nominates, gates or binds them.
	snap.Pods = append(snap.Pods, objs.BufferPods...)
	snap.StateNodes = snap.stateNodes(objs, nodes, claims, a, env)
	for _, n := range snap.StateNodes {
		if n.Sched != nil {
			snap.Nodes = append(snap.Nodes, n.Sched)
		}
		if n.Deleting {
			for _, p := range n.Pods {
				if scheduling.IsReschedulable(p) {
					snap.Deleting = append(snap.Deleting, p)
				}
			}
		}
	}
	snap.DaemonSets = daemonSetPods(objs)
	for _, np := range objs.NodePools {
		if launchable[np.Name] {
			snap.NodePools = append(snap.NodePools, &NodePool{NodePool: np, InstanceTypes: snap.instanceTypes[np.Name], Usage: snap.Usage(np.Name, nil)})
		}
	}
	return snap
}

// Usage is what a NodePool's nodes and in-flight NodeClaims hold against its limits, with
// "nodes", leaving out those gone names (a disruption's candidates): each counts what its
// NodeClaim launched (status.capacity), or before launch what the cheapest offering its
// requirements allow would be, or its requests. It is the one definition of NodePool usage:
// the provisioner's limits, disruption's simulations and the NodePool status read it.
func (s *Snapshot) Usage(pool string, gone func(name string) bool) corev1.ResourceList {
	u := corev1.ResourceList{corev1.ResourceName("nodes"): resource.MustParse("0")}
	nodes := int64(0)
	for _, n := range s.StateNodes {
		if n.NodePool != pool || gone != nil && gone(n.Name()) {
			continue
		}
		nodes++
		scheduling.AddResources(u, n.capacity(s.instanceTypes[pool]))
	}
	u["nodes"] = *resource.NewQuantity(nodes, resource.DecimalSI)
	return u
}

// Cost is what the NodePool's nodes and NodeClaims cost per hour, over the same nodes as Usage
// and at the prices the solver sees (NodeOverlays applied); a node that cannot be priced adds
// nothing.
func (s *Snapshot) Cost(pool string) float64 {
	total := 0.0
	for _, n := range s.StateNodes {
		if n.NodePool == pool {
			total += n.PricePerHour
		}
	}
	return total
}

// capacity is what the node holds against its NodePool's limits.
func (n *StateNode) capacity(its []*cloudprovider.InstanceType) corev1.ResourceList {
	if nc := n.NodeClaim; nc != nil {
		if len(nc.Status.Capacity) > 0 {
			return nc.Status.Capacity
		}
		if _, cp := launchOffer(nc, its); len(cp) > 0 {
			return cp
		}
		return nc.Spec.Resources.Requests
	}
	if n.Node != nil {
		return n.Node.Status.Capacity
	}
	return nil
}

// nodeIndex finds the nodes: usable are those that offer room (not cordoned or being deleted,
// and reporting what they can allocate: a node's status comes after the node), with since
// when each is Ready (zero: not Ready yet).
type nodeIndex struct {
	byName, byID map[string]*corev1.Node
	usable       map[string]time.Time
}

func indexNodes(nodes []*corev1.Node) nodeIndex {
	idx := nodeIndex{byName: map[string]*corev1.Node{}, byID: map[string]*corev1.Node{}, usable: map[string]time.Time{}}
	for _, n := range nodes {
		idx.byName[n.Name] = n
		if n.Spec.ProviderID != "" {
			idx.byID[n.Spec.ProviderID] = n
		}
		if n.DeletionTimestamp == nil && !n.Spec.Unschedulable && len(n.Status.Allocatable) > 0 {
			idx.usable[n.Name] = time.Time{}
			if ready, since := scheduling.NodeReady(n); ready {
				idx.usable[n.Name] = since
			}
		}
	}
	return idx
}

// claimIndex pairs NodeClaims with their Nodes. A NodeClaim is in flight, not being deleted,
// until its Node (found by name or provider ID) is there and reports what it can allocate (or
// is cordoned or deleted); from then on the Node stands for it. nodeOf names each NodeClaim's
// Node (a nomination names the NodeClaim it launched for, and holds on its Node once that is
// there); claimOf is the other way round.
type claimIndex struct {
	inFlight map[string]bool
	nodeOf   map[string]string
	claimOf  map[string]*karpv1.NodeClaim
}

func indexClaims(claims []*karpv1.NodeClaim, nodes nodeIndex) claimIndex {
	idx := claimIndex{inFlight: map[string]bool{}, nodeOf: map[string]string{}, claimOf: map[string]*karpv1.NodeClaim{}}
	for _, nc := range claims {
		n := nodes.byName[nc.Status.NodeName]
		if n == nil {
			n = nodes.byID[nc.Status.ProviderID]
		}
		if n != nil {
			idx.claimOf[n.Name] = nc
		}
		switch {
		case n != nil && (len(n.Status.Allocatable) > 0 || n.DeletionTimestamp != nil || n.Spec.Unschedulable):
			idx.nodeOf[nc.Name] = n.Name
		case nc.DeletionTimestamp == nil:
			idx.inFlight[nc.Name] = true
		}
	}
	return idx
}

// assignment is where each pod is: bound to a node, nominated to an in-flight NodeClaim or to
// a node (held only while the node has room, see holdNominations), or pending.
type assignment struct {
	// byNode are the pods bound to each node, not finished; byClaim those nominated to each
	// in-flight NodeClaim; nominatedOn those nominated to each node, and held the ones of them
	// whose place holds.
	byNode, byClaim, nominatedOn, held map[string][]*corev1.Pod
	pending                            []*corev1.Pod
}

func assign(pods []*corev1.Pod, nodes nodeIndex, claims claimIndex, env Env) assignment {
	a := assignment{byNode: map[string][]*corev1.Pod{}, byClaim: map[string][]*corev1.Pod{}, nominatedOn: map[string][]*corev1.Pod{},
		held: map[string][]*corev1.Pod{}}
	for _, p := range pods {
		switch {
		case p.Spec.NodeName != "" && !scheduling.IsTerminal(p):
			a.byNode[p.Spec.NodeName] = append(a.byNode[p.Spec.NodeName], p)
		case scheduling.IsProvisionable(p):
			// A nominated pod keeps its room where the solver put it, for as long as its
			// nomination holds; then, or if its target is gone, it is solved again.
			if env.Nominations == nil {
				a.pending = append(a.pending, p)
				continue
			}
			target, at, ok := env.Nominations.NominatedTo(p)
			if name, launched := claims.nodeOf[target]; launched {
				target = name
			}
			ready, onNode := nodes.usable[target]
			switch {
			case ok && claims.inFlight[target]:
				a.byClaim[target] = append(a.byClaim[target], p)
			case ok && onNode && (ready.IsZero() || env.Now.Sub(later(at, ready)) <= ExistingNominationTTL):
				a.nominatedOn[target] = append(a.nominatedOn[target], p)
			default:
				a.pending = append(a.pending, p)
			}
		}
	}
	return a
}

// holdNominations keeps a nomination to a registered node only while the node has room for
// the pod besides the pods bound there, and can attach its volumes (its CSINode's limits); a displaced pod waits out the displaced grace, then
// is solved again (appended to snap.Pods). A pod kube-scheduler refused once its node was
// schedulable is displaced too. It returns how many pods wait, and for how long the first.
func holdNominations(list []*corev1.Node, nodes nodeIndex, claims claimIndex, a assignment, snap *Snapshot, env Env) (int, time.Duration) {
	if env.Nominations == nil {
		return 0, 0
	}
	displaced, retryAfter := 0, time.Duration(0)
	for _, n := range list {
		name := n.Name
		if len(a.nominatedOn[name]) == 0 {
			continue
		}
		free := n.Status.Allocatable
		att := scheduling.NewAttachments(snap.volumeLimits[name])
		for _, p := range a.byNode[name] {
			free = scheduling.Subtract(free, snap.Requests.Of(p))
			att.Add(snap.PodVolumes[namespaced(p.Namespace, p.Name)])
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
			req, vols := snap.Requests.Of(p), snap.PodVolumes[namespaced(p.Namespace, p.Name)]
			fits, _ := scheduling.Fits(req, free)
			attaches, _ := att.Fits(vols)
			if fits && attaches && !env.Nominations.RejectedSince(p, schedulable) {
				free = scheduling.Subtract(free, req)
				att.Add(vols)
				a.held[name] = append(a.held[name], p)
				continue
			}
			wait := env.Nominations.DisplacedGrace()
			if ready := nodes.usable[name]; !ready.IsZero() {
				wait -= env.Now.Sub(ready)
			}
			if wait <= 0 {
				snap.Pods = append(snap.Pods, p)
				if snap.misfits(p, n, a.byNode[name]) {
					snap.Misfits = append(snap.Misfits, Misfit{Pod: p, Node: name})
				}
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

// stateNodes are every node and in-flight NodeClaim, priced, with the pods bound, held or
// nominated there.
func (s *Snapshot) stateNodes(objs *Objects, nodes nodeIndex, claims claimIndex, a assignment, env Env) []*StateNode {
	var all [][]*cloudprovider.InstanceType
	for _, its := range s.instanceTypes {
		all = append(all, its)
	}
	anyPool := slices.Concat(all...)
	out := make([]*StateNode, 0, len(objs.Nodes)+len(claims.inFlight))
	for _, n := range objs.Nodes {
		nc := claims.claimOf[n.Name]
		if nc != nil && claims.inFlight[nc.Name] {
			// It has not reported what it can allocate yet: its NodeClaim stands for it.
			continue
		}
		sn := &StateNode{Node: n, NodeClaim: nc, Pods: a.byNode[n.Name], NodePool: n.Labels[karpv1.NodePoolLabelKey]}
		if sn.NodePool == "" && nc != nil {
			sn.NodePool = nc.Labels[karpv1.NodePoolLabelKey]
		}
		its, ok := s.instanceTypes[sn.NodePool]
		if !ok {
			// A node of no known NodePool is priced and labelled from every NodePool's catalog.
			its = anyPool
		}
		sn.Labels = nodeLabels(n, its)
		sn.PricePerHour, _ = scheduling.NodePrice(its, sn.Labels)
		sn.Ready, _ = scheduling.NodeReady(n)
		sn.Deleting = n.DeletionTimestamp != nil || nc != nil && nc.DeletionTimestamp != nil
		sn.Disrupted = hasTaintKey(n.Spec.Taints, karpv1.DisruptedTaintKey)
		sn.Initialized = sn.Ready
		if nc != nil {
			sn.Initialized = meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized)
			sn.Rebooting = meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRebooting)
		}
		sn.Nominated = len(a.nominatedOn[n.Name]) > 0
		if nc != nil {
			var seen time.Time
			if env.SeenPodEvent != nil {
				seen = env.SeenPodEvent(n.Name)
			}
			sn.LastPodEvent = LastPodEvent(nc, seen)
		}
		if _, usable := nodes.usable[n.Name]; usable {
			initializing := nc
			if sn.Initialized && !sn.Rebooting {
				initializing = nil
			}
			sn.Sched = &scheduling.Node{Name: n.Name, Labels: sn.Labels, Taints: schedulableTaints(n, initializing),
				Allocatable: n.Status.Allocatable, Pods: slices.Concat(sn.Pods, a.held[n.Name]), PricePerHour: sn.PricePerHour,
				VolumeLimits: s.volumeLimits[n.Name]}
		}
		out = append(out, sn)
	}
	for _, nc := range objs.NodeClaims {
		if !claims.inFlight[nc.Name] {
			continue
		}
		pool := nc.Labels[karpv1.NodePoolLabelKey]
		price, launchAlloc := launchOffer(nc, s.instanceTypes[pool])
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
		pods := a.byClaim[nc.Name]
		sn := &StateNode{NodeClaim: nc, NodePool: pool, Labels: labels, PricePerHour: price, InFlight: true, Nominated: len(pods) > 0,
			Deleting: nc.DeletionTimestamp != nil}
		sn.Sched = &scheduling.Node{Name: nc.Name, Labels: labels, Taints: nc.Spec.Taints, Allocatable: alloc, Pods: pods, InFlight: true, PricePerHour: price}
		out = append(out, sn)
	}
	return out
}

// nodeLabels are the node's labels, with its hostname, and the labels of its instance type
// that it lacks (a node Karpenter launched carries them all; a manifest for simulate often
// names only the type).
func nodeLabels(n *corev1.Node, its []*cloudprovider.InstanceType) map[string]string {
	l := map[string]string{corev1.LabelHostname: n.Name}
	if name := n.Labels[corev1.LabelInstanceTypeStable]; name != "" {
		for _, it := range its {
			if it.Name == name {
				for k, v := range it.Labels {
					l[k] = v
				}
				break
			}
		}
	}
	for k, v := range n.Labels {
		l[k] = v
	}
	return l
}

func hasTaintKey(taints []corev1.Taint, key string) bool {
	for _, t := range taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// launchOffer is what an in-flight NodeClaim will be: its launched offering's price, or
// before launch the offering the solver priced it at (cloudprovider.PricedOfferingAnnotation,
// which the provider launches first) or, without one, the cheapest available offering its
// requirements allow (the one price rule, scheduling.CheapestOffering), with that instance
// type's allocatable, among its NodePool's instance types; zero when it cannot be told.
func launchOffer(nc *karpv1.NodeClaim, its []*cloudprovider.InstanceType) (float64, corev1.ResourceList) {
	if p, ok := cloudprovider.PricedOfferingOf(nc); ok && nc.Labels[karpv1.LabelInstanceType] == "" {
		for _, it := range its {
			if it.Name == p.InstanceType {
				return p.Price, it.Allocatable()
			}
		}
	}
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
// unregistered taint, and while its NodeClaim initializes or reboots, neither its startup
// taints, the node's not-ready taint nor the rebooting fence, which go once it is Ready or
// back from the reboot (pods placed there are bound then).
func schedulableTaints(n *corev1.Node, initializing *karpv1.NodeClaim) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.UnregisteredTaintKey {
			continue
		}
		if initializing != nil && (t.Key == corev1.TaintNodeNotReady || t.Key == karpv1.RebootingTaintKey || slices.ContainsFunc(initializing.Spec.StartupTaints, func(st corev1.Taint) bool { return st.MatchTaint(&t) })) {
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

// LastPodEvent is when a pod last came to the NodeClaim's node or left it: seen (what this
// process watched), else status.lastPodEventTime, and never before the node initialized.
func LastPodEvent(nc *karpv1.NodeClaim, seen time.Time) time.Time {
	last := nc.Status.LastPodEventTime.Time
	if seen.After(last) {
		last = seen
	}
	if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeInitialized); cond != nil && cond.LastTransitionTime.After(last) {
		last = cond.LastTransitionTime.Time
	}
	return last
}

// daemonSetPods are the DaemonSets' pods as they would run on a new node: each template as
// admitted in its namespace, or its newest pod's requests where more.
func daemonSetPods(objs *Objects) []scheduling.DaemonSetPod {
	if len(objs.DaemonSets) == 0 {
		return nil
	}
	owners := make(map[types.UID]bool, len(objs.DaemonSets))
	for _, ds := range objs.DaemonSets {
		owners[ds.UID] = true
	}
	newest := map[types.UID]*corev1.Pod{}
	for _, p := range objs.Pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind != "DaemonSet" || ref.UID == "" || !owners[ref.UID] || scheduling.IsTerminal(p) {
			continue
		}
		if n := newest[ref.UID]; n == nil || n.CreationTimestamp.Before(&p.CreationTimestamp) {
			newest[ref.UID] = p
		}
	}
	adm := scheduling.Admission{LimitRanges: objs.LimitRanges, RuntimeClasses: objs.RuntimeClasses}
	out := make([]scheduling.DaemonSetPod, 0, len(objs.DaemonSets))
	for _, ds := range objs.DaemonSets {
		var n *corev1.Pod
		if ds.UID != "" {
			n = newest[ds.UID]
		}
		out = append(out, scheduling.DaemonSetRequests(ds.Spec.Template, ds.Namespace, n, adm))
	}
	return out
}
