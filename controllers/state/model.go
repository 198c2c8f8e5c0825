package state

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

// model is the cluster as the informers last told it, kept up to date object by object by
// their event handlers (docs/architecture.md, "Data flow": the runtime core). Nothing lists
// the cluster to build it; a snapshot copies the pointers.
type model struct {
	mu         sync.RWMutex
	pods       map[types.NamespacedName]*corev1.Pod
	nodes      map[string]*corev1.Node
	claims     map[string]*karpv1.NodeClaim
	pools      map[string]*karpv1.NodePool
	daemonSets map[types.NamespacedName]*appsv1.DaemonSet
	pdbs       map[types.NamespacedName]*k8spolicyv1.PodDisruptionBudget
	namespaces map[string]*corev1.Namespace
	budgets    map[types.NamespacedName]*policyv1.CapacityBudget
	cbudgets   map[string]*policyv1.ClusterCapacityBudget
	limits     map[types.NamespacedName]*corev1.LimitRange
	runtimes   map[string]*nodev1.RuntimeClass
	pvs        map[string]*corev1.PersistentVolume
	pvcs       map[types.NamespacedName]*corev1.PersistentVolumeClaim
	classes    map[string]*storagev1.StorageClass
	csiNodes   map[string]*storagev1.CSINode
	overlays   map[string]*karpv1alpha1.NodeOverlay
	// overlaysOn is set by WithNodeOverlays (the NodeOverlay feature gate): only then are
	// NodeOverlays watched and given to snapshots.
	overlaysOn bool
	// policies are the CapacityPolicies' generations: they are no input of a snapshot, but a
	// change to one can change what the policy gate lets through.
	policies map[string]int64
	// provisionable are the pods the provisioner should find a node for (Provisionable).
	provisionable map[types.NamespacedName]bool
	// revision counts the changes that can change a decision; a pass that found nothing to do
	// need not run again until it moves.
	revision uint64
	// synced report whether each informer's handler has been given the initial list;
	// registered is set once Register ran (a model fed by hand, in tests and karpenterctl, is
	// synced by definition).
	synced     []toolscache.InformerSynced
	registered bool
}

func newModel() *model {
	return &model{pods: map[types.NamespacedName]*corev1.Pod{}, nodes: map[string]*corev1.Node{}, claims: map[string]*karpv1.NodeClaim{},
		pools: map[string]*karpv1.NodePool{}, daemonSets: map[types.NamespacedName]*appsv1.DaemonSet{},
		pdbs: map[types.NamespacedName]*k8spolicyv1.PodDisruptionBudget{}, namespaces: map[string]*corev1.Namespace{},
		budgets:  map[types.NamespacedName]*policyv1.CapacityBudget{},
		cbudgets: map[string]*policyv1.ClusterCapacityBudget{},
		limits:   map[types.NamespacedName]*corev1.LimitRange{}, runtimes: map[string]*nodev1.RuntimeClass{},
		pvs: map[string]*corev1.PersistentVolume{}, pvcs: map[types.NamespacedName]*corev1.PersistentVolumeClaim{},
		classes: map[string]*storagev1.StorageClass{}, csiNodes: map[string]*storagev1.CSINode{}, overlays: map[string]*karpv1alpha1.NodeOverlay{}, policies: map[string]int64{}, provisionable: map[types.NamespacedName]bool{}}
}

// watched are the kinds the model holds: Watched, and NodeOverlays when they are on.
func (m *model) watched() []client.Object {
	if m.overlaysOn {
		return append(Watched(), &karpv1alpha1.NodeOverlay{})
	}
	return Watched()
}

// Watched are the kinds the model always holds.
func Watched() []client.Object {
	return []client.Object{&corev1.Pod{}, &corev1.Node{}, &karpv1.NodeClaim{}, &karpv1.NodePool{}, &appsv1.DaemonSet{},
		&k8spolicyv1.PodDisruptionBudget{}, &corev1.Namespace{}, &policyv1.CapacityBudget{}, &policyv1.ClusterCapacityBudget{}, &policyv1.CapacityPolicy{},
		&corev1.LimitRange{}, &nodev1.RuntimeClass{}, &corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}, &storagev1.StorageClass{},
		&storagev1.CSINode{}}
}

// Register adds the model's event handlers to the manager's informers (created here if no
// controller asked for them yet); the cache starts them with the manager.
func (c *Cluster) Register(ctx context.Context, informers cache.Informers) error {
	c.model.mu.Lock()
	c.model.registered = true
	c.model.mu.Unlock()
	for _, obj := range c.model.watched() {
		inf, err := informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("the informer of %T: %w", obj, err)
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			// The initial list is what was there before this process: it is no pod event.
			AddFunc:    func(o any, initial bool) { c.update(o, !initial) },
			UpdateFunc: func(_, o any) { c.update(o, true) },
			DeleteFunc: func(o any) { c.Delete(o) },
		})
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		c.model.mu.Lock()
		c.model.synced = append(c.model.synced, reg.HasSynced)
		c.model.mu.Unlock()
	}
	return nil
}

