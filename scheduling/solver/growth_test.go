package solver

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// How a NodeClaim grows as pods are added one at a time (first fit, for pods with
// constraints): into a costlier type only when the increase costs no more than a node of the
// pod's own, or when the type covers the pods' mix of cpu and memory about as cheaply as the
// best type does; otherwise the pod goes elsewhere and the NodeClaim keeps its cheapest type.

// sized is a catalog of one family whose price grows with size, plus a premium type that is
// dear for what it holds.
func sized() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		itype("m5.large", "amd64", 2, 8, 0.10),
		itype("m5.xlarge", "amd64", 4, 16, 0.20),
		itype("m5.2xlarge", "amd64", 8, 32, 0.40),
		itype("x1.2xlarge", "amd64", 8, 32, 2.00),
	}
}

// constrained pods go first fit, not packed: a trivially satisfied requirement does it.
func constrained(p *corev1.Pod) {
	requireAll(expr("example.com/none", corev1.NodeSelectorOpDoesNotExist))(p)
}

func TestGrowth(t *testing.T) {
	np := func() []*NodePool { return []*NodePool{{NodePool: nodePool("default"), InstanceTypes: sized()}} }
	t.Run("a NodeClaim grows when a size up costs what a node of its own would", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("w", 3, "1500m", "2Gi", constrained), NodePools: np()})
		expectPlaced(t, r)
		// Three 1.5-cpu pods: m5.2xlarge ($0.40) or m5.xlarge + m5.large ($0.30); never three
		// m5.large ($0.30 too, the same) nor anything with x1.
		if r.PricePerHour() > 0.30+1e-9 {
			t.Fatalf("$%.2f for three 1.5-cpu pods, want at most $0.30", r.PricePerHour())
		}
		for _, c := range r.NodeClaims {
			if c.InstanceType.Name == "x1.2xlarge" {
				t.Fatal("the premium type was chosen")
			}
		}
	})
	t.Run("the premium type is never the priced one", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("w", 4, "1500m", "2Gi", constrained), NodePools: np()})
		expectPlaced(t, r)
		for _, c := range r.NodeClaims {
			if c.InstanceType.Name == "x1.2xlarge" {
				t.Fatalf("%d pods priced on x1.2xlarge", len(c.Pods))
			}
		}
	})
	t.Run("a pod that would need a much dearer type goes to a node of its own", func(t *testing.T) {
		// One small pod on a NodeClaim; a large pod that would push it to m5.2xlarge ($0.40)
		// where a node of its own costs $0.20 (m5.xlarge).
		ps := []*corev1.Pod{pod("small", "500m", "1Gi", constrained), pod("large", "3500m", "4Gi", constrained)}
		r := solve(t, &Input{Pods: ps, NodePools: np()})
		expectPlaced(t, r)
		if r.PricePerHour() > 0.30+1e-9 {
			t.Fatalf("$%.2f, want at most m5.xlarge + m5.large ($0.30)", r.PricePerHour())
		}
	})
	t.Run("many small pods fill a NodeClaim up a size at a time", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("w", 14, "500m", "1Gi", constrained), NodePools: np()})
		expectPlaced(t, r)
		// 7 cpu of pods: an m5.2xlarge ($0.40) holds them; smaller nodes cost the same per cpu.
		if r.PricePerHour() > 0.40+1e-9 {
			t.Fatalf("$%.2f for 7 cpu of pods, want $0.40", r.PricePerHour())
		}
	})
}

// With the GrowFreely option (disruption's one-node replacement), a NodeClaim grows into any
// type that fits, so that several pods end on one node.
func TestGrowFreely(t *testing.T) {
	ps := []*corev1.Pod{pod("small", "500m", "1Gi", constrained), pod("large", "3500m", "4Gi", constrained)}
	np := &NodePool{NodePool: nodePool("default", limited("nodes", "1")), InstanceTypes: sized()}
	r := solve(t, &Input{Pods: ps, NodePools: []*NodePool{np}, GrowFreely: true})
	expectPlaced(t, r)
	if len(r.NodeClaims) != 1 {
		t.Fatalf("%d NodeClaims, want one node for both", len(r.NodeClaims))
	}
	if r.NodeClaims[0].InstanceType.Name != "m5.xlarge" {
		t.Fatalf("type %s, want m5.xlarge (4 cpu for 4 cpu of pods; x1 holds them too, at ten times the price)", r.NodeClaims[0].InstanceType.Name)
	}
}

// A NodeClaim's options shrink to the types its pods fit as pods are added; the priced type
// is always the cheapest of the options.
func TestOptionsShrinkAsPodsArrive(t *testing.T) {
	types := sized()
	for n := 1; n <= 5; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := solve(t, &Input{Pods: pods("w", n, "1500m", "2Gi", constrained), NodePools: []*NodePool{{NodePool: nodePool("default", limited("nodes", "1")), InstanceTypes: types}},
				GrowFreely: true})
			if len(r.NodeClaims) != 1 {
				t.Fatalf("%d NodeClaims", len(r.NodeClaims))
			}
			c := r.NodeClaims[0]
			for _, it := range c.InstanceTypes {
				alloc := it.Allocatable()
				if alloc.Cpu().MilliValue() < int64(1500*len(c.Pods)) {
					t.Fatalf("%s offered for %d pods of 1.5 cpu", it.Name, len(c.Pods))
				}
			}
			if c.InstanceType != c.InstanceTypes[0] {
				t.Fatalf("priced at %s, the cheapest option is %s", c.InstanceType.Name, c.InstanceTypes[0].Name)
			}
		})
	}
}

// Policy offering filters with the same OfferingKey are applied once to a NodeClaim that holds
// pods of several namespaces, and the NodeClaim's offering passes every namespace's filter.
func TestSharedOfferingFilters(t *testing.T) {
	onDemand := &Constraints{AllowOffering: func(_ *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
		return o.CapacityType == karpv1.CapacityTypeOnDemand
	},
		OfferingKey: "on-demand-only", Source: "CapacityPolicy od"}
	hook := multiNS{"a": onDemand, "b": onDemand}
	var ps []*corev1.Pod
	for _, ns := range []string{"a", "b", "c"} {
		ps = append(ps, pods("w-"+ns, 2, "300m", "256Mi", func(p *corev1.Pod) { p.Namespace = ns })...)
	}
	r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default", bothCapacityTypes)), Policy: hook})
	expectPlaced(t, r)
	for _, c := range r.NodeClaims {
		for _, p := range c.Pods {
			if (p.Namespace == "a" || p.Namespace == "b") && c.Offering.CapacityType != karpv1.CapacityTypeOnDemand {
				t.Fatalf("a pod of %s on %s", p.Namespace, c.Offering.CapacityType)
			}
		}
	}
}

type multiNS map[string]*Constraints

func (m multiNS) Constraints(p *corev1.Pod, _ string) *Constraints { return m[p.Namespace] }
