package methods

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// PodDeletionCostAnnotation is the pod annotation ReplicaSets scale down by, which
// disruption weighs too.
const PodDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// NewCluster is disruption's view of a snapshot: every node and in-flight NodeClaim that offers
// room (the snapshot's Nodes, where a command's pods may go), and the candidates among the
// managed nodes (of a known NodePool that is not static, initialized, not being deleted,
// disrupted, rebooting or NotReady), priced from their NodePool's instance types. The snapshot's pending
// pods and the pods of deleting nodes are placed first in every simulation, so that no command
// takes the room they need.
func NewCluster(snap *snapshot.Snapshot, opts Options) *Cluster {
	c := &Cluster{NodePools: map[string]*NodePoolState{}, Disrupting: map[string]int{}, PoolSizes: map[string]int{}, NotReady: map[string]int{},
		Now: snap.Now, Options: opts, Requests: snap.Requests, snap: snap, Nodes: snap.Nodes}
	for _, np := range snap.NodePools {
		state := &NodePoolState{NodePool: np.NodePool, InstanceTypes: np.InstanceTypes,
			DaemonSetOverhead: solver.DaemonSetOverhead(np.NodePool, snap.DaemonSets)}
		if opts.NodeRepair && opts.RepairPolicies != nil {
			state.RepairPolicies = opts.RepairPolicies(np.NodePool)
		}
		c.NodePools[np.NodePool.Name] = state
	}
	var pods []*corev1.Pod
	for _, n := range snap.StateNodes {
		pods = append(pods, n.Pods...)
	}
	pdbs := newPDBLimits(snap.PDBs, pods)
	c.uninitialized = map[string]bool{}
	for _, n := range snap.StateNodes {
		if n.Sched != nil && (n.InFlight || !n.Initialized || !n.Ready) {
			c.uninitialized[n.Sched.Name] = true
		}
		if n.InFlight {
			continue
		}
		pool := n.NodePool
		disrupting := n.Deleting || n.Disrupted || n.Rebooting || !n.Ready
		if pool != "" {
			c.PoolSizes[pool]++
			if disrupting {
				c.Disrupting[pool]++
			}
			if !n.Ready && !n.Deleting && !n.Disrupted && !n.Rebooting {
				c.NotReady[pool]++
			}
		}
		if pool == "" || disrupting || n.Sched == nil {
			continue
		}
		np := c.NodePools[pool]
		if np == nil {
			c.Unconsolidatable = append(c.Unconsolidatable, Unconsolidatable{Node: n.Name(), Reason: fmt.Sprintf("NodePool %s not found", pool)})
			continue
		}
		if !n.Initialized || np.NodePool.IsStatic() {
			// controllers/static replaces a static pool's drifted and expired nodes one for
			// one, and nothing consolidates them.
			continue
		}
		cand := newCandidate(c, n, np)
		reason := blocked(n.Node, cand, pdbs, c.Now)
		if reason == "" && n.Nominated {
			reason = "pods are nominated to it"
		}
		if reason != "" {
			cand.Blocked = reason
			c.Unconsolidatable = append(c.Unconsolidatable, Unconsolidatable{Node: n.Name(), Reason: reason})
		}
		c.Candidates = append(c.Candidates, cand)
	}
	if opts.NodeRepair {
		c.collectUnhealthy(snap)
	}
	c.pdbs = pdbs
	c.blockedNotes = append([]Unconsolidatable(nil), c.Unconsolidatable...)
	return c
}

func newCandidate(c *Cluster, n *snapshot.StateNode, np *NodePoolState) *Candidate {
	nc := n.NodeClaim
	cand := &Candidate{Node: n.Sched, NodeClaim: nc, NodePool: np.NodePool, CapacityType: n.Labels[karpv1.CapacityTypeLabelKey],
		CreatedAt: n.Node.CreationTimestamp.Time, LastPodEvent: n.LastPodEvent, PricePerHour: n.PricePerHour}
	for _, it := range np.InstanceTypes {
		if it.Name == n.Labels[corev1.LabelInstanceTypeStable] {
			cand.InstanceType = it
			break
		}
	}
	for _, p := range n.Pods {
		if scheduling.IsReschedulable(p) {
			cand.Pods = append(cand.Pods, p)
		}
	}
	if nc != nil {
		if !nc.CreationTimestamp.IsZero() {
			cand.CreatedAt = nc.CreationTimestamp.Time
		}
		if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDrifted); cond != nil && cond.Status == metav1.ConditionTrue {
			cand.DriftedSince, cand.DriftReason = cond.LastTransitionTime.Time, cond.Reason
		}
	}
	if cand.DriftReason == "" {
		if r := StaticDrift(n.Labels, nc, np.NodePool); r != "" {
			cand.DriftedSince, cand.DriftReason = cand.CreatedAt, r
		}
	}
	cand.DisruptionCost = disruptionCost(cand, c.Now)
	return cand
}

