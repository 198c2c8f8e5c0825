package solver

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// Bounds a decision must keep whatever the input, checked on random inputs of pods with
// requests only (where the bounds are exact): never dearer than a node per pod, never below
// the lower bound, never two NodeClaims whose pods one of the cheaper types would hold
// together, and the solve's cost does not grow when a pod is taken away.

// standalone is the cheapest available offering, among the types that hold the pod alone, a
// NodePool allowing on-demand only may launch: what the pod costs on a node of its own.
func standalone(p *corev1.Pod, types []*cloudprovider.InstanceType) float64 {
	cpu := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
	mem := p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]
	best := math.Inf(1)
	for _, it := range types {
		alloc := it.Allocatable()
		if alloc.Cpu().Cmp(cpu) < 0 || alloc.Memory().Cmp(mem) < 0 {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && o.CapacityType == karpv1.CapacityTypeOnDemand && o.Price < best {
				best = o.Price
			}
		}
	}
	return best
}

func randomPods(rng *rand.Rand, n int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		cpu := fmt.Sprintf("%dm", 100*(1+rng.IntN(30)))
		mem := fmt.Sprintf("%dMi", 256*(1+rng.IntN(40)))
		out = append(out, pod(fmt.Sprintf("p-%d", i), cpu, mem))
	}
	return out
}

func TestCostBoundsOnRandomPods(t *testing.T) {
	types := wideCatalog()
	for seed := range 40 {
		rng := rand.New(rand.NewPCG(uint64(seed), 5))
		ps := randomPods(rng, 5+rng.IntN(120))
		r := solve(t, &Input{Pods: ps, NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: types}}})
		var upper float64
		placeable := 0
		for _, p := range ps {
			if s := standalone(p, types); !math.IsInf(s, 1) {
				upper += s
				placeable++
			}
		}
		placed := 0
		for _, c := range r.NodeClaims {
			placed += len(c.Pods)
		}
		if placed != placeable {
			t.Fatalf("seed %d: %d pods placed, %d fit some type alone", seed, placed, placeable)
		}
		if got := r.PricePerHour(); got > upper+1e-9 {
			t.Errorf("seed %d: $%.4f an hour, dearer than a node per pod ($%.4f)", seed, got, upper)
		}
		if got := r.PricePerHour(); got < r.LowerBoundPerHour-1e-9 {
			t.Errorf("seed %d: $%.4f below the lower bound $%.4f", seed, got, r.LowerBoundPerHour)
		}
		// Merging pairs of NodeClaims onto one cheaper type (disjoint pairs, greedily) saves
		// at most 3% of the cost: the solver is a heuristic, but not a wasteful one.
		merged, saved := map[int]bool{}, 0.0
		for i := 0; i < len(r.NodeClaims); i++ {
			for j := i + 1; j < len(r.NodeClaims) && !merged[i]; j++ {
				if merged[j] {
					continue
				}
				if _, price := mergeable(r.NodeClaims[i], r.NodeClaims[j], types); price > 0 {
					merged[i], merged[j] = true, true
					saved += r.NodeClaims[i].Offering.Price + r.NodeClaims[j].Offering.Price - price
				}
			}
		}
		if cost := r.PricePerHour(); saved > 0.03*cost {
			t.Errorf("seed %d: merging %d NodeClaims pairwise would save $%.4f of $%.4f", seed, len(merged), saved, cost)
		}
	}
}

// mergeable names the cheapest type whose on-demand offering holds both NodeClaims' pods for
// less than the two cost, with its price; "" and 0 when none.
func mergeable(a, b *NodeClaim, types []*cloudprovider.InstanceType) (string, float64) {
	cpu := a.Requests.Cpu().DeepCopy()
	cpu.Add(*b.Requests.Cpu())
	mem := a.Requests.Memory().DeepCopy()
	mem.Add(*b.Requests.Memory())
	pods := a.Requests[corev1.ResourcePods]
	pods.Add(b.Requests[corev1.ResourcePods])
	name, best := "", a.Offering.Price+b.Offering.Price-0.001
	for _, it := range types {
		alloc := it.Allocatable()
		if alloc.Cpu().Cmp(cpu) < 0 || alloc.Memory().Cmp(mem) < 0 {
			continue
		}
		if p := alloc[corev1.ResourcePods]; p.Cmp(pods) < 0 {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && o.CapacityType == karpv1.CapacityTypeOnDemand && o.Price < best {
				name, best = it.Name, o.Price
			}
		}
	}
	if name == "" {
		return "", 0
	}
	return name, best
}