// Synced reports whether every informer's handler has been given what the API server held
// when it started: until then a decision would be made on part of the cluster (a scale-up
// for pods whose nodes are not known yet, a consolidation of nodes whose pods are not), so
// every decision waits for it.
func (c *Cluster) Synced() bool {
	c.model.mu.RLock()
	defer c.model.mu.RUnlock()
	if len(c.model.synced) == 0 {
		return !c.model.registered
	}
	for _, s := range c.model.synced {
		if !s() {
			return false
		}
	}
	return true
}

// NodeCount is how many Nodes the model holds (karpenter_cluster_state_node_count).
func (c *Cluster) NodeCount() int {
	c.model.mu.RLock()
	defer c.model.mu.RUnlock()
	return len(c.model.nodes)
}

// Update records an object's new state (an informer's add or update, or an object read from a
// manifest).
func (c *Cluster) Update(o any) { c.update(o, true) }

// update records an object; live says whether it is news (a pod that came or went now).
func (c *Cluster) update(o any, live bool) {
	m := c.model
	m.mu.Lock()
	defer m.mu.Unlock()
	switch v := o.(type) {
	case *corev1.Pod:
		key := client.ObjectKeyFromObject(v)
		old := m.pods[key]
		m.pods[key] = v
		if scheduling.IsProvisionable(v) {
			m.provisionable[key] = true
		} else {
			delete(m.provisionable, key)
		}
		if old == nil || podChanged(old, v) {
			m.revision++
		}
		c.notePreemption(v)
		if live && v.Spec.NodeName != "" && (old == nil || old.Spec.NodeName != v.Spec.NodeName || !IsTerminalOrGone(old) && IsTerminalOrGone(v)) {
			c.podEvent(v.Spec.NodeName)
		}
	case *corev1.Node:
		old := m.nodes[v.Name]
		m.nodes[v.Name] = v
		if old == nil || scheduling.NodeChanged(old, v) {
			m.revision++
		}
	case *karpv1.NodeClaim:
		old := m.claims[v.Name]
		m.claims[v.Name] = v
		if old == nil || claimChanged(old, v) {
			m.revision++
		}
	case *karpv1.NodePool:
		old := m.pools[v.Name]
		m.pools[v.Name] = v
		if old == nil || old.Generation != v.Generation || !equality.Semantic.DeepEqual(old.DeletionTimestamp, v.DeletionTimestamp) {
			m.revision++
		}
	case *appsv1.DaemonSet:
		old := m.daemonSets[client.ObjectKeyFromObject(v)]
		m.daemonSets[client.ObjectKeyFromObject(v)] = v
		if old == nil || old.Generation != v.Generation {
			m.revision++
		}
	case *k8spolicyv1.PodDisruptionBudget:
		m.pdbs[client.ObjectKeyFromObject(v)] = v
		m.revision++
	case *corev1.Namespace:
		old := m.namespaces[v.Name]
		m.namespaces[v.Name] = v
		if old == nil || !equality.Semantic.DeepEqual(old.Labels, v.Labels) {
			m.revision++
		}
	case *karpv1alpha1.NodeOverlay:
		old := m.overlays[v.Name]
		m.overlays[v.Name] = v
		if old == nil || old.Generation != v.Generation {
			m.revision++
		}
	case *policyv1.CapacityBudget:
		old := m.budgets[client.ObjectKeyFromObject(v)]
		m.budgets[client.ObjectKeyFromObject(v)] = v
		if old == nil || old.Generation != v.Generation {
			m.revision++
		}
	case *policyv1.ClusterCapacityBudget:
		old := m.cbudgets[v.Name]
		m.cbudgets[v.Name] = v
		if old == nil || old.Generation != v.Generation {
			m.revision++
		}
	case *corev1.LimitRange:
		old := m.limits[client.ObjectKeyFromObject(v)]
		m.limits[client.ObjectKeyFromObject(v)] = v
		if old == nil || !equality.Semantic.DeepEqual(old.Spec, v.Spec) {
			m.revision++
		}
	case *nodev1.RuntimeClass:
		old := m.runtimes[v.Name]
		m.runtimes[v.Name] = v
		if old == nil || !equality.Semantic.DeepEqual(old.Overhead, v.Overhead) {
			m.revision++
		}
	case *corev1.PersistentVolume:
		old := m.pvs[v.Name]
		m.pvs[v.Name] = v
		if old == nil || !equality.Semantic.DeepEqual(old.Spec.NodeAffinity, v.Spec.NodeAffinity) || old.Spec.ClaimRef != v.Spec.ClaimRef && (old.Spec.ClaimRef == nil || v.Spec.ClaimRef == nil) {
			m.revision++
		}
	case *corev1.PersistentVolumeClaim:
		old := m.pvcs[client.ObjectKeyFromObject(v)]
		m.pvcs[client.ObjectKeyFromObject(v)] = v
		if old == nil || old.Spec.VolumeName != v.Spec.VolumeName || !equality.Semantic.DeepEqual(old.Spec.StorageClassName, v.Spec.StorageClassName) {
			m.revision++
		}
	case *storagev1.StorageClass:
		m.classes[v.Name] = v
		m.revision++
	case *storagev1.CSINode:
		old := m.csiNodes[v.Name]
		m.csiNodes[v.Name] = v
		if old == nil || !equality.Semantic.DeepEqual(old.Spec, v.Spec) {
			m.revision++
		}
	case *policyv1.CapacityPolicy:
		if gen, ok := m.policies[v.Name]; !ok || gen != v.Generation {
			m.policies[v.Name] = v.Generation
			m.revision++
		}
	}
}