// StaticDrift says why a node no longer matches its NodePool: its NodeClaim's template hash
// differs (same hash version), or its labels no longer meet the NodePool's requirements.
func StaticDrift(labels map[string]string, nc *karpv1.NodeClaim, np *karpv1.NodePool) string {
	if nc != nil {
		if h, ok := nc.Annotations[karpv1.NodePoolHashAnnotationKey]; ok &&
			nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] == karpv1.NodePoolHashVersion && h != np.Hash() {
			return "NodePoolDrifted"
		}
	}
	reqs := scheduling.NewRequirements(np.Spec.Template.Spec.Requirements...)
	for k, v := range np.Spec.Template.Labels {
		reqs.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpIn, v))
	}
	if err := scheduling.LabelRequirements(labels).Compatible(reqs); err != nil {
		return "RequirementsDrifted"
	}
	return ""
}

// InstanceTypeNotFound reports whether the node's instance type (its label) is no longer in
// the catalog its NodePool's node class offers, as upstream's InstanceTypeNotFound drift: a
// node whose type is gone cannot be launched again as it is, and is replaced. A node without
// the label (not launched by Karpenter) has no type to lose.
func InstanceTypeNotFound(labels map[string]string, its []*cloudprovider.InstanceType) bool {
	name := labels[karpv1.LabelInstanceType]
	if name == "" {
		return false
	}
	for _, it := range its {
		if it.Name == name {
			return false
		}
	}
	return true
}

// blocked says why voluntary, graceful disruption of the node must wait: the node's or a
// pod's karpenter.sh/do-not-disrupt, or a PodDisruptionBudget that allows none of its pods to
// be evicted now. Expiration goes ahead regardless; the drain then waits for them.
func blocked(n *corev1.Node, cand *Candidate, pdbs *pdbLimits, now time.Time) string {
	if n.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
		return "node has " + karpv1.DoNotDisruptAnnotationKey
	}
	for _, p := range cand.Pods {
		if doNotDisrupt(p, now) {
			return fmt.Sprintf("pod %s/%s has %s", p.Namespace, p.Name, karpv1.DoNotDisruptAnnotationKey)
		}
	}
	if pdb := pdbs.blocking(cand.Pods); pdb != "" {
		return "PodDisruptionBudget " + pdb + " allows no eviction of its pods now"
	}
	return ""
}

// doNotDisrupt reports whether a pod's karpenter.sh/do-not-disrupt holds now: "true" always,
// a duration ("30m") for that long after the pod was created.
func doNotDisrupt(p *corev1.Pod, now time.Time) bool {
	holds, _ := scheduling.DoNotDisrupt(p, now)
	return holds
}

// disruptionCost is what disrupting the node costs its pods: their eviction costs
// (podEvictionCost) summed and weighted by the share of the node's lifetime (expireAfter)
// still ahead, so that nodes about to expire anyway are cheap to disrupt.
func disruptionCost(c *Candidate, now time.Time) float64 {
	total := 0.0
	for _, p := range c.Pods {
		total += podEvictionCost(p)
	}
	// The lifetime is the one the expiration controller ends (ExpiresAt).
	if at := c.ExpiresAt(); !at.IsZero() && at.After(c.CreatedAt) {
		remaining := float64(at.Sub(now)) / float64(at.Sub(c.CreatedAt))
		total *= min(1, max(0, remaining))
	}
	return total
}

// pdbLimits are how many more pods each PodDisruptionBudget lets be evicted now.
type pdbLimits struct {
	pdbs    []*k8spolicyv1.PodDisruptionBudget
	allowed []int
	sel     []labels.Selector
}

