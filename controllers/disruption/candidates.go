package disruption

import (
	"fmt"
	"sort"
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
	"github.com/karpenter-policy/karpenter/scheduling/planner"
)

// Input is what a disruption snapshot is built from: the API objects as a cache or a
// repository holds them.
type Input struct {
	Nodes []*corev1.Node
	// Pods are the pods bound to the nodes (spec.nodeName).
	Pods       []*corev1.Pod
	NodeClaims []*karpv1.NodeClaim
	NodePools  []*NodePoolState
	PDBs       []*k8spolicyv1.PodDisruptionBudget
	// Nominated, when set, reports whether pending pods are nominated to a node or NodeClaim:
	// the provisioner counts on its room, so it is not disrupted.
	Nominated func(name string) bool
	Now       time.Time
	Options   Options
}

// PodDeletionCostAnnotation is the pod annotation ReplicaSets scale down by, which
// disruption weighs too.
const PodDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// NewCluster builds the snapshot: every node that offers room, and the candidates among the
// managed ones (labelled with a known NodePool, initialized when their NodeClaim is known,
// not being deleted or disrupted), priced from their NodePool's instance types.
func NewCluster(in Input) *Cluster {
	c := &Cluster{NodePools: map[string]*NodePoolState{}, Disrupting: map[string]int{}, PoolSizes: map[string]int{},
		Now: in.Now, Options: in.Options, Requests: scheduling.NewPodRequestCache()}
	for _, np := range in.NodePools {
		c.NodePools[np.NodePool.Name] = np
	}
	byNode := map[string][]*corev1.Pod{}
	for _, p := range in.Pods {
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	claimOf := map[string]*karpv1.NodeClaim{}
	for _, nc := range in.NodeClaims {
		if nc.Status.NodeName != "" {
			claimOf[nc.Status.NodeName] = nc
		}
	}
	nodes := append([]*corev1.Node(nil), in.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	pdbs := newPDBLimits(in.PDBs, in.Pods)
	// Each NodePool's instance types by name, to price and label its nodes.
	books := map[string]planner.PriceBook{}
	all := make([][]*cloudprovider.InstanceType, 0, len(in.NodePools))
	for _, np := range in.NodePools {
		books[np.NodePool.Name] = planner.NewPriceBook(np.InstanceTypes)
		all = append(all, np.InstanceTypes)
	}
	anyPool := planner.NewPriceBook(all...)
	for _, n := range nodes {
		pool := n.Labels[karpv1.NodePoolLabelKey]
		disrupting := n.DeletionTimestamp != nil || hasTaint(n, karpv1.DisruptedTaintKey) || !isReady(n)
		if pool != "" {
			c.PoolSizes[pool]++
			if disrupting {
				c.Disrupting[pool]++
			}
		}
		if n.DeletionTimestamp != nil || n.Spec.Unschedulable {
			continue
		}
		np := c.NodePools[pool]
		// A node of no known NodePool is priced and labelled from every NodePool's catalog.
		book := anyPool
		if np != nil {
			book = books[pool]
		}
		sn := &scheduling.Node{Name: n.Name, Labels: nodeLabels(n, book), Taints: n.Spec.Taints, Allocatable: n.Status.Allocatable, Pods: byNode[n.Name]}
		sn.PricePerHour, _ = book.Price(n.Labels)
		c.Nodes = append(c.Nodes, sn)
		if pool == "" || disrupting {
			continue
		}
		if np == nil {
			c.Unconsolidatable = append(c.Unconsolidatable, Unconsolidatable{Node: n.Name, Reason: fmt.Sprintf("NodePool %s not found", pool)})
			continue
		}
		nc := claimOf[n.Name]
		if nc != nil && !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
			continue
		}
		if np.NodePool.IsStatic() {
			// controllers/static replaces a static pool's drifted and expired nodes one for
			// one, and nothing consolidates them.
			continue
		}
		cand := newCandidate(c, sn, n, nc, np, book, byNode[n.Name])
		reason := blocked(n, cand, pdbs, c.Now)
		if reason == "" && in.Nominated != nil && (in.Nominated(n.Name) || nc != nil && in.Nominated(nc.Name)) {
			reason = "pods are nominated to it"
		}
		if reason != "" {
			cand.Blocked = reason
			c.Unconsolidatable = append(c.Unconsolidatable, Unconsolidatable{Node: n.Name, Reason: reason})
		}
		c.Candidates = append(c.Candidates, cand)
	}
	c.pdbs = pdbs
	c.blockedNotes = append([]Unconsolidatable(nil), c.Unconsolidatable...)
	return c
}

func newCandidate(c *Cluster, sn *scheduling.Node, n *corev1.Node, nc *karpv1.NodeClaim, np *NodePoolState, book planner.PriceBook, pods []*corev1.Pod) *Candidate {
	cand := &Candidate{Node: sn, NodeClaim: nc, NodePool: np.NodePool, CapacityType: n.Labels[karpv1.CapacityTypeLabelKey],
		CreatedAt:    n.CreationTimestamp.Time,
		InstanceType: book[n.Labels[corev1.LabelInstanceTypeStable]], PricePerHour: sn.PricePerHour}
	for _, p := range pods {
		if scheduling.IsReschedulable(p) {
			cand.Pods = append(cand.Pods, p)
		}
	}
	if nc != nil {
		cand.LastPodEvent = nc.Status.LastPodEventTime.Time
		if !nc.CreationTimestamp.IsZero() {
			cand.CreatedAt = nc.CreationTimestamp.Time
		}
		if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDrifted); cond != nil && cond.Status == metav1.ConditionTrue {
			cand.DriftedSince, cand.DriftReason = cond.LastTransitionTime.Time, cond.Reason
		}
	}
	if cand.DriftReason == "" {
		if r := StaticDrift(sn.Labels, nc, np.NodePool); r != "" {
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
	v, ok := p.Annotations[karpv1.DoNotDisruptAnnotationKey]
	if !ok {
		return false
	}
	if v == "true" {
		return true
	}
	if d, err := time.ParseDuration(v); err == nil {
		return now.Before(p.CreationTimestamp.Add(d))
	}
	return false
}

// disruptionCost is what disrupting the node costs its pods: their eviction costs
// (podEvictionCost) summed and weighted by the share of the node's lifetime (expireAfter)
// still ahead, so that nodes about to expire anyway are cheap to disrupt.
func disruptionCost(c *Candidate, now time.Time) float64 {
	total := 0.0
	for _, p := range c.Pods {
		total += podEvictionCost(p)
	}
	if d := c.NodePool.Spec.Template.Spec.ExpireAfter.Duration; d != nil && *d > 0 {
		remaining := 1 - float64(now.Sub(c.CreatedAt))/float64(*d)
		total *= min(1, max(0, remaining))
	}
	return total
}

// nodeLabels are the node's labels, with its hostname, and the labels of its instance type
// that it lacks (a node Karpenter launched carries them all; a manifest for simulate often
// names only the type).
func nodeLabels(n *corev1.Node, book planner.PriceBook) map[string]string {
	l := map[string]string{corev1.LabelHostname: n.Name}
	if it, ok := book[n.Labels[corev1.LabelInstanceTypeStable]]; ok {
		for k, v := range it.Labels {
			l[k] = v
		}
	}
	for k, v := range n.Labels {
		l[k] = v
	}
	return l
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
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

func isReady(n *corev1.Node) bool {
	ready, _ := scheduling.NodeReady(n)
	return ready
}