// Delete forgets an object (an informer's delete; the object may come as a tombstone).
func (c *Cluster) Delete(o any) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	m := c.model
	m.mu.Lock()
	defer m.mu.Unlock()
	m.revision++
	switch v := o.(type) {
	case *corev1.Pod:
		key := client.ObjectKeyFromObject(v)
		if old := m.pods[key]; old != nil && old.Spec.NodeName != "" && !IsTerminalOrGone(old) {
			c.podEvent(old.Spec.NodeName)
		}
		delete(m.pods, key)
		delete(m.provisionable, key)
		c.Decisions().ForgetDecision(v.UID)
	case *corev1.Node:
		delete(m.nodes, v.Name)
		c.forgetPodEvents(v.Name)
	case *karpv1.NodeClaim:
		delete(m.claims, v.Name)
	case *karpv1.NodePool:
		delete(m.pools, v.Name)
	case *appsv1.DaemonSet:
		delete(m.daemonSets, client.ObjectKeyFromObject(v))
	case *k8spolicyv1.PodDisruptionBudget:
		delete(m.pdbs, client.ObjectKeyFromObject(v))
	case *corev1.Namespace:
		delete(m.namespaces, v.Name)
	case *karpv1alpha1.NodeOverlay:
		delete(m.overlays, v.Name)
	case *policyv1.CapacityBudget:
		delete(m.budgets, client.ObjectKeyFromObject(v))
	case *policyv1.ClusterCapacityBudget:
		delete(m.cbudgets, v.Name)
	case *policyv1.CapacityPolicy:
		delete(m.policies, v.Name)
	case *corev1.LimitRange:
		delete(m.limits, client.ObjectKeyFromObject(v))
	case *nodev1.RuntimeClass:
		delete(m.runtimes, v.Name)
	case *corev1.PersistentVolume:
		delete(m.pvs, v.Name)
	case *corev1.PersistentVolumeClaim:
		delete(m.pvcs, client.ObjectKeyFromObject(v))
	case *storagev1.StorageClass:
		delete(m.classes, v.Name)
	case *storagev1.CSINode:
		delete(m.csiNodes, v.Name)
	}
}