func newPDBLimits(pdbs []*k8spolicyv1.PodDisruptionBudget, pods []*corev1.Pod) *pdbLimits {
	l := &pdbLimits{}
	for _, pdb := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			sel = labels.Everything()
		}
		matching := 0
		for _, p := range pods {
			if p.Namespace == pdb.Namespace && sel.Matches(labels.Set(p.Labels)) && scheduling.IsReschedulable(p) {
				matching++
			}
		}
		l.pdbs, l.sel, l.allowed = append(l.pdbs, pdb), append(l.sel, sel), append(l.allowed, pdbAllowed(pdb, matching))
	}
	return l
}

// pdbAllowed is the PDB's disruptionsAllowed: from status when the PDB controller wrote it,
// else from spec over the matching pods (all taken as healthy).
func pdbAllowed(pdb *k8spolicyv1.PodDisruptionBudget, matching int) int {
	if pdb.Status.ObservedGeneration > 0 {
		return int(pdb.Status.DisruptionsAllowed)
	}
	scaled := func(v *intstr.IntOrString) int {
		n, err := intstr.GetScaledValueFromIntOrPercent(v, matching, true)
		if err != nil {
			return matching
		}
		return n
	}
	switch {
	case pdb.Spec.MinAvailable != nil:
		return max(0, matching-scaled(pdb.Spec.MinAvailable))
	case pdb.Spec.MaxUnavailable != nil:
		return max(0, scaled(pdb.Spec.MaxUnavailable))
	}
	return matching
}

// blocking names the first PDB that allows no eviction now of a pod among pods, "" when each
// may be evicted. As upstream, each pod must be evictable now, not all at once: the drain
// evicts them within the PDB over time, waiting for the replacements to become ready.
func (l *pdbLimits) blocking(pods []*corev1.Pod) string {
	for i, pdb := range l.pdbs {
		if l.allowed[i] > 0 {
			continue
		}
		for _, p := range pods {
			if p.Namespace == pdb.Namespace && l.sel[i].Matches(labels.Set(p.Labels)) {
				return pdb.Namespace + "/" + pdb.Name
			}
		}
	}
	return ""
}

// Hold marks the candidates named in held (node: until when, and why) as blocked for
// graceful disruption until then: a command on them rolled back because its replacements
// never initialized, and trying again at once would launch another replacement that is
// likely to fail the same way. Expiration and repair are not held.
func (c *Cluster) Hold(held map[string]Held) {
	if c.held == nil {
		c.held = map[string]time.Time{}
	}
	for _, cand := range c.Candidates {
		h, ok := held[cand.Name()]
		if !ok || !h.Until.After(c.Now) || cand.Blocked != "" {
			continue
		}
		cand.Blocked = fmt.Sprintf("%s; tried again after %s", h.Why, h.Until.UTC().Format(time.RFC3339))
		c.held[cand.Name()] = h.Until
		c.Unconsolidatable = append(c.Unconsolidatable, Unconsolidatable{Node: cand.Name(), Reason: cand.Blocked})
		c.blockedNotes = append(c.blockedNotes, Unconsolidatable{Node: cand.Name(), Reason: cand.Blocked})
	}
}

// Held is a hold on disrupting a node again (Cluster.Hold).
type Held struct {
	Until time.Time
	Why   string
}

// InFlight takes the nodes of commands in flight out of the candidates: they count as
// disrupting against their NodePools' budgets from the moment a command is handed over, before
// its taint reaches the snapshot.
// An unhealthy node in flight is left to its command: repair does not issue another one.
// One that was not a candidate counts as disrupting against every budget now, Unhealthy's
// included (a NotReady node counted against the others already; a static pool's had not).
func (c *Cluster) InFlight(nodes map[string]bool) {
	kept := c.Candidates[:0]
	counted := map[string]bool{}
	for _, cand := range c.Candidates {
		if nodes[cand.Name()] {
			c.Disrupting[cand.NodePoolName()]++
			counted[cand.Name()] = true
			continue
		}
		kept = append(kept, cand)
	}
	c.Candidates = kept
	for _, u := range c.Unhealthy {
		if !nodes[u.Name()] {
			continue
		}
		u.InFlight = true
		switch pool := u.NodePoolName(); {
		case counted[u.Name()]:
		case u.NotReady:
			c.NotReady[pool]--
		default:
			c.Disrupting[pool]++
		}
	}
}
