// Package showback says what every namespace's pods cost and what each NodePool's nodes leave
// idle, by the one cost attribution the budgets use (docs/architecture.md, "Cost
// attribution"), over every node of a snapshot and every NodeClaim in flight: the manager's
// metrics and `karpenterctl cost` both read it, so they agree. The namespaces' costs and the
// idle costs add up to the sum of the nodes' prices.
//
// It is pure: it reads a snapshot and does no I/O; it decides nothing and must not be used to
// hold pods back (the budgets' usage, scheduling/planner, does that).
package showback

import (
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

// Node is one priced node (or NodeClaim in flight) and what its pods leave idle.
type Node struct {
	Name         string  `json:"name"`
	NodePool     string  `json:"nodePool,omitempty"`
	InstanceType string  `json:"instanceType,omitempty"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"pricePerHour"`
	// Idle is its price less what its pods are charged. It is negative only when its pods
	// request more than it can allocate (pods bound by name past the scheduler).
	Idle     float64 `json:"idlePerHour"`
	InFlight bool    `json:"inFlight,omitempty"`
	// Pods are how many pods it is charged for, and CPU, Memory and GPU what they request.
	Pods             int     `json:"pods"`
	CPU, Memory, GPU float64 `json:"-"`
	// Priced is false when no instance type the NodePools know prices it: it costs 0 here.
	Priced bool `json:"priced"`
}

// Namespace is what one namespace's pods cost, and what they request.
type Namespace struct {
	Cost float64 `json:"costPerHour"`
	// OnNodePools is its cost by NodePool ("" for nodes of none).
	OnNodePools map[string]float64 `json:"byNodePool,omitempty"`
	Pods        int                `json:"pods"`
	CPU         float64            `json:"cpu"`
	Memory      float64            `json:"memoryBytes"`
	GPU         float64            `json:"gpu,omitempty"`
}

// Showback is the cost of a snapshot's nodes, split between namespaces and idle room.
type Showback struct {
	Namespaces map[string]*Namespace `json:"namespaces"`
	Nodes      []Node                `json:"nodes"`
}

// Of attributes the cost of every node of the snapshot (cordoned and draining ones included:
// they are paid for) and every NodeClaim in flight to the pods on them. Namespaces lists
// every namespace of the snapshot, also those that run nothing.
func Of(snap *snapshot.Snapshot) *Showback {
	s := &Showback{Namespaces: map[string]*Namespace{}}
	for _, ns := range snap.Objects.Namespaces {
		s.Namespaces[ns.Name] = &Namespace{}
	}
	for _, sn := range snap.StateNodes {
		alloc := allocatable(sn)
		n := Node{Name: nodeName(sn), NodePool: sn.NodePool, InstanceType: sn.Labels[corev1.LabelInstanceTypeStable],
			Price: sn.PricePerHour, Idle: sn.PricePerHour, InFlight: sn.InFlight, Priced: sn.PricePerHour > 0}
		n.CapacityType, _ = scheduling.CapacityTypeOf(sn.Labels)
		for _, p := range podsOn(sn) {
			cpu, mem, gpu := snap.Requests.Amounts(p)
			cost := policies.AttributedCost(sn.PricePerHour, policies.Amounts{CPU: cpu, Memory: mem, GPU: gpu}, alloc)
			ns := s.Namespaces[p.Namespace]
			if ns == nil {
				ns = &Namespace{}
				s.Namespaces[p.Namespace] = ns
			}
			if ns.OnNodePools == nil {
				ns.OnNodePools = map[string]float64{}
			}
			ns.Cost += cost
			ns.OnNodePools[sn.NodePool] += cost
			ns.Pods++
			ns.CPU, ns.Memory, ns.GPU = ns.CPU+cpu, ns.Memory+mem, ns.GPU+gpu
			n.Pods++
			n.CPU, n.Memory, n.GPU = n.CPU+cpu, n.Memory+mem, n.GPU+gpu
			n.Idle -= cost
		}
		s.Nodes = append(s.Nodes, n)
	}
	sort.Slice(s.Nodes, func(i, j int) bool { return s.Nodes[i].Name < s.Nodes[j].Name })
	return s
}

// nodeName is a node's name, or its NodeClaim's while it is in flight.
func nodeName(sn *snapshot.StateNode) string {
	if sn.Node != nil {
		return sn.Node.Name
	}
	return sn.NodeClaim.Name
}

// allocatable is what a node can allocate as attribution reads it: the node's status, or an
// in-flight NodeClaim's as the snapshot sizes it.
func allocatable(sn *snapshot.StateNode) policies.Amounts {
	var l corev1.ResourceList
	switch {
	case sn.Node != nil && len(sn.Node.Status.Allocatable) > 0:
		l = sn.Node.Status.Allocatable
	case sn.Sched != nil:
		l = sn.Sched.Allocatable
	}
	cpu, mem, gpu := scheduling.AmountsOf(l)
	return policies.Amounts{CPU: cpu, Memory: mem, GPU: gpu}
}

// podsOn are the pods charged for a node: those bound to it, or nominated to a NodeClaim in
// flight.
func podsOn(sn *snapshot.StateNode) []*corev1.Pod {
	if sn.InFlight && sn.Sched != nil {
		return sn.Sched.Pods
	}
	return sn.Pods
}

// Total is the sum of the nodes' prices.
func (s *Showback) Total() float64 {
	t := 0.0
	for _, n := range s.Nodes {
		t += n.Price
	}
	return t
}

// Idle is the idle cost of each NodePool's nodes ("" for nodes of none).
func (s *Showback) Idle() map[string]float64 {
	out := map[string]float64{}
	for _, n := range s.Nodes {
		out[n.NodePool] += n.Idle
	}
	return out
}

// NodePoolPrices are the sum of each NodePool's nodes' prices ("" for nodes of none).
func (s *Showback) NodePoolPrices() map[string]float64 {
	out := map[string]float64{}
	for _, n := range s.Nodes {
		out[n.NodePool] += n.Price
	}
	return out
}

// Unpriced are the nodes no instance type the NodePools know prices.
func (s *Showback) Unpriced() []string {
	var out []string
	for _, n := range s.Nodes {
		if !n.Priced {
			out = append(out, n.Name)
		}
	}
	return out
}

// SortedNamespaces are the namespaces' names, the costliest first, then by name.
func (s *Showback) SortedNamespaces() []string {
	names := slices.Collect(maps.Keys(s.Namespaces))
	sort.Slice(names, func(i, j int) bool {
		a, b := s.Namespaces[names[i]].Cost, s.Namespaces[names[j]].Cost
		if a != b {
			return a > b
		}
		return names[i] < names[j]
	})
	return names
}