// IsTerminalOrGone reports whether a pod no longer occupies its node's room for long:
// finished or terminating.
func IsTerminalOrGone(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podChanged reports whether a pod's update can change a decision: where it runs or is
// nominated, what it asks, how it may be placed or disrupted. Status writes that change none
// of that (a container's restart count, a probe's timestamps) do not.
func podChanged(a, b *corev1.Pod) bool {
	return a.Spec.NodeName != b.Spec.NodeName || a.Status.Phase != b.Status.Phase || a.Status.NominatedNodeName != b.Status.NominatedNodeName ||
		!equality.Semantic.DeepEqual(a.DeletionTimestamp, b.DeletionTimestamp) || scheduling.IsProvisionable(a) != scheduling.IsProvisionable(b) ||
		a.Generation != b.Generation || !equality.Semantic.DeepEqual(a.Labels, b.Labels) || !equality.Semantic.DeepEqual(a.Annotations, b.Annotations) ||
		!equality.Semantic.DeepEqual(a.Spec.Containers, b.Spec.Containers) // in-place resize changes requests
}

// claimChanged reports whether a NodeClaim's update can change a decision: not the
// Consolidatable condition nor status.lastPodEventTime, which restate the pod events the
// model already saw (and consolidateAfter, which a pass reads with the time).
func claimChanged(a, b *karpv1.NodeClaim) bool {
	strip := func(nc *karpv1.NodeClaim) *karpv1.NodeClaim {
		out := nc.DeepCopy()
		out.ResourceVersion, out.ManagedFields, out.Status.LastPodEventTime = "", nil, metav1.Time{}
		meta.RemoveStatusCondition(&out.Status.Conditions, karpv1.ConditionTypeConsolidatable)
		return out
	}
	return !equality.Semantic.DeepEqual(strip(a), strip(b))
}

// Revision moves whenever something a decision reads changes (not on heartbeats).
func (c *Cluster) Revision() uint64 {
	c.model.mu.RLock()
	defer c.model.mu.RUnlock()
	return c.model.revision
}

// PendingPods is how many pods the provisioner should find a node for, as the model holds
// them now: no snapshot is taken while it is zero.
func (c *Cluster) PendingPods() int {
	c.model.mu.RLock()
	defer c.model.mu.RUnlock()
	return len(c.model.provisionable)
}

// Objects copies the model's pointers into a plain set, each kind sorted by name so that a
// snapshot does not depend on map order.
func (c *Cluster) Objects() *snapshot.Objects {
	m := c.model
	m.mu.RLock()
	defer m.mu.RUnlock()
	return &snapshot.Objects{
		Pods: sortedValues(m.pods, podKey), Nodes: sortedValues(m.nodes, func(n *corev1.Node) string { return n.Name }),
		NodeClaims:             sortedValues(m.claims, func(n *karpv1.NodeClaim) string { return n.Name }),
		NodePools:              sortedValues(m.pools, func(n *karpv1.NodePool) string { return n.Name }),
		DaemonSets:             sortedValues(m.daemonSets, func(d *appsv1.DaemonSet) string { return d.Namespace + "/" + d.Name }),
		PDBs:                   sortedValues(m.pdbs, func(d *k8spolicyv1.PodDisruptionBudget) string { return d.Namespace + "/" + d.Name }),
		Namespaces:             sortedValues(m.namespaces, func(n *corev1.Namespace) string { return n.Name }),
		CapacityBudgets:        sortedValues(m.budgets, func(b *policyv1.CapacityBudget) string { return b.Namespace + "/" + b.Name }),
		ClusterCapacityBudgets: sortedValues(m.cbudgets, func(b *policyv1.ClusterCapacityBudget) string { return b.Name }),
		LimitRanges:            sortedValues(m.limits, func(l *corev1.LimitRange) string { return l.Namespace + "/" + l.Name }),
		RuntimeClasses:         sortedValues(m.runtimes, func(r *nodev1.RuntimeClass) string { return r.Name }),
		PersistentVolumes:      sortedValues(m.pvs, func(pv *corev1.PersistentVolume) string { return pv.Name }),
		PersistentVolumeClaims: sortedValues(m.pvcs, func(c *corev1.PersistentVolumeClaim) string { return c.Namespace + "/" + c.Name }),
		StorageClasses:         sortedValues(m.classes, func(sc *storagev1.StorageClass) string { return sc.Name }),
		CSINodes:               sortedValues(m.csiNodes, func(n *storagev1.CSINode) string { return n.Name }),
		NodeOverlays:           sortedValues(m.overlays, func(o *karpv1alpha1.NodeOverlay) string { return o.Name }),
	}
}

// NodeClaims copies the model's NodeClaim pointers, sorted by name: for readers that need
// no other kind (garbage collection), without the cost of Objects' 10 000 pods.
func (c *Cluster) NodeClaims() []*karpv1.NodeClaim {
	m := c.model
	m.mu.RLock()
	defer m.mu.RUnlock()
	return sortedValues(m.claims, func(n *karpv1.NodeClaim) string { return n.Name })
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func sortedValues[K comparable, V any](m map[K]V, name func(V) string) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b V) int { return strings.Compare(name(a), name(b)) })
	return out
}

// BudgetGated are the pending pods that only the CapacityBudget gate holds
// (scheduling.IsBudgetGated), for the provisioner to lift it from those it has placed.
func (c *Cluster) BudgetGated() []*corev1.Pod {
	m := c.model
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*corev1.Pod
	for key := range m.provisionable {
		if p := m.pods[key]; p != nil && scheduling.IsBudgetGated(p) {
			out = append(out, p)
		}
	}
	return out
}

// Launched reports whether a nomination target is a node, or a NodeClaim whose instance the
// cloud provider has launched: a pod nominated there has its room, short of the node failing
// to register.
func (c *Cluster) Launched(target string) bool {
	m := c.model
	m.mu.RLock()
	defer m.mu.RUnlock()
	if _, ok := m.nodes[target]; ok {
		return true
	}
	nc, ok := m.claims[target]
	return ok && nc.DeletionTimestamp == nil && (nc.Status.NodeName != "" || meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeLaunched))
}