// Taking a pod away never makes the decision dearer by more than a rounding margin: the rest
// fit on what held them before.
func TestFewerPodsCostNoMore(t *testing.T) {
	types := wideCatalog()
	for seed := range 25 {
		rng := rand.New(rand.NewPCG(uint64(seed), 9))
		ps := randomPods(rng, 10+rng.IntN(60))
		all := solve(t, &Input{Pods: ps, NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: types}}})
		drop := rng.IntN(len(ps))
		fewer := append(append([]*corev1.Pod(nil), ps[:drop]...), ps[drop+1:]...)
		less := solve(t, &Input{Pods: fewer, NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: types}}})
		// A greedy heuristic may pack differently; a pod less must not cost more than 5%.
		if less.PricePerHour() > all.PricePerHour()*1.05+1e-9 {
			t.Errorf("seed %d: $%.4f for %d pods, $%.4f without %s", seed, all.PricePerHour(), len(ps), less.PricePerHour(), ps[drop].Name)
		}
	}
}

// Offerings in one zone only: pods spread over zones go where the offerings are, and a zone
// without any stays empty; a pod required in it stays pending.
func TestOfferingsLimitZones(t *testing.T) {
	types := testCatalog()
	for _, it := range types {
		for i := range it.Offerings {
			it.Offerings[i].Available = it.Offerings[i].Zone != "z-c"
		}
	}
	np := &NodePool{NodePool: nodePool("default"), InstanceTypes: types}
	s := spreadSpec{key: karpv1.LabelTopologyZone, skew: 1}
	r := solve(t, &Input{Pods: pods("web", 4, "100m", "128Mi", labelled("web"), s.apply), NodePools: []*NodePool{np}})
	expectPlaced(t, r)
	if got := podsPer(r, nil, karpv1.LabelTopologyZone); got["z-c"] != 0 || got["z-a"] != 2 || got["z-b"] != 2 {
		t.Fatalf("pods per zone %v, want 2 in z-a and z-b, none in z-c (no offering there)", got)
	}
	r = solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", selector(karpv1.LabelTopologyZone, "z-c"))}, NodePools: []*NodePool{np}})
	expectUnschedulable(t, r, "")
}

// A NodePool whose instance types have no offering available at all is left out, with why.
func TestNoAvailableOffering(t *testing.T) {
	types := testCatalog()
	for _, it := range types {
		for i := range it.Offerings {
			it.Offerings[i].Available = false
		}
	}
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi")}, NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: types}}})
	expectUnschedulable(t, r, "available offering")
}

// Prices decide among types that fit: making the cheapest type dearer moves the choice.
func TestPricesDecide(t *testing.T) {
	for _, tc := range []struct {
		dearer string
		want   string
	}{{"", "m6g.large"}, {"m6g.large", "c5.large"}, {"c5.large", "m6g.large"}} {
		types := testCatalog()
		for _, it := range types {
			if it.Name == tc.dearer {
				for i := range it.Offerings {
					it.Offerings[i].Price *= 10
				}
			}
		}
		r := solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi")}, NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: types}}})
		if got := r.NodeClaims[0].InstanceType.Name; got != tc.want {
			t.Errorf("%s ten times dearer: %s, want %s", tc.dearer, got, tc.want)
		}
	}
}

// Allocatable, not capacity, decides what fits: a type whose overhead leaves too little is
// not chosen.
func TestAllocatableNotCapacity(t *testing.T) {
	types := testCatalog()
	for _, it := range types {
		if it.Name == "m6g.large" || it.Name == "c5.large" || it.Name == "m5.large" {
			it.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}
		}
	}
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi")}, NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: types}}})
	expectPlaced(t, r)
	if got := r.NodeClaims[0].InstanceType.Name; got == "m6g.large" || got == "c5.large" || got == "m5.large" {
		t.Fatalf("%s has 500m allocatable, chosen for a 1-cpu pod", got)
	}
}
