package planner

import (
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// PriceBook prices nodes by their instance-type, zone and capacity-type labels, from the
// NodePools' instance types.
type PriceBook map[string]*cloudprovider.InstanceType

// NewPriceBook indexes instance types (the NodePools' lists) by name.
func NewPriceBook(typeLists ...[]*cloudprovider.InstanceType) PriceBook {
	b := PriceBook{}
	for _, types := range typeLists {
		for _, it := range types {
			b[it.Name] = it
		}
	}
	return b
}

// poolTypes are the solver NodePools' instance types, for NewPriceBook.
func poolTypes(pools []*solver.NodePool) [][]*cloudprovider.InstanceType {
	out := make([][]*cloudprovider.InstanceType, 0, len(pools))
	for _, p := range pools {
		out = append(out, p.InstanceTypes)
	}
	return out
}

// Price is the hourly price of a node with these labels (scheduling.NodePrice); false when
// the instance type is unknown.
func (b PriceBook) Price(labels map[string]string) (float64, bool) {
	it, ok := b[labels[corev1.LabelInstanceTypeStable]]
	if !ok {
		return 0, false
	}
	return scheduling.NodePrice([]*cloudprovider.InstanceType{it}, labels)
}

// Family is an instance type's family: its family label, or the part of its name before the
// first dot.
func Family(it *cloudprovider.InstanceType) string {
	if f := it.Labels[karpv1.LabelInstanceFamily]; f != "" {
		return f
	}
	for i := range len(it.Name) {
		if it.Name[i] == '.' {
			return it.Name[:i]
		}
	}
	return it.Name
}

// sizes are pods' cpu (vCPU) and memory (bytes) requests, from the batch's request cache
// (the snapshot's, which the solver reads too); the zero value computes them every time.
type sizes struct{ requests *scheduling.PodRequestCache }

func (z sizes) of(p *corev1.Pod) (cpu, mem float64) { return z.requests.CPUAndMemory(p) }

// cost is a pod's attributed cost and vCPU on a node of this price and allocatable.
func (z sizes) cost(p *corev1.Pod, price float64, alloc corev1.ResourceList) (cost, cpu float64) {
	cpu, mem, gpu := z.requests.Amounts(p)
	return policies.AttributedCost(price, policies.Amounts{CPU: cpu, Memory: mem, GPU: gpu}, amountsOf(alloc)), cpu
}

// amountsOf is a node's allocatable as cost attribution reads it.
func amountsOf(alloc corev1.ResourceList) policies.Amounts {
	cpu, mem, gpu := scheduling.AmountsOf(alloc)
	return policies.Amounts{CPU: cpu, Memory: mem, GPU: gpu}
}

// charge adds a pod's cost and vCPU on a node to its namespace's usage.
func (z sizes) charge(u map[string]policies.Usage, p *corev1.Pod, price float64, alloc corev1.ResourceList, capacityType string, inFlight bool) float64 {
	cost, cpu := z.cost(p, price, alloc)
	x := u[p.Namespace]
	if inFlight {
		x.InFlightHourlyCost += cost
	} else {
		x.HourlyCost += cost
	}
	if capacityType == karpv1.CapacityTypeSpot {
		x.SpotCPU += cpu
	} else {
		x.OnDemandCPU += cpu
	}
	u[p.Namespace] = x
	return cost
}

// UsageOf is each namespace's usage on the nodes and in-flight NodeClaims: its pods'
// attributed cost and vCPU by capacity type. Nodes the book cannot price are charged nothing
// but their vCPU still counts towards the Spot share.
func UsageOf(nodes []*scheduling.Node, book PriceBook) map[string]policies.Usage {
	return usageOf(nodes, book, sizes{})
}

func usageOf(nodes []*scheduling.Node, book PriceBook, z sizes) map[string]policies.Usage {
	u := map[string]policies.Usage{}
	for _, n := range nodes {
		price := n.PricePerHour
		if price == 0 {
			price, _ = book.Price(n.Labels)
		}
		idle := price
		present := map[string]bool{}
		for _, p := range n.Pods {
			idle -= z.charge(u, p, price, n.Allocatable, capacityTypeOf(n), n.InFlight)
			present[p.Namespace] = true
		}
		for ns := range present {
			x := u[ns]
			x.IdleHourlyCost += max(0, idle)
			u[ns] = x
		}
	}
	return u
}

// capacityTypeOf is the capacity type a node's pods are counted under in the Spot share
// (scheduling.CapacityTypeOf: on-demand when no label says).
func capacityTypeOf(n *scheduling.Node) string {
	ct, _ := scheduling.CapacityTypeOf(n.Labels)
	return ct
}
